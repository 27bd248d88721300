# Sourced by scripts/image.sh and scripts/deploy-check.sh: podman, buildah,
# mmdebstrap and the settings this machine kind needs, without touching the
# machine's own /etc/containers.
#
# On these machines podman needs the runc runtime (crun fails on the kernel's
# hybrid cgroups), the cgroupfs cgroup manager and lower default ulimits; all
# three go into a containers.conf of our own, named by CONTAINERS_CONF.
# netavark (the network backend) sets up container networks with iptables,
# which a fresh machine of this kind does not have: without it every `RUN`
# of an image build fails with "netavark: No such file or directory".
HUB_PODMAN_DIR=${HUB_PODMAN_DIR:-$HOME/.cache/hub-podman}
podman_log() { printf '%s: %s\n' "${0##*/}" "$*" >&2; }
podman_as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

podman_missing=()
for tool in podman:podman buildah:buildah mmdebstrap:mmdebstrap runc:runc binutils:objcopy \
            aardvark-dns:/usr/lib/podman/aardvark-dns netavark:/usr/lib/podman/netavark \
            iptables:iptables; do
  pkg=${tool%%:*}; bin=${tool#*:}
  command -v "$bin" >/dev/null 2>&1 || [ -x "$bin" ] || podman_missing+=("$pkg")
done
/usr/bin/python3 -c 'import yaml, aiosmtpd, trustme' >/dev/null 2>&1 \
  || podman_missing+=(python3-yaml python3-aiosmtpd python3-trustme)
if [ ${#podman_missing[@]} -gt 0 ]; then
  podman_log "installing ${podman_missing[*]}"
  podman_as_root apt-get update -qq
  podman_as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
    "${podman_missing[@]}" uidmap slirp4netns fuse-overlayfs >/dev/null
fi

mkdir -p "$HUB_PODMAN_DIR"
cat > "$HUB_PODMAN_DIR/containers.conf" <<'CONF'
[containers]
default_ulimits = ["nofile=1024:1024", "nproc=1000:1000"]

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
CONF
export CONTAINERS_CONF="$HUB_PODMAN_DIR/containers.conf"
