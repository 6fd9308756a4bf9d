// Package e2e holds corral's end-to-end tests: real `corral serve` processes on loopback,
// driven over HTTP, killed with real signals, a real browser on the debug page, and the
// lease protocol and MGET through Redis clients nobody here wrote: go-redis (a dependency of this
// module), redis-cli (Debian's redis-tools) and Python's redis (Debian's python3-redis, for
// /usr/bin/python3); the tests that need a missing tool skip, except under CI. It is its own
// module so that the library's go.mod never depends on test tooling.
//
// TestTraceInJaeger runs Jaeger's all-in-one binary, which jaeger/build.sh builds from the
// github.com/jaegertracing/jaeger module pinned in jaeger/go.mod into
// $HOME/.cache/corral-e2e/ (CORRAL_E2E_CACHE), once per version and go.sum. Cold, it took
// 16 min 37 s of wall time (6 min 17 s user, 43 s system) at nice 10 on 2 cores busy with
// other builds and tests (load 10–13), after 1 min 44 s of module downloads; warm, under a
// second. make e2e and .ci/run build it before the tests (.ci/run in the background, after
// the Kubernetes tools); CORRAL_E2E_JAEGER runs another binary instead.
//
// Run with `make e2e` from the repository root.
package e2e
