#!/usr/bin/env bash
# The real-engine tests' binaries (tests/engine/): the Pulumi CLI, the Kubernetes provider plugin
# and kwok (simulated kubelets for tools/kube/local-cluster), compiled from the Go modules pinned
# in cli/, provider/ and kwok/, once per machine.
#
#   tools/engine/build.sh           build what is missing, then print the directory of the build
#   tools/engine/build.sh --check   print that directory if it holds everything, else exit 1
#
# The build lives outside the checkout, in
# ${XDG_CACHE_HOME:-~/.cache}/inference-fleet/engine/<CLI version>-<provider version>/<key>/, with
# the three binaries in bin/ (what goes on PATH) and kwok's stages in share/kwok-stages.yaml. The
# key hashes the three modules' go.mod and go.sum, our two main packages, this script (it holds the
# link flags) and the Go version: a clean clone on the same machine finds it, and a change of any
# pin builds a new set beside the old one.
# Set ENGINE_BUILD_JOBS to limit parallel compilation (go build -p) on a shared machine.
# Timings and the choices behind the modules: docs/real-engine.md.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
binaries=(pulumi pulumi-resource-kubernetes kwok)

cli=$(awk '$1 == "github.com/pulumi/pulumi/pkg/v3" { print $2 }' "$here/cli/go.mod")
provider=$(awk '$1 == "github.com/pulumi/pulumi-kubernetes/sdk/v4" { print $2 }' "$here/provider/go.mod")
if [[ ! $cli =~ ^v3\.[0-9]+\.[0-9]+$ || ! $provider =~ ^v4\.[0-9]+\.[0-9]+$ ]]; then
	echo "build.sh: no pulumi/pkg/v3 version in $here/cli/go.mod or no pulumi-kubernetes/sdk/v4 in $here/provider/go.mod" >&2
	exit 1
fi

key=$(
	cd "$here"
	{
		go env GOVERSION
		cat build.sh cli/go.mod cli/go.sum provider/go.mod provider/go.sum provider/main.go provider/embed/main.go \
			kwok/go.mod kwok/go.sum
	} | sha256sum | cut -c1-16
)
root=${XDG_CACHE_HOME:-$HOME/.cache}/inference-fleet/engine
target=$root/$cli-$provider/$key

complete() {
	local binary
	for binary in "${binaries[@]}"; do
		[[ -x $1/bin/$binary ]] || return 1
	done
	[[ -s $1/share/kwok-stages.yaml ]]
}

# shellcheck source=../cached-build.sh
source "$here/../cached-build.sh"
cached_build_begin "$target" "$root" "engine" "engine (tools/engine/build.sh)" "${1:-}"
mkdir -p "$staging/bin" "$staging/share"
jobs=()
if [[ -n ${ENGINE_BUILD_JOBS:-} ]]; then
	jobs=(-p "$ENGINE_BUILD_JOBS")
fi
# -trimpath and no VCS stamp: the same inputs give the same binaries wherever the checkout is;
# -s -w drop the symbol tables nobody debugs here. The version variables are the ones the
# upstream release builds set (pulumi: sdk/go/common/version; the provider: pkg/version, without
# the v, as its Makefile's VERSION): the Automation API refuses a CLI without a version.
build=(go build "${jobs[@]}" -trimpath -buildvcs=false)
started=$SECONDS
echo "build.sh: building pulumi $cli, pulumi-resource-kubernetes $provider and kwok into $target" >&2

(cd "$here/cli" && "${build[@]}" -o "$staging/bin/pulumi" \
	-ldflags "-s -w -X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=$cli" \
	github.com/pulumi/pulumi/pkg/v3/cmd/pulumi)

# The provider's main embeds the schema and Terraform mapping generated from the module's own files.
# `go list -m` names the module's directory only once the module is in the module cache (on a fresh
# machine nothing has downloaded it yet: the build comes after), so it is downloaded first.
(cd "$here/provider" && go mod download github.com/pulumi/pulumi-kubernetes/provider/v4)
module=$(cd "$here/provider" && go list -m -f '{{.Dir}}' github.com/pulumi/pulumi-kubernetes/provider/v4)
if [[ -z $module ]]; then
	echo "build.sh: the module cache has no github.com/pulumi/pulumi-kubernetes/provider/v4" >&2
	exit 1
fi
(cd "$here/provider" && go run ./embed "$module" "${provider#v}" . &&
	"${build[@]}" -o "$staging/bin/pulumi-resource-kubernetes" \
		-ldflags "-s -w -X github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/version.Version=${provider#v}" .)

(cd "$here/kwok" && "${build[@]}" -o "$staging/bin/kwok" -ldflags "-s -w" sigs.k8s.io/kwok/cmd/kwok)
# kwok's binary carries no stages (kwokctl writes them into its configuration): the "fast" ones
# from the module make Nodes Ready and pods Running and Ready at once (kustomize/stage/*/fast).
kwok=$(cd "$here/kwok" && go list -m -f '{{.Dir}}' sigs.k8s.io/kwok) # downloaded by its build above
for stage in "$kwok"/kustomize/stage/node/fast/node-initialize.yaml "$kwok"/kustomize/stage/pod/fast/pod-*.yaml; do
	echo "---"
	cat "$stage"
done >"$staging/share/kwok-stages.yaml"

cached_build_finish "$target" "$started"
