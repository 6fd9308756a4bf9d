// Package e2e holds corral's end-to-end tests: real `corral serve` processes on loopback,
// driven over HTTP, killed with real signals, a real browser on the debug page, and the
// lease protocol and MGET through Redis clients nobody here wrote: go-redis (a dependency of this
// module), redis-cli (Debian's redis-tools) and Python's redis (Debian's python3-redis, for
// /usr/bin/python3); the tests that need a missing tool skip, except under CI. It is its own
// module so that the library's go.mod never depends on test tooling.
//
// Run with `make e2e` from the repository root.
package e2e
