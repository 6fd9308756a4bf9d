#!/usr/bin/env bash
# Builds Jaeger (all-in-one: collector with an OTLP receiver, in-memory storage, query API and
# UI in one binary) from the Go module pinned in go.mod here, for the trace test in e2e
# (trace_test.go), into a cache directory keyed by its version and go.sum, and prints the
# binary's path.
#
# Idempotent: a binary already in the cache is not rebuilt, and a build interrupted half-way
# leaves nothing behind (written under a temporary name and renamed); a second build.sh run at
# the same time waits for the first instead of building again. Cold, on 2 busy cores:
# about 17 minutes (e2e/doc.go); warm: well under a second. Jaeger's UI is not in its Go
# module (a separate npm build): the binary serves a placeholder page in its place, and the
# query API, which the test reads, as usual.
#
#   bin=$(e2e/jaeger/build.sh)     # CORRAL_E2E_CACHE overrides $HOME/.cache/corral-e2e
set -euo pipefail
cd "$(dirname "$0")"
GO=${GO:-go}
cache=${CORRAL_E2E_CACHE:-$HOME/.cache/corral-e2e}
ver=$("$GO" list -m -f '{{.Version}}' github.com/jaegertracing/jaeger)
dir=$cache/jaeger-$ver-$(cat go.mod go.sum | sha256sum | cut -c1-12)
mkdir -p "$dir"
# One build at a time: a second build.sh (make e2e beside a build already running, say)
# waits for the first, then finds the binary.
exec 9>"$cache/.jaeger.lock"
flock 9
if [ ! -x "$dir/jaeger" ]; then
	echo "build.sh: building jaeger $ver into $dir" >&2
	start=$SECONDS
	CGO_ENABLED=0 nice -n 10 "$GO" build -trimpath -ldflags "-s -w" -o "$dir/.jaeger.tmp" github.com/jaegertracing/jaeger/cmd/jaeger
	mv "$dir/.jaeger.tmp" "$dir/jaeger"
	echo "build.sh: jaeger took $((SECONDS - start))s" >&2
fi
echo "$dir/jaeger"
