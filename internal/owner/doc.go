// Package owner is the owner's side of the peer protocol: the transport.Handler that serves a
// peer's request for a key — Get and GetHit, Set, Remove, Invalidate, Handoff, WaitsFor,
// Reconcile, Lease and FillSet — as the key's acting owner, whatever this node's own ring
// says, and never forwards it again: views that disagree for a moment cost at most one extra
// fill, never a loop.
//
// Every request is admitted first (admit.go): refused unless it comes from a member (its
// address, or with peer TLS its certificate, package peertls), then the node's write clock
// moves past the sender's, and a sender not in the view yet is remembered as a stranger, to
// be told of writes (write.Strangers). Then the request goes to the group it names, through
// Group, which package group implements.
//
// # Usage
//
//	s := owner.New(owner.Config{Self: name, View: &view, Writer: writer, Serve: groups, …})
//	server, err := transport.NewServer(s, serverConfig)
package owner
