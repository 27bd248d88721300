#!/usr/bin/env bash
# make image: build the one image (every service binary) with podman, without
# an image registry. The binaries are built here (release, --locked), the
# runtime base is made by mmdebstrap from Debian's own packages, and podman
# builds deploy/Dockerfile's `runtime` stage on top of the two. The same
# Dockerfile builds everything itself on a machine that reaches a registry.
#
#   HUB_IMAGE (default localhost/hub:<version>) names the result.
#   HUB_IMAGE_PROFILE (default release) is the cargo profile of the binaries
#   (dev: a quicker image for working on the chart; never one to ship).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/podman-env.sh
. scripts/podman-env.sh
CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
VERSION=$(sed -n 's/^appVersion: "\(.*\)"/\1/p' deploy/helm/hub/Chart.yaml | head -n1)
HUB_IMAGE=${HUB_IMAGE:-localhost/hub:$VERSION}
BINARIES=(identity org-billing kyc server-product webhook-dispatcher agent core-api-gateway console)

# The runtime base: Debian bookworm, minbase plus CA certificates, zone data
# and OpenSSL's library (identity's passkeys: webauthn-rs).
# Rebuilt when this recipe changes (its hash is the tag).
SUITE=bookworm
INCLUDE=ca-certificates,tzdata,libssl3
RECIPE="$SUITE $INCLUDE minbase nodoc-v1"
BASE_TAG=$(printf '%s' "$RECIPE" | sha256sum | cut -c1-12)
BASE="localhost/hub-base:$SUITE-$BASE_TAG"
if ! podman image exists "$BASE"; then
  podman_log "building the runtime base $BASE with mmdebstrap"
  mmdebstrap --variant=minbase --include="$INCLUDE" \
    --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*.bin' \
    "$SUITE" - | podman import - "$BASE" >/dev/null
fi

PROFILE=${HUB_IMAGE_PROFILE:-release}
podman_log "building the binaries ($PROFILE)"
# shellcheck disable=SC2046
cargo build --profile "$PROFILE" --locked $(printf -- ' -p %s' "${BINARIES[@]}")
OUT_DIR=$CARGO_TARGET_DIR/$([ "$PROFILE" = dev ] && echo debug || echo "$PROFILE")

CONTEXT="$CARGO_TARGET_DIR/image-context"
rm -rf "$CONTEXT"
mkdir -p "$CONTEXT/bin"
# The line tables (the release profile keeps them for profiling) stay on the
# host; symbols stay in, so backtraces still name functions.
for b in "${BINARIES[@]}"; do objcopy --strip-debug "$OUT_DIR/$b" "$CONTEXT/bin/$b"; done

REVISION=$(git rev-parse HEAD 2>/dev/null || echo unknown)
CREATED=$(date -u +%Y-%m-%dT%H:%M:%SZ)
podman_log "assembling $HUB_IMAGE"
# Docker format: OCI images carry no HEALTHCHECK.
podman build --quiet --format docker --pull=never \
  -f deploy/Dockerfile --target runtime \
  --build-arg BINARIES=prebuilt --build-arg RUNTIME_BASE="$BASE" \
  --build-arg VERSION="$VERSION" --build-arg REVISION="$REVISION" --build-arg CREATED="$CREATED" \
  -t "$HUB_IMAGE" "$CONTEXT" >/dev/null
# The image this tag named before is now dangling: drop it (and only ours).
podman image prune -f --filter label=org.opencontainers.image.title=hub >/dev/null
podman_log "built $HUB_IMAGE ($(podman image inspect --format '{{.Size}}' "$HUB_IMAGE" | numfmt --to=iec))"
