#!/bin/bash
# What a make target needs on this machine, checked before anything is built.
#
#   hack/check-prereqs.sh TARGET...    exit 0, or 1 with ONE message naming every missing
#                                      piece, why it is needed and how to install it
#   hack/check-prereqs.sh --install TARGET...
#                                      the same, after installing the missing Debian
#                                      packages where it can (as root, with apt-get): it
#                                      says which, runs apt-get, then checks again. The
#                                      Makefile and .ci/run call it so.
#
# TARGETs: the Makefile's demo, demo-node, test, image, dist, testenv, lint, bench, smoke,
# chaos, chaos-budgets, diff-long, and ci (everything .ci/run does). The Makefile runs it
# for the goals it is given; `ENGINE=docker` checks docker instead of podman for `make image`.
#
# Only bash builtins and the programs checked are used, so that it runs on a machine
# that lacks anything else (tests/prereqs.rs runs it with a PATH of its choosing).
set -u

install=false
if [ "${1:-}" = "--install" ]; then
  install=true
  shift
fi
if [ $# -eq 0 ]; then
  echo "usage: hack/check-prereqs.sh [--install] TARGET..." >&2
  exit 2
fi

engine=${ENGINE:-podman}
# Debian's multiarch directory: x86_64-linux-gnu, aarch64-linux-gnu.
multiarch="${HOSTTYPE:-x86_64}-linux-gnu"
# The other architecture kumaco ships for (make dist cross-compiles it and runs it under
# qemu): its Rust target, Debian's cross compiler package and qemu's user emulator.
case "${HOSTTYPE:-x86_64}" in
  aarch64) other=x86_64 other_pkg=x86-64 ;;
  *) other=aarch64 other_pkg=aarch64 ;;
esac

# What each target needs, as names of the checks below.
needs=()
add() { needs+=("$@"); }
for target in "$@"; do
  case "$target" in
    # The demo builds the test API server from Go modules and kumaco with cargo.
    demo | diff-long) add rust go make ;;
    bench) add rust make ;;
    lint) add rust rustfmt clippy make ;;
    image) add rust make binutils libc engine ca-certificates ;;
    dist) add rust go make binutils libc engine ca-certificates cross qemu ;;
    testenv) add rust go make libc engine runc ;;
    smoke | chaos | chaos-budgets) add rust go make faketime ;;
    demo-node) add rust go make binutils libc engine runc ca-certificates root iptables iproute2 cni ;;
    test | ci) add rust go make binutils libc engine runc ca-certificates root iptables iproute2 cni faketime script
      [ "$target" = ci ] && add rustfmt clippy cross qemu ;;
    *)
      echo "hack/check-prereqs.sh: unknown target '$target'" >&2
      exit 2
      ;;
  esac
done

have() { command -v "$1" >/dev/null 2>&1; }
missing=()   # "what|why|how to install" lines
packages=()  # Debian packages that install them
miss() {
  missing+=("$1|$2|$3")
  if [ -n "${4:-}" ]; then packages+=("$4"); fi
}

