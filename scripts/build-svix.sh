#!/usr/bin/env bash
# Builds Svix's open-source server (svix-server) in release, for the comparison
# in scripts/bench-webhooks.sh and scripts/bench-svix.sh. Not part of `make
# test`: it needs Svix's sources, which no package registry carries.
#
# Usage: scripts/build-svix.sh <svix-webhooks> <omniqueue-rs> <rust-executable-metadata> [out-dir]
#   each source is a git repository (bare or not) or a plain directory holding
#   github.com/svix/<name>; out-dir defaults to $HOME/.cache/svix-build.
# Prints the path of the built svix-server, to pass as SVIX_SERVER=...
#
# What it does, and why:
#   - checks out svix-webhooks at the revision given (SVIX_REV, default HEAD)
#     and its two git dependencies at the revisions its server/Cargo.lock pins
#     (omniqueue-rs, rust-executable-metadata), and points cargo at them with
#     [patch."https://github.com/svix/..."] path entries: cargo cannot fetch
#     from GitHub here;
#   - Svix pins a hyper fork (github.com/svix/hyper, rev 7d3bff97) that is not
#     reachable either. The fork is crates.io hyper with three small changes
#     (HeaderCaseMap public, HeaderCaseMap::get, From<HeaderMap<Bytes>>),
#     kept here as scripts/lib/svix-hyper-headercasemap.patch (taken from the
#     fork's branch v1-headercasemap). The script downloads hyper 1.11.0 (the
#     version Svix pins) from crates.io, applies the patch and patches
#     crates-io hyper to that path;
#   - builds with `cargo build --release -p svix-server` under nice, in a
#     target directory of its own (about 18 minutes on 2 cores).
set -euo pipefail
[ $# -ge 3 ] || { sed -n '2,10p' "$0" >&2; exit 2; }
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${4:-$HOME/.cache/svix-build}
SVIX_REV=${SVIX_REV:-HEAD}
HYPER_VERSION=1.11.0
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)

# checkout <source> <rev> <dest>: the tree at <rev> of a git repository, or a
# copy of a plain directory (then <rev> is not checked).
checkout() {
  rm -rf "$3"; mkdir -p "$3"
  if git -C "$1" rev-parse --git-dir >/dev/null 2>&1; then
    git -C "$1" archive "$2" | tar -x -C "$3"
  else
    cp -a "$1"/. "$3"/
  fi
}
pinned() { # pinned <package>: the git rev server/Cargo.lock gives that package
  awk -v p="$1" '$0 == "name = \"" p "\"" {f=1} f && /^source/ {sub(/.*#/, ""); sub(/".*/, ""); print; exit}' \
    "$OUT/svix-webhooks/server/Cargo.lock"
}

checkout "$1" "$SVIX_REV" "$OUT/svix-webhooks"
OMNI_REV=$(pinned omniqueue); META_REV=$(pinned rust-executable-metadata)
[ -n "$OMNI_REV" ] && [ -n "$META_REV" ] || { echo "build-svix: no pinned git revisions in server/Cargo.lock" >&2; exit 1; }
checkout "$2" "$OMNI_REV" "$OUT/omniqueue-rs"
checkout "$3" "$META_REV" "$OUT/rust-executable-metadata"

rm -rf "$OUT/hyper"; mkdir -p "$OUT/hyper"
curl -fsSL "https://static.crates.io/crates/hyper/hyper-$HYPER_VERSION.crate" | tar -xz -C "$OUT/hyper" --strip-components=1
patch -s -d "$OUT/hyper" -p1 < "$HERE/lib/svix-hyper-headercasemap.patch"

# Replace Svix's [patch.crates-io] (the unreachable fork) with ours, and add
# path patches for the two git dependencies.
CARGO_TOML="$OUT/svix-webhooks/server/Cargo.toml"
sed -i '/^\[patch.crates-io\]/,$d' "$CARGO_TOML"
cat >> "$CARGO_TOML" <<TOML
[patch.crates-io]
hyper = { path = "$OUT/hyper" }

[patch."https://github.com/svix/omniqueue-rs"]
omniqueue = { path = "$OUT/omniqueue-rs/omniqueue" }

[patch."https://github.com/svix/rust-executable-metadata"]
rust-executable-metadata = { path = "$OUT/rust-executable-metadata" }
TOML

cd "$OUT/svix-webhooks/server"
CARGO_TARGET_DIR="$OUT/target" nice -n 19 cargo build --release -q -p svix-server >&2
echo "$OUT/target/release/svix-server"
