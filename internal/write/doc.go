// Package write is write propagation and reconciliation: a write of a key (Set, Remove, a
// SetWithExpiry or a FillSet) is made through the key's owner at a version its writer draws,
// then told to every member this node knows of, and written again above a newer version a
// member answers; a member that comes back after it was declared dead exchanges with this node
// the writes each remembers before it enters the ring.
//
// The promise it keeps (corral's package documentation, "Writes"): once a write has returned
// nil, no Get anywhere that starts after it returns an older value, through any number of
// joins, leaves, crashes and restarts. How that holds, by construction:
//
//  1. Versions. Every write gets a version from its writer's version clock, a hybrid logical
//     clock: larger than every version the writer handed out or saw. Every peer request carries
//     its sender's clock, every write's tell carries its version, and memberlist's full state
//     exchange carries the clock to a joining node, so a write that starts after another
//     returned always gets a larger version — whichever nodes ran them, whatever the pods'
//     wall clocks say (the wall clock is only a floor, so a restarted node starts high).
//  2. What a value's version means. Every stored value carries the version of the latest
//     write it reflects: a Set's value its write's; a fill's result the latest write of the
//     key known where the fill started (0 if none). A copy whose version is below a write is
//     older than that write.
//  3. Telling. After the owner applied the write, the writer tells every member it knows of:
//     its view, the live set of its membership (a step ahead of the view), and the peers that
//     asked it for keys before they were in its view. Each member told drops every copy of
//     the key older than the write — in its own store as well as its near cache —, revokes
//     the fills of the key in flight that started before it knew of the write (their callers
//     still get the result: they asked before the write returned), remembers the write for a
//     while (a tombstone, fill.Tombstones), and tells the members it knows of that the request
//     does not list, before it answers. So when the write returns, every member that any
//     member told knows of has dropped its old copies.
//  4. Checking. Every path that moves a value between members — the hand-off of a leaving
//     member, the warm pull of a new owner, the answer an owner gives to a near cache — carries
//     the value's version, and the receiver refuses a copy below a write it remembers, under
//     the same lock that orders its own writes. A write is remembered for at least five
//     minutes, far longer than any copy can be on its way: every peer request has a deadline.
//  5. Writes never heard of. A member told of a write answers the newest version of the key
//     it holds when that is above the write's: a write the writer could not have heard of,
//     made on the other side of a split of the views (step 1 assumes the first write reached
//     the second's writer). That write returned before this one started or overlaps it, so
//     this one may be last: the writer writes again above it (at most three times, for
//     writers racing each other), and the later write wins when the sides meet again.
//
// The interleavings this rules out:
//
//   - A join. n0 holds k; n2 joins and now owns k; Remove(k) through n1 reaches n2, which holds
//     nothing. n2's first miss then asks n0 — and n0 held the removed value. Now the Remove's
//     tell reaches n0, which drops its copy before the Remove returns; a warm pull that n0
//     answered just before that arrives at n2 after n2 applied the Remove, and is refused.
//   - A hand-off. n2 hands its entries off while Removes of its keys arrive: the entry read
//     before a Remove reaches the new owner after the Remove did, and is refused; one sent
//     after the Remove was applied on n2 is not sent at all.
//   - A parallel tell. The writer tells R and X at once; R is told first, misses, and asks X,
//     which is not told yet and answers with its old copy. R refuses it: R knows of the write.
//   - A member no writer knows yet. A node that has just joined pulls k from X before the
//     writer's view holds it. X remembers the stranger that asked and passes the tell on to it.
//   - A member that left. A leaving member is told of nothing once it is out of the views,
//     so after it has left it answers only warm pulls, whose copies the new owners check,
//     and refuses Gets, Sets and Removes with "leaving": the caller asks the next owner.
//
// # Terms
//
// docs/design.md has the design whole; these are the words the code uses.
//
//   - version: the place of a write in the order of a key's writes, drawn by its writer
//     (package version); a value carries the version of the latest write it reflects.
//   - stamp: the number each view marks the local store's entries it found owned here with
//     (package view); a hit on a stamped key skips the owner lookup until the view changes.
//   - tell, told: to pass a write to a member, which drops its older copies and passes it on;
//     the told list names the members a tell has reached, so that none is told twice.
//   - known: the members this node would tell — its view, its membership's live set, and the
//     strangers.
//   - stranger: a peer that asked this node for something before it was in this node's view
//     (a member that has just joined), remembered for a while (Strangers).
//   - acting owner: the member that serves a request for a key as its owner because the asker
//     routed it there — its own view may say otherwise, or the owner failed over to it; a
//     request is never forwarded again.
//   - warm pull: a new owner's first miss of a key that moved lately asks the members that may
//     still hold it, without letting them fill (package handoff).
//   - hand-off: a leaving member pushes the entries it may still serve to their new owners
//     (package handoff).
//   - departed: a member that left the view within the peek window, still asked for warm pulls.
//   - reconcile: the exchange of remembered writes with a member back from the dead (Exchange).
//   - claimant: a member back at a new address that the membership does not admit yet (package
//     peer); it is a member to the admission of requests and the certificate check.
//   - stopped, draining: a closing node that serves nothing from its stores any more: its own
//     Gets go to the other members, peers get warm pulls only.
//   - tombstone, floor: a write remembered for a while (fill.Tombstones); the floor of a key is
//     the version of its latest remembered write, below which no copy is stored.
//
// # Usage
//
//	w := write.New(write.Config{Self: name, View: &view, Router: router, Client: client, …})
//	err := w.Write(ctx, group, key, write.Apply{Local: …, Remote: …}, invalidate)
//	unreached, newer := w.Tell(ctx, group, key, version, told) // serving a peer's Invalidate
//	err = w.Exchange(ctx, addr, groups)                         // a member back from the dead
package write
