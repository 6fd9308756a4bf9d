// Package sim is corral's deterministic simulator: it runs thousands of seeded cluster
// histories of real corral nodes — real memberlist, real gRPC, the real fill engine — in
// virtual time (testing/synctest) over an in-memory network with faults (package memnet,
// through package corraltest), and checks corral's guarantees after every history. It has
// no API: it is its tests.
//
// # A history
//
// A seed determines everything the simulator chooses: the cluster's size (3 to 9 nodes), the
// workload (Gets of hot and cold keys, some of them cancelled early, Sets, Removes and purges
// by tag; every 250 ms the first read of a key nobody has read yet, on a random node, so that
// a fault's first reads need a fill no copy can spare; loaders with random latency that
// sometimes fail; in a second group, values with a short TTL and a long
// stale-while-revalidate window, read, written and refreshed under leases), and the faults at chosen virtual instants (a crash, with or without a restart
// under the same name; a graceful leave; a join; a partition along any cut, one-way or not; a
// paused node; a slow, lossy link). After the workload every fault heals and the cluster
// settles.
//
// # What is checked
//
//  1. Fills: per key, the loader runs at most once per ownership change (counted from the
//     views every node reported), plus the exceptions corral allows, each named and counted:
//     a write (a Remove empties the key; a write revokes a fill in flight), a purge of the
//     key's tag (and one more when the key was filled while the purge ran: the purge may
//     remove a value made during it), a failed fill (it stores nothing), a restart in place of a node that owned the key (it comes back empty:
//     an ownership change the views need not show), and each side of a partition or pause
//     (an owner that cannot be reached is filled around).
//  2. Writes: no Get that started after a Set, Remove, SetWithExpiry or FillSet returned nil
//     returns an older value.
//  3. No hang: every Get returns within its bound, the fill timeout plus, for each member it
//     may ask on its way, a silent owner's bound (twice Config.SilentPeerTimeout) and a warm
//     pull.
//  4. Convergence: once every fault has healed, every live node's view holds the live nodes
//     within a bound.
//  5. Closed nodes: a Get on a node that crashed, or whose Close returned, returns ErrClosed
//     (clients keep the groups of closed nodes and ask them now and then).
//  6. Departures: a write never names as unreached a member that had departed (crashed or
//     left, not back) and that every live node's view had dropped when the write started.
//  7. Moves keep what may be served: in group s — values only writes make, fresh for 50 ms
//     and then served stale for an hour — a Get after a write returned finds a value, unless
//     a crash (a lost store), a split or a later removal explains the miss.
//  8. Leases: at any instant a key of group s has at most one live refresh or fill token per
//     owner it had (one extra filler per ownership change), plus the fill check's exceptions.
//  9. No leak: no goroutine outlives the cluster's Close (synctest reports one as a deadlock).
//  10. Purges: every value of group g is tagged (three tags over the keys) and clients purge
//     tags now and then; no Get that started after RemoveByTag(t) returned nil returns a value
//     tagged t whose making (a fill's start, a write's) began before the purge did — with the
//     split-view exception of check 2.
//
// A failing history prints its seed and its trace: virtual time, node, event.
//
// # Running it
//
//	make sim                      # SIM_HISTORIES (default 2000) seeded histories; the last line
//	                              # is "sim: N histories, M violations"
//	SIM_SEED=42 make sim          # replays history 42 and prints its trace
//	go test ./sim -run Sim -sim.seed=42 -v
//
// Replay: synctest makes time deterministic, not goroutine scheduling. A replay seeds every
// source corral and memberlist draw from and runs on one P, so most seeds replay exactly; a
// seed whose goroutines race differently may take another path (see the measurements in the
// README's "How corral is tested").
package sim
