// Package ring decides which member of a corral cluster owns a key.
//
// A Ring is an immutable consistent-hash ring with bounded loads over the
// current member names, built on github.com/buraksezer/consistent with
// xxhash64. Every replica that builds a Ring over the same names with the
// same Config computes the same owner for every key, whatever order the
// members joined in, so replicas agree on ownership without talking.
//
// # Usage
//
//	r, err := ring.New([]string{"pod-a", "pod-b", "pod-c"}, ring.DefaultConfig())
//	if err != nil {
//		return err // an empty or duplicate name, or a bad Config
//	}
//	owner := r.Owner(key)                 // "" only if the ring is empty
//	next := r.Successor(key, owner)       // where to go if owner is unreachable
//	moved := r.Moved(old)                 // share of keys a change moved
//
// The caller's duties:
//
//  1. Build a new Ring on every membership change and swap it in whole
//     (an atomic.Pointer[ring.Ring] is enough); a Ring never changes.
//  2. Use the same Config on every replica. It is part of the Epoch.
//  3. Send Epoch with peer requests to tell views apart: equal epochs mean
//     equal member sets and configs, hence equal routing.
//  4. On an unreachable owner, go to Successor(key, failed...) rather than
//     filling locally: every replica computes the same successor.
//
// # Definitions
//
// Partition: keys hash into Config.PartitionCount partitions; key k is in
// partition xxhash64(k) mod PartitionCount, exactly as consistent's
// LocateKey computes it. Each partition has one owner, and Owner returns the
// same member as LocateKey would.
//
// Bounded load: no member owns more than ceil(Load × PartitionCount / Len())
// partitions. Partitions go, in id order, to the member whose virtual node
// follows the partition's hash on the circle, or, if that member is full,
// to the next one that is not.
//
// Successor: the owner of key on the ring without the failed members, that
// is, the owner every replica would pick once they have left. It is not the
// next virtual node on the circle: removing a member also rebalances the
// bounded loads, and the successor is defined by the rebuilt ring so that
// failover and the later membership change agree.
//
// Epoch: a 64-bit hash of the config and the sorted member names; see
// Ring.Epoch for the exact definition. 0 only for an empty ring.
//
// # Costs
//
// Owner is a hash, a modulo and a slice index: no lock, no allocation,
// about 10 ns. New is linear in PartitionCount (about 0.2 ms with the
// defaults and 5 members). Without and Successor build a ring on first use
// for a given failure set and memoize it; later calls allocate nothing.
//
// # Key movement
//
// Plain consistent hashing moves about 1/N of the keys when one of N members
// joins or leaves. Bounded loads move more, because the bound itself changes
// with N and partitions spill over to neighbours of full members. Measured
// with the defaults: one member joining or leaving a ring of 10 moves about
// 10–11% of the keys on average (ideal 9–10%), and in the worst of 10,000
// random member sets about twice the ideal; TestKeyMovement has the table.
package ring
