// Package group is Group[V], corral's read-through cache of one name on one node: its stores
// (the keys this node owns, near copies of hot keys owned elsewhere, the writes it remembers,
// the leases of its keys) and the paths of a Get, a write and a lease through the protocol's
// rooms below it. A group is built from an Env, the node's parts handed to it, and never
// reaches back into the node; package corral builds the Env, registers the group, and serves
// it to peers through owner.Group, which it implements. Package corral's Group is a thin face
// over it.
//
// # The rooms
//
// corral's protocol lives in internal packages, one per role. Each imports only packages on
// the rows below it (not each of them), never one on its own row or above:
//
//	corral                   the public API and its composition: New builds every part below,
//	  │                      each with what it needs; Node, Group, Config, errors, metrics
//	group                    Group[V]: a group's stores; the paths of a Get, a write, a lease
//	  │
//	owner       viewkeeper   the owner's side: the peer handler, admission of a request |
//	  │           │          the view, from the membership; members back reconciled first
//	write       handoff      writes told to every member, reconciliation | hand-off, warm pull
//	  │           │
//	route       lease        peertls   a request to its owner: failover, breakers, silence
//	  │           │            │       probes, headers, wire errors | the lease table |
//	  │           │            │       peer mutual TLS
//	view        version      limit     network   the picture of the cluster | the write clock
//	                                             | the limits on input | the OS or a test's
//
// Below them all are the public packages fill (the in-process engine), ring, peer and
// transport, which import none of these. A room is given what it needs when it is built — a
// Config of the parts and hooks it uses — and calls up only through an interface it defines
// (owner.Group and owner.Groups, handoff.Group, write.Group, lease.Store), which the rooms
// above implement: the owner serves a peer through the groups it is handed, never by
// importing them. Results come back as return values: a loader that takes a copy from
// another member returns it as a fill.Copy.
//
// # A Get, top to bottom
//
//  1. corral.Group.Get asks Hit: the key is in this node's store, stamped as owned under the
//     current view (package view) — one lookup in fill, and the Get is done. A miss goes on
//     in Miss.
//  2. This node owns the key (view.View.Owner): fill fills it once for all callers here with
//     the group's loader, fillLocal, which first asks the members that may still hold the key
//     when its owner changed lately (handoff.Pull, a warm pull).
//  3. Another member owns it: the near cache (fill again, one request for all callers here)
//     runs fetch, which route.Router.OnOwner sends to the owner on the view's ring — past the
//     members whose breaker is open, to the next owner when one is unreachable or leaving —
//     on the owner's stream (transport).
//  4. On the owner, transport hands the request to owner.Server: GetHit answers a held key on
//     the stream at once; Get admits the request (the sender's address, its clock, a stranger
//     remembered), finds the group (owner.Groups, with AutoGroup) and calls its ServeGet, which serves
//     the key from the store there or fills it as in step 2, as the key's acting owner: never
//     forwarded again.
//  5. Back on the asker, route.FromWire turns the owner's errors into this node's, the
//     version is checked and observed (package version), the value decoded, and kept as a
//     near copy when the key is hot. Package corral turns the errors it is given into its
//     public ones.
//
// # Usage
//
//	g, err := group.New(env, "users", load, codec, group.Options{TTL: time.Minute})
//	v, err := g.Get(ctx, "42")
//	err = g.Set(ctx, "42", v)
package group
