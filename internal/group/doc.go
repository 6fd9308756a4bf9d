// Package group is Group[V], corral's read-through cache of one name on one node: its stores
// (the keys this node owns, near copies of hot keys owned elsewhere, the writes it remembers,
// the leases of its keys) and the paths of a Get, a write and a lease through the protocol's
// rooms below it. It implements node.Group, through which the node serves peers, hands off,
// exchanges writes and counts. Package corral's Group is a thin face over it.
//
// # The rooms
//
// corral's protocol lives in internal packages, one per role. Each imports only packages on
// the rows below it (not each of them), never one on its own row or above:
//
//	corral                   the public API and its wiring: Node, Group, Config, errors
//	  │
//	group                    Group[V]: a group's stores; the paths of a Get, a write, a lease
//	  │
//	node                     the member: membership, views, transport, groups by name,
//	  │                      lifecycle, metrics, defaults
//	owner                    the owner's side: the peer handler, admission of a request
//	  │
//	write       handoff      writes told to every member, reconciliation | hand-off, warm pull
//	  │           │
//	route       lease        peertls   a request to its owner: failover, breakers, silence
//	  │           │            │       probes, headers, wire errors | the lease table |
//	  │           │            │       peer mutual TLS
//	view        version      limit     the picture of the cluster | the write clock |
//	                                   the limits on input
//
// Below them all are the public packages fill (the in-process engine), ring, peer and
// transport, which import none of these. A room calls up only through an interface it
// defines — owner.Group, handoff.Group, write.Group, lease.Store — which the rooms above
// implement: the owner serves a peer through the group it is handed, never by importing it.
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
//     remembered), finds the group (node, with AutoGroup) and calls its ServeGet, which serves
//     the key from the store there or fills it as in step 2, as the key's acting owner: never
//     forwarded again.
//  5. Back on the asker, route.FromWire turns the owner's errors into this node's, the
//     version is checked and observed (package version), the value decoded, and kept as a
//     near copy when the key is hot. Package corral turns the errors it is given into its
//     public ones.
//
// # Usage
//
//	g, err := group.New(n, "users", load, group.Options[User]{TTL: time.Minute, Codec: codec})
//	v, err := g.Get(ctx, "42")
//	err = g.Set(ctx, "42", v)
package group
