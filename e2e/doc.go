// Package e2e holds corral's end-to-end tests: real `corral serve` processes on loopback,
// driven over HTTP, killed with real signals, and a real browser on the debug page. It is
// its own module so that the library's go.mod never depends on test tooling.
//
// Run with `make e2e` from the repository root.
package e2e
