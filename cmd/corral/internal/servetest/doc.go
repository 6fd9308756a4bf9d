// Package servetest is what the tests of corral serve's packages share, so that each is
// written once: a one-node corral on loopback for a front to serve, an HTTP request that
// returns its body, a client that speaks raw RESP and compares replies byte for byte, and the
// sentinel and token of the fuzz targets. Only tests import it.
//
// # Usage
//
//	node := servetest.Node(t, reg, 1<<10) // closed by t's cleanup
//	…
//	resp, body := servetest.Do(t, addr, "PUT", "/v1/groups/g/keys/k", "v", "Authorization", "Bearer s3cret")
//	rc := servetest.DialRESP(t, respAddr)
//	if got := rc.Do(t, "GET", "k"); got != servetest.Bulk("v") { … }
//
// The caller's duties:
//  1. Stop what serves the node before the node closes: register the front's cleanup after
//     calling Node (cleanups run last first).
//  2. Fail the test, not the process: every helper takes the test's testing.TB.
package servetest