# Fills `missing` and `packages` with what the machine lacks for `needs`.
check() {
  missing=()
  packages=()
  declare -A done_checks=()
  for need in "${needs[@]}"; do
    [ -n "${done_checks[$need]:-}" ] && continue
    done_checks[$need]=1
    case "$need" in
      rust)
        if ! have cargo || ! have rustc; then
          miss "cargo (Rust >= 1.89)" "builds kumaco and its tests" \
            "install Rust with rustup: https://rustup.rs (stable toolchain)"
        elif [[ "$(rustc --version 2>/dev/null)" =~ ^rustc\ 1\.([0-9]+) ]] && [ "${BASH_REMATCH[1]}" -lt 89 ]; then
          miss "Rust >= 1.89 ($(rustc --version) found)" "kumaco's rust-version" "rustup update stable"
        fi
        # rustc links with the system C compiler.
        have cc || miss "cc (a C compiler and linker)" "rustc links every binary with it; the pause image's pause.c is compiled with it" \
          "apt-get install gcc" gcc
        ;;
      rustfmt)
        have cargo && { cargo fmt --version >/dev/null 2>&1 || miss "rustfmt" "make lint checks formatting" "rustup component add rustfmt"; } ;;
      clippy)
        have cargo && { cargo clippy --version >/dev/null 2>&1 || miss "clippy" "make lint" "rustup component add clippy"; } ;;
      go)
        if ! have go; then
          miss "go (Go >= 1.26)" "builds the real kube-apiserver (k8s.io/kubernetes v1.37) and the other Go test tools from their modules" \
            "install Go >= 1.26 from https://go.dev/dl and put its bin/ on PATH (Debian's golang package is older)"
        elif [[ "$(GOTOOLCHAIN=local go env GOVERSION 2>/dev/null)" =~ ^go1\.([0-9]+) ]] && [ "${BASH_REMATCH[1]}" -lt 26 ]; then
          miss "Go >= 1.26 ($(GOTOOLCHAIN=local go env GOVERSION) found)" "k8s.io/kubernetes v1.37 needs it" \
            "install Go >= 1.26 from https://go.dev/dl"
        fi
        ;;
      make) have make || miss "make" "runs these targets" "apt-get install make" make ;;
      binutils)
        { have readelf && have strip; } || miss "readelf, strip (binutils)" \
          "make image checks that kumaco is static and strips it" "apt-get install binutils" binutils ;;
      libc)
        [ -f "/usr/lib/$multiarch/libc.a" ] || miss "the static C library (/usr/lib/$multiarch/libc.a)" \
          "kumaco's image binary is linked static (crt-static), and so is the real node's pause binary" \
          "apt-get install libc6-dev" libc6-dev ;;
      engine)
        if [ "$engine" = podman ]; then
          have podman || miss "podman" "builds and runs kumaco's image (make image, tests/deploy_image.rs) and builds the real node's pause image" \
            "apt-get install podman" podman
        else
          have "$engine" || miss "$engine (ENGINE=$engine)" "builds kumaco's image" "install $engine, or leave ENGINE unset for podman"
        fi
        ;;
      runc)
        have runc || miss "runc" "podman's runtime here (crun refuses hybrid cgroups) and the real node's containerd runtime" \
          "apt-get install runc" runc ;;
      ca-certificates)
        [ -f /etc/ssl/certs/ca-certificates.crt ] || miss "ca-certificates (/etc/ssl/certs/ca-certificates.crt)" \
          "the image carries the host's CA bundle" "apt-get install ca-certificates" ca-certificates ;;
      root)
        [ "${EUID:-0}" -eq 0 ] || miss "root" "the real node (tests/real_node.rs, make demo-node) runs a kubelet and containerd, a bridge and an iptables rule" \
          "run it as root (sudo make ...)" ;;
      iptables)
        have iptables || miss "iptables" "the real node's DNAT rule for the kubernetes Service" "apt-get install iptables" iptables ;;
      iproute2)
        have ip || miss "ip (iproute2)" "the real node's bridge and network namespaces" "apt-get install iproute2" iproute2 ;;
      cni)
        [ -x /usr/lib/cni/bridge ] || miss "the CNI plugins (/usr/lib/cni/bridge)" "the real node's Pod network" \
          "apt-get install containernetworking-plugins" containernetworking-plugins ;;
      faketime)
        [ -e "/usr/lib/$multiarch/faketime/libfaketime.so.1" ] || miss "libfaketime (/usr/lib/$multiarch/faketime/libfaketime.so.1)" \
          "steps kumaco's wall clock (tests/clock.rs, kumaco-chaos in make smoke)" "apt-get install faketime" faketime ;;
      cross)
        have "$other-linux-gnu-gcc" || miss "$other-linux-gnu-gcc (a cross compiler for $other)" \
          "make dist builds kumaco for $other too (ring's C parts, the link, the static C library)" \
          "apt-get install gcc-$other_pkg-linux-gnu" "gcc-$other_pkg-linux-gnu"
        if have rustup; then
          rustup target list --installed 2>/dev/null | grep -qx "$other-unknown-linux-gnu" ||
            miss "Rust's $other-unknown-linux-gnu target" "make dist cross-compiles kumaco for $other" \
              "rustup target add $other-unknown-linux-gnu"
        fi
        ;;
      qemu)
        have "qemu-$other-static" || miss "qemu-$other-static (qemu user emulation)" \
          "make dist runs the $other binary it built (--version, validate, plan)" \
          "apt-get install qemu-user-static" qemu-user-static ;;
      script)
        have script || miss "script (bsdutils)" "runs kumaco on a pseudo-terminal (tests/cli.rs: log colours)" \
          "apt-get install bsdutils" bsdutils ;;
    esac
  done
}

check
installed=false
if $install && [ ${#packages[@]} -gt 0 ] && [ "${EUID:-0}" -eq 0 ] && have apt-get; then
  {
    echo "Installing the Debian packages $* needs: apt-get install ${packages[*]}"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${packages[@]}"
  } >&2
  installed=true
  check
fi
[ ${#missing[@]} -eq 0 ] && exit 0

{
  echo "Missing prerequisites for $* (nothing was built):"
  for m in "${missing[@]}"; do
    IFS='|' read -r what why how <<<"$m"
    echo "  - $what: $why."
    echo "      $how"
  done
  if [ ${#packages[@]} -gt 0 ]; then
    echo "Debian/Ubuntu, all at once: apt-get install ${packages[*]}"
    if $installed; then
      echo "(apt-get ran, above, and did not install them.)"
    elif $install; then
      echo "(Installed by make itself when run as root on a machine with apt-get.)"
    fi
  fi
  echo "(docs/development.md, \"What \`make test\` needs\", says why each is needed.)"
} >&2
exit 1
