// Package memhost lets corral's own tools — the in-memory test cluster (package corraltest)
// and through it the simulator — start a node on a network of their own (package network)
// instead of the operating system's: package corraltest runs it on an in-memory host (package
// memnet), so that a whole cluster runs in one process, in a testing/synctest bubble, in
// virtual time. The seam stays off the public Config, where production code has no use for
// it, and package corral does not link memnet; this package is internal, so only this module
// can use it.
package memhost

import "github.com/corralcache/corral/internal/network"

// New starts the node that cfg (a corral.Config) describes on nw and returns it (a
// *corral.Node). Package corral sets it in its init; calling it with anything else panics.
var New func(cfg any, nw network.Network) (any, error)
