// Package handoff moves entries between members, so that a membership change does not cost
// a wave of fills: the hand-off of a leaving member, which pushes every entry it may still
// serve to the key's new owner before it goes (Mover.Send), and the warm pull of a new owner,
// whose first miss of a key that moved asks the members that may still hold it (Pull). (A
// key's former owner also gives the entries that moved to their new owners after each
// membership change, over the same Handoff stream: package group's moveOn.)
//
// Every entry carries its remaining lifetime and its version, and the receiver checks the
// version against the writes it knows of before it stores anything (package write): a copy
// older than a write is refused wherever it comes from.
//
// # Usage
//
//	m := handoff.New(handoff.Config{View: &n.view, Router: router, Client: client, …})
//	err := m.Send(ctx, groups)                             // at Close, before leaving
//	e, ok := handoff.Pull(ctx, m, group, key, floor, decode) // in a new owner's fill
package handoff
