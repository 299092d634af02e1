#!/bin/bash
# Builds kumaco for one platform as a single static file, stripped.
#
#   hack/build-static.sh TRIPLE BASE_DIR OUT
#
# Cargo builds in BASE_DIR/TRIPLE: one build directory per platform, so that building one
# platform never waits on cargo's lock held by another's build (.ci/run builds arm64 in
# the background while the tests build and run the amd64 image).
# TRIPLE: x86_64-unknown-linux-gnu or aarch64-unknown-linux-gnu. glibc with crt-static:
# kube uses rustls with ring, so nothing else is linked, and the file runs FROM scratch
# and on any Linux of that architecture. The other architecture is cross-compiled with
# Debian's cross toolchain (gcc-aarch64-linux-gnu or gcc-x86-64-linux-gnu: ring's C and
# assembly parts, and the final link) after `rustup target add TRIPLE`.
set -euo pipefail
triple=$1 target_dir=$2/$1 out=$3

host=$(rustc -vV | sed -n 's/^host: //p')
arch=${triple%%-*}
prefix=""
if [ "$triple" != "$host" ]; then
  prefix="${arch/_/-}-linux-gnu-"
  upper=$(echo "$triple" | tr 'a-z-' 'A-Z_')
  export "CARGO_TARGET_${upper}_LINKER=${prefix}gcc" \
    "CC_${triple//-/_}=${prefix}gcc" "AR_${triple//-/_}=${prefix}ar"
fi
# Only the target's code gets crt-static (with --target, RUSTFLAGS leave build scripts
# and proc macros, which run here, alone).
RUSTFLAGS='-C target-feature=+crt-static' cargo build -q --profile dist --locked \
  --target "$triple" --target-dir "$target_dir" --bin kumaco
bin="$target_dir/$triple/dist/kumaco"
if readelf -l "$bin" | grep -q 'program interpreter'; then
  echo "$bin is dynamically linked: it cannot run FROM scratch" >&2
  exit 1
fi
mkdir -p "$(dirname "$out")"
# Symbols are a fifth of the binary and useless to users (panics still name their
# source location).
"${prefix}strip" -o "$out" "$bin"
