// Package view is one node's picture of the cluster: the members it routes to, the ring over
// them, the rings and members of the last PeekWindow (where a moved key may still be held),
// and the members kept out of the ring for now, with why.
//
// A View is immutable: a membership change builds the next one (Next) and the node swaps it
// in, so the hot path reads it with one atomic load. Its fields are read, never written,
// once it is published; MemberState.Leaving alone changes, and it is atomic.
//
// Terms:
//   - live member: one in the membership's list that the view holds (Members);
//   - departed: a member that left the view within the window (Departed); a member that left
//     gracefully answers warm pulls while it drains;
//   - excluded: a live member kept out of the ring (Excluded), with one of the Excluded…
//     reasons;
//   - stamp: a number of this view's own, which the local store's entries found owned under
//     it carry (fill's GetStamping), so a hit skips the owner lookup until the view changes;
//   - stopped: this node serves nothing from its stores any more (it is draining).
package view
