// Package version is corral's write clock: the versions that order the writes of a key
// (Set, Remove, FillSet) across the cluster, without wall clocks.
//
// A Clock is a hybrid logical clock. Every version it hands out is larger than every version
// its node handed out or saw before — in a peer's request header, a write it was told of, an
// entry, or memberlist's full state exchange — so a write that starts after another returned
// gets a larger version, whichever nodes ran them, whatever their wall clocks say. The wall
// clock is only a floor, so a restarted node begins above the versions of its earlier life
// without having heard of them.
//
// # Usage
//
//	c := version.New(name, time.Now)
//	v := c.Next()                   // the version of a write this node makes
//	if err := version.Check(w); err != nil { … } // refuse a version from elsewhere above Max
//	c.Observe(w)                    // a version seen in a peer's message
//
// The caller's duties:
//  1. Observe every version that arrives from elsewhere (headers, tells, entries, answers),
//     after Check: a version above Max is refused, never stored.
//  2. Hand LocalState and MergeState to memberlist (peer.Config), so that a joining node
//     starts above every version the cluster has seen.
package version
