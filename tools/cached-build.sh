# The cache frame of tools/kube/build.sh and tools/engine/build.sh, sourced by both: a build lives
# in its own directory under a per-machine cache, is made once (one build at a time per machine)
# in a staging directory beside it, and appears only once complete. The sourcing script defines
# complete DIR (whether DIR holds everything it builds) before calling these.

# cached_build_begin TARGET ROOT WHAT MAKE_TARGET [--check]: print TARGET and exit when it is built
# already; with --check exit 1 saying how to build it; else take the machine's build lock and set
# $staging, removed on exit unless cached_build_finish moves it into place.
cached_build_begin() {
	local target=$1 root=$2 what=$3 make_target=$4 check=${5:-}
	if complete "$target"; then
		echo "$target"
		exit 0
	fi
	if [[ $check == --check ]]; then
		echo "build.sh: no $what built in $target; run make $make_target" >&2
		exit 1
	fi
	mkdir -p "$root"
	# One build at a time per machine; whoever waited finds the build already there.
	exec 9>"$root/.lock"
	flock 9
	if complete "$target"; then
		echo "$target"
		exit 0
	fi
	staging=$(mktemp -d "$root/.build.XXXXXX")
	trap 'rm -rf "$staging"' EXIT
}

# cached_build_finish TARGET STARTED: move the complete staging directory to TARGET and print it.
cached_build_finish() {
	local target=$1 started=$2
	complete "$staging"
	mkdir -p "$(dirname "$target")"
	chmod 755 "$staging"
	mv "$staging" "$target"
	trap - EXIT
	echo "build.sh: built in $((SECONDS - started)) s" >&2
	echo "$target"
}
