// Package fill is corral's in-process read-through engine: a bounded, expiring store in which
// a missing or expired key is loaded once, however many goroutines ask for it at once. Package
// fill at the module's root is its API for use on its own; this package also exports what a
// corral node needs to run it in a cluster — a stamped hit path (GetStamped), writes at a
// writer's version (SetAt, SetFor, RemoveAt, Invalidate) remembered as tombstones, copies from
// other nodes (Put, PeekAny, All, SetVersion, SetBorn, AwaitFill), the fill chain that crosses
// nodes (WithChain, OuterChain), the wait graph that finds fill cycles through peers, and the
// tag registry a node's caches share. Nothing here is API.
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
// Times are read from Config.Clock; tests inject a FakeClock and advance it instead of
// sleeping. Entries cross processes with remaining durations (Entry), never instants.
package fill
