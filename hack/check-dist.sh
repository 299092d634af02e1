#!/bin/bash
# Checks what `make dist` wrote, as a user of the release would use it.
#
#   hack/check-dist.sh DIR VERSION
#
# - SHA256SUMS lists every other file and matches them;
# - each tarball holds kumaco-VERSION-linux-ARCH/{kumaco,LICENSE,README.md}, the binary
#   static and built for ARCH;
# - the binaries run: natively for this machine's architecture, under qemu user
#   emulation (qemu-user-static) for the other: --version, validate on the windows
#   fixtures, plan on a windows file and a nodes file;
# - the image archive is one manifest list naming linux/amd64 and linux/arm64;
# - the SBOM is CycloneDX JSON naming kumaco and the crates it is built from;
# - the chart package is kumaco-VERSION.tgz with the chart's files.
# Any failure names what is wrong and exits 1.
set -euo pipefail
dir=$1 version=$2
fail() { echo "hack/check-dist.sh: $*" >&2; exit 1; }
cd "$dir"

[ -f SHA256SUMS ] || fail "no SHA256SUMS in $dir"
sha256sum --quiet -c SHA256SUMS || fail "SHA256SUMS does not match the files"
listed=$(awk '{ print $2 }' SHA256SUMS | sort)
present=$(ls | grep -v '^SHA256SUMS$' | sort)
[ "$listed" = "$present" ] || fail "SHA256SUMS lists [$listed], the directory holds [$present]"

repo=$(cd "$OLDPWD" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
host=$(uname -m)
for arch in amd64 arm64; do
  name=kumaco-$version-linux-$arch
  [ -f "$name.tar.gz" ] || fail "no $name.tar.gz"
  contents=$(tar -tzf "$name.tar.gz" | sort | tr '\n' ' ')
  want="$name/ $name/LICENSE $name/README.md $name/kumaco "
  [ "$contents" = "$want" ] || fail "$name.tar.gz holds [$contents], not [$want]"
  tar -xzf "$name.tar.gz" -C "$work"
  bin="$work/$name/kumaco"
  case $arch in
    amd64) machine="X86-64" qemu="qemu-x86_64-static" native=x86_64 ;;
    arm64) machine="AArch64" qemu="qemu-aarch64-static" native=aarch64 ;;
  esac
  readelf -h "$bin" | grep -q "Machine:.*$machine" || fail "$name/kumaco is not an $machine binary"
  if readelf -l "$bin" | grep -q 'program interpreter'; then
    fail "$name/kumaco is dynamically linked"
  fi
  run=()
  if [ "$host" != "$native" ]; then
    command -v "$qemu" >/dev/null ||
      fail "$qemu is missing: the $arch binary runs under it (apt-get install qemu-user-static)"
    run=("$qemu")
  fi
  out=$("${run[@]}" "$bin" --version) || fail "$name/kumaco --version failed"
  [[ "$out" == "kumaco $version "* ]] || fail "$name/kumaco --version printed: $out"
  out=$("${run[@]}" "$bin" validate "$repo/tests/fixtures/windows-valid.yaml" 2>&1) ||
    fail "$name/kumaco validate tests/fixtures/windows-valid.yaml failed: $out"
  out=$("${run[@]}" "$bin" plan --windows "$repo/tests/fixtures/windows-valid.yaml" \
    --nodes "$repo/tests/fixtures/nodes.yaml" --from 2026-01-05T00:00:00Z --for 24h 2>&1) ||
    fail "$name/kumaco plan failed: $out"
  grep -q 'NODE' <<<"$out" || fail "$name/kumaco plan printed no table: $out"
  echo "ok: $name ($machine, static${run:+, run under ${run[0]}})"
done

image=kumaco-$version-image.oci.tar
[ -f "$image" ] || fail "no $image"
mkdir "$work/image"
tar -xf "$image" -C "$work/image"
index=$(cat "$work/image/index.json")
# The archive's index names the manifest list; the list names one image per platform.
list_digest=$(grep -o '"digest":"sha256:[0-9a-f]*"' <<<"$index" | head -n 1 | cut -d: -f3 | tr -d '"')
[ -n "$list_digest" ] || fail "$image: index.json names no manifest"
list=$(cat "$work/image/blobs/sha256/$list_digest")
for arch in amd64 arm64; do
  grep -q "\"architecture\":\"$arch\"" <<<"$list" || fail "$image's manifest list has no linux/$arch: $list"
done
echo "ok: $image (linux/amd64, linux/arm64)"

sbom=kumaco-$version.cdx.json
[ -f "$sbom" ] || fail "no $sbom"
grep -q '"bomFormat": *"CycloneDX"' "$sbom" || fail "$sbom is not CycloneDX JSON"
for crate in kube-client k8s-openapi rustls tokio jiff; do
  grep -q "\"name\": *\"$crate\"" "$sbom" || fail "$sbom does not list $crate"
done
echo "ok: $sbom ($(grep -c '"purl"' "$sbom") components)"

chart=kumaco-$version.tgz
[ -f "$chart" ] || fail "no $chart"
files=$(tar -tzf "$chart")
grep -qx 'kumaco/Chart.yaml' <<<"$files" || fail "$chart has no kumaco/Chart.yaml"
grep -qx 'kumaco/templates/uninstall-hook.yaml' <<<"$files" || fail "$chart lacks the uninstall hook"
echo "ok: $chart"
