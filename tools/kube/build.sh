#!/usr/bin/env bash
# The cluster tests' control plane (tests/cluster/): kube-apiserver, kube-scheduler,
# kube-controller-manager and etcd, compiled from the Go modules pinned here, once per machine.
#
#   tools/kube/build.sh           build what is missing, then print the directory of the binaries
#   tools/kube/build.sh --check   print that directory if it holds every binary, else exit 1
#
# The binaries live outside the checkout, in
# ${XDG_CACHE_HOME:-~/.cache}/inference-fleet/kube/<kubernetes version>/<key>/, where the key
# hashes go.mod, go.sum and the main package of both modules and the Go version: a clean clone on
# the same machine finds them, and a change of any pin builds a new set beside the old one.
# Set KUBE_BUILD_JOBS to limit parallel compilation (go build -p) on a shared machine.
# Timings and the choices behind the modules: docs/real-control-plane.md.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
binaries=(kube-apiserver kube-scheduler kube-controller-manager etcd)

version=$(awk '$1 == "k8s.io/kubernetes" { print $2 }' "$here/go.mod")
if [[ ! $version =~ ^v([0-9]+)\.([0-9]+)\.[0-9]+$ ]]; then
	echo "build.sh: no k8s.io/kubernetes version in $here/go.mod" >&2
	exit 1
fi
major=${BASH_REMATCH[1]}
minor=${BASH_REMATCH[2]}

key=$(
	cd "$here"
	{
		go env GOVERSION
		cat go.mod go.sum cmd/*/main.go etcd/go.mod etcd/go.sum etcd/main.go
	} | sha256sum | cut -c1-16
)
root=${XDG_CACHE_HOME:-$HOME/.cache}/inference-fleet/kube
target=$root/$version/$key

complete() {
	local binary
	for binary in "${binaries[@]}"; do
		[[ -x $1/$binary ]] || return 1
	done
}

# shellcheck source=../cached-build.sh
source "$here/../cached-build.sh"
cached_build_begin "$target" "$root" "control plane" "kube (tools/kube/build.sh)" "${1:-}"
jobs=()
if [[ -n ${KUBE_BUILD_JOBS:-} ]]; then
	jobs=(-p "$KUBE_BUILD_JOBS")
fi
# -trimpath and no VCS stamp: the same inputs give the same binaries wherever the checkout is.
# The version variables are the ones Kubernetes' own build sets (hack/lib/version.sh), so
# /version answers the release; -s -w drop the symbol tables nobody debugs here.
package=k8s.io/component-base/version
ldflags="-s -w -X $package.gitVersion=$version -X $package.gitMajor=$major -X $package.gitMinor=$minor"
ldflags+=" -X $package.gitTreeState=clean"
started=$SECONDS
echo "build.sh: building Kubernetes $version and etcd into $target" >&2
(cd "$here" && go build "${jobs[@]}" -trimpath -buildvcs=false -ldflags "$ldflags" -o "$staging/" ./cmd/...)
(cd "$here/etcd" && go build "${jobs[@]}" -trimpath -buildvcs=false -ldflags "-s -w" -o "$staging/etcd" .)
cached_build_finish "$target" "$started"
