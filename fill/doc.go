// Package fill is a read-through cache for one process: a bounded, expiring store in which a
// missing or expired key is loaded once, however many goroutines ask for it at once. It does
// no networking: an application with one replica gets stampede protection from it alone. It
// is also the engine every corral node runs for each group: corral adds the cluster (one
// owner per key, peers, writes told to every member) and keeps each group's store as a
// Replica (see "In a cluster" below).
//
// # Usage
//
//	c, err := fill.New(func(ctx context.Context, key string) (string, error) {
//		return db.Lookup(ctx, key) // runs once per key per expiry, whatever the concurrency
//	}, fill.Config[string]{TTL: time.Minute, Jitter: 0.1, Grace: 10 * time.Second})
//	if err != nil { … }
//	defer c.Close(ctx)
//	v, err := c.Get(ctx, "user:42")
//
// The caller's duties:
//  1. Close the cache when done; it waits for fills in flight and stops the clock it owns.
//  2. Make the loader honour its context: it carries the fill timeout as a deadline.
//  3. Use the ctx the loader was given for any Get the loader makes, so fill cycles are seen.
//
// # Definitions
//
// A value is fresh from its fill until TTL has passed (TTL 0: forever). Jitter j makes each
// stored TTL uniform in [TTL·(1−j), TTL·(1+j)). Grace g is the stale-while-revalidate window:
// from TTL to TTL+g a read returns the stale value at once and starts a background refresh
// (at most one per key; at most Config.Refreshes per process; a read that finds no free slot
// starts none, and a later read tries again). Past TTL+g the key is a miss.
//
// A fill is one run of the loader for a key, shared by every Get of the key that arrives
// while it runs (single-flight): the Get that started it sees SourceFill, the others
// SourceCoalesced. The fill runs on a goroutine and context of its own — a worker that
// outlives it and takes the next fill, so its stack has already grown; the caller's values,
// not its cancellation — bounded by the fill timeout, so a caller that gives up leaves alone
// and the fill still feeds the other callers and the store.
//
// Refresh-ahead (XFetch, Config.RefreshAhead = β) lets a fresh hit start the refresh early:
// when now − δ·β·ln(u) ≥ fresh-until, with δ the last fill's duration and u uniform in (0,1].
//
// A failed fill stores nothing: every caller gets a *FillError and the next Get fills again.
// A loader panic is recovered into a *PanicError. ErrNotFound is an answer, not a failure,
// and Config.NegativeTTL remembers it. A Set or Remove that lands while a fill runs revokes
// the fill's right to store (its waiters still get its value), so an older load never
// overwrites a newer write.
//
// Values may carry tags — from Tag in the loader, or Set's — and RemoveByTag removes every
// value stored with a tag before the call at once, whatever their number: reads check a
// tagged value's tags, and the sweep reclaims their memory. A fill in flight when the tag is
// purged stores nothing; its callers fill again.
//
// Times are read from Config.Clock; tests inject a FakeClock and advance it instead of
// sleeping. Entries cross processes with remaining durations (Entry), never instants.
//
// # In a cluster
//
// A Replica is a Cache kept as one copy of a cache spread over processes. Beside a Cache's
// methods it has what keeps the copies consistent: writes at versions every process orders
// alike (ReplicaConfig.NextVersion, SetAt, RemoveAt), writes made elsewhere applied here
// (Invalidate) and remembered as Tombstones so that no older copy is stored after them,
// entries moved with their remaining lifetime (Put, PeekAny, a ReplicaLoadFunc's Copy), the
// fill chain carried across processes (WithChain, OuterChain) so that a fill cycle through
// other nodes is seen (WaitGraph), and one registry of tags (Tags) for every replica of a
// process. corral's nodes are built on it; an application needs none of it.
package fill
