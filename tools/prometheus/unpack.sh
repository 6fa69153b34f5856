#!/usr/bin/env bash
# Unpacks Debian's prometheus package (promtool and the server, for the metrics tests) into
# ${XDG_CACHE_HOME:-~/.cache}/inference-fleet/prometheus/ without installing it: installing would run
# its maintainer scripts, which on a systemd host start a Prometheus (and, with the recommended
# packages, a node exporter) listening on every address. Test-only; `make plan` never needs it.
set -euo pipefail
dest=${XDG_CACHE_HOME:-$HOME/.cache}/inference-fleet/prometheus
[ -x "$dest/usr/bin/promtool" ] && [ -x "$dest/usr/bin/prometheus" ] && exit 0
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
# apt-get download writes as the unprivileged _apt user where it can; a private directory is fine as root.
apt-get download prometheus 2>/dev/null || { apt-get update -q >/dev/null && apt-get download prometheus; }
dpkg-deb -x prometheus_*.deb "$work/root"
mkdir -p "$(dirname "$dest")"
rm -rf "$dest"
mv "$work/root" "$dest"
