// Package memhost lets corral's own tools — the in-memory test cluster (package corraltest)
// and through it the simulator — start a node on an in-memory host (package memnet) instead
// of the operating system's network: it binds no port, advertises the host's address,
// gossips and reaches its peers through the host's network, and reads time without a ticker,
// so that a whole cluster runs in one process, in a testing/synctest bubble, in virtual time.
// The seam stays off the public Config, where production code has no use for it; this
// package is internal, so only this module can.
package memhost

import "github.com/corralcache/corral/memnet"

// New starts the node that cfg (a corral.Config) describes on host h and returns it (a
// *corral.Node). Package corral sets it in its init; calling it with anything else panics.
var New func(cfg any, h *memnet.Host) (any, error)
