// Package node is one member of a corral cluster: the membership (package peer) and the
// views it rebuilds from it, the peer transport's server and client, the protocol's rooms
// that serve and ask through them (owner, route, write, handoff), the groups registered on
// it, and its lifecycle — start, a graceful close that hands off and drains, a kill — with
// its metrics and its defaults. Package corral's Node is a thin face over it; package group
// builds its groups on it.
//
// A view is rebuilt from the membership's list each time it changes, keeping out of the ring
// the members that may not own keys yet (view.Excluded…): one back from the dead until the
// two have exchanged the writes they remember (reconcile.go), one whose peer port does not
// speak this node's TLS, or whose mutual TLS has not completed yet (tls.go).
//
// # Usage
//
//	var n node.Node
//	if err := n.Start(cfg); err != nil { … }  // cfg's zero fields take DefaultConfig's values
//	g, err := group.New(&n, "users", load, opts) // registers itself (Register)
//	…
//	err = n.Close(ctx) // or n.Kill(), as a crash would
//
// The caller's duties:
//  1. Start a Node once, where it stays: the callbacks of Config may name the caller's handle
//     of it from the first peer request on.
//  2. Register every group under the same name on every member.
//  3. Close it (or Kill it) once it is no longer used: both are safe to call more than once.
package node
