#!/usr/bin/env bash
# Regenerates testenv/go.mod's replace block from k8s.io/kubernetes's own go.mod.
# k8s.io/kubernetes requires its staging modules at v0.0.0 and replaces them with local
# paths, which a dependent module cannot see; it must pin each one to the matching
# published v0.X.Y itself. Usage: hack/update-go-mod.sh [KUBERNETES_VERSION]
set -euo pipefail
cd "$(dirname "$0")/.."
version="${1:-v1.37.2}"
staging="v0${version#v1}"
gomod=$(go mod download -json "k8s.io/kubernetes@${version}" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
{
  sed '/^replace (/,$d' go.mod
  echo "replace ("
  grep -E '^\s*k8s.io/[a-z0-9-]+ => ./staging/' "$gomod" | awk -v v="$staging" '{print "\t" $1 " => " $1 " " v}'
  echo ")"
} >go.mod.new
mv go.mod.new go.mod
go get "k8s.io/kubernetes@${version}"
go mod tidy
