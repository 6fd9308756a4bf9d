package fill

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"
)

// call is one fill in flight: the single flight that every concurrent Get of its key waits on.
type call[V any] struct {
	done chan struct{} // closed when the fill ended (see end)
	// left, when set, is shared by calls filled in one batch that share done too: done is
	// closed when the last of them has ended (see GetMany).
	left *atomic.Int32

	// Written once by the fill goroutine before done is closed, and only read after.
	entry Entry[V]
	err   error

	// stale is the entry a background refresh replaces, or nil for a fill after a miss.
	stale *entry[V]

	// version is the latest write of the key known when the fill started (a stored entry's
	// version, or a Tombstones record): the fill's result reflects at least that write, and
	// is stored with it, unless the loader copied the value from elsewhere (SetVersion).
	version uint64

	// completed is set, under Cache.mu, by the first of the loader's return and the fill
	// timeout; the other then does nothing.
	completed bool

	// revoked is set, under Cache.mu, by a write of the key (Set, Remove, or an Invalidate
	// newer than version) that lands while the fill runs: the fill's result is older than
	// that write, so it must not be stored. Its waiters still get it — they asked before
	// the write.
	revoked bool

	// abandoned is set before done is closed when an inline fill failed because the Get that
	// ran it left (Config.InlineFill): its waiters start over, and one of them fills.
	abandoned bool

	// purged is set before done is closed when the value carries a tag purged after the fill
	// started (see Tags): it is not stored, and its waiters start over — a Get that joined
	// the fill after the purge returned must not get it. (Beside the other flags: a GetMany's
	// calls are one allocation, 100 of them a size class smaller.)
	purged bool

	// purgedCopy is set before done is closed when the value is a copy from elsewhere that
	// carries a tag purged after it was made: it is not stored, and it goes only to the Gets
	// that were waiting on the fill before a purge was recorded here (see joinedLate).
	purgedCopy bool

	// loading is set by the loader through Loading: it loads the value itself now, and waits
	// on no other fill of the key (see AwaitFill).
	loading atomic.Bool

	// asked is the greatest name of the members that asked for the key while the fill had not
	// begun to load (NoteAsked), and were told nothing; guarded by Cache.mu. Such a member
	// loads the key, and LoadingUnlessAsked tells the loader to take its value instead.
	asked string

	// born is the version clock's reading when the fill started: its value's born version,
	// unless the loader copied it from elsewhere (SetBorn).
	born uint64

	// purges is the count of purges recorded in the cache's Tags when the fill started: a Get
	// that joins the fill once the count has moved joins it late (see joinedLate).
	purges uint64

	// span is the fill's span (ReplicaConfig.Tracing), or nil; written before the loader
	// runs, by the goroutine that runs it. links are the spans of the Gets that joined the
	// fill, appended under Cache.mu until settle takes them.
	span  trace.Span
	links []trace.Link
}

// miss starts or joins the fill of key.
func (c *Cache[V]) miss(ctx context.Context, key string) (Entry[V], Source, error) {
	if InChain(ctx, c.cfg.Name, key) {
		return Entry[V]{}, 0, ErrFillCycle
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return Entry[V]{}, 0, ErrClosed
	}
	if cl, ok := c.calls[key]; ok {
		c.joinedLocked(ctx, cl)
		how := c.joinedAt(cl, c.tags.purges.Load())
		c.mu.Unlock()
		c.stats.coalesced.Add(1)
		e, src, err := c.waitFor(ctx, key, cl, how)
		if err == errAbandoned {
			return c.miss(ctx, key) // the Get that ran the fill left, or its value was purged: start over
		}
		return e, src, err
	}
	// Look again, now under mu. This Get's first look missed, but between that look and
	// taking mu another Get may have finished this key's fill: it stored the entry and
	// removed its call from c.calls, both under mu. Without this second look we would see no
	// call, become the leader and run the loader again for a value stored microseconds ago —
	// one extra fill for every Get caught in that window of a stampede.
	var known uint64 // the latest write of key known here
	if e, ok := c.store.GetIfPresent(key); ok {
		if e.purged() {
			// Found purged by the read before this one: drop it now (the sweep would), once.
			c.store.Invalidate(key)
			c.stats.purged.Add(1)
		} else if now := c.clock.NowNano(); now < e.fresh {
			c.mu.Unlock()
			if e.notFound() {
				c.stats.negativeHits.Add()
				return Entry[V]{}, SourceHit, ErrNotFound
			}
			return e.export(now), SourceHit, nil
		}
		known = e.version
	}
	if c.load == nil && c.batchLoad == nil {
		c.mu.Unlock()
		return Entry[V]{}, 0, ErrNotFound
	}
	cl := &call[V]{done: make(chan struct{}), version: max(known, c.tombs.Version(key)), born: c.versionNow(),
		purges: c.tags.purges.Load()}
	c.calls[key] = cl
	c.wg.Add(1)
	if c.batched() {
		return c.missBatched(ctx, key, cl)
	}
	c.mu.Unlock()
	if c.rc.InlineFill {
		done, err := c.startWait(ctx, key, false)
		if err == nil {
			defer done()
		}
		c.run(ctx, key, cl, nil, true)
		if err := ctx.Err(); err != nil {
			return Entry[V]{}, 0, err
		}
		e, src, err := c.wait(ctx, key, cl, started) // cl is done: its result
		if err == errAbandoned && cl.purged {
			return c.miss(ctx, key) // its value was purged as it came: fill again
		}
		return e, src, err
	}
	c.goRun(fillTask[V]{ctx: ctx, key: key, cl: cl})
	e, src, err := c.waitFor(ctx, key, cl, started)
	if err == errAbandoned {
		return c.miss(ctx, key) // its value was purged as it came (a worker's fill is never abandoned): fill again
	}
	return e, src, err
}

// waitFor is wait, made known to Config.Waits first when ctx is a fill's (a loader asking
// for another key): the hook may find that this wait would close a cycle of fills waiting
// on each other, here or through other nodes, and fail it at once with ErrFillCycle.
func (c *Cache[V]) waitFor(ctx context.Context, key string, cl *call[V], how waiter) (Entry[V], Source, error) {
	done, err := c.startWait(ctx, key, how != started)
	if err != nil {
		return Entry[V]{}, 0, err
	}
	defer done()
	return c.wait(ctx, key, cl, how)
}

// waiter is how a Get waits on a fill: as the Get that started it, or as one that joined it.
type waiter uint8

const (
	started waiter = iota
	joined
	// joinedLate: joined once a purge had been recorded here since the fill started. A copy
	// from elsewhere that comes back purged is not for it: its Get may have started after
	// that purge returned, and the copy may have left its member before the purge reached
	// it, an answer still on its way. The Gets that waited before the purge was recorded
	// here get the copy — they asked before the purge returned. Those that joined late fill
	// again, asking after the purge: the member they ask has applied it by then, or the
	// purge did not return nil (it names the member unreached, or has not returned yet).
	joinedLate
)

// joinedAt returns how a Get joining cl waits on it, given the count of purges recorded
// here when it joined (or before, after its Get started: an earlier count only makes it
// less late, and it was not late then).
func (c *Cache[V]) joinedAt(cl *call[V], purges uint64) waiter {
	if purges != cl.purges {
		return joinedLate
	}
	return joined
}

func noWait() {}

// startWait tells Config.Waits that ctx's fill is about to wait on the fill of key.
func (c *Cache[V]) startWait(ctx context.Context, key string, joined bool) (func(), error) {
	if c.rc.Waits == nil || chainOf(ctx) == nil {
		return noWait, nil
	}
	return c.rc.Waits.Wait(ctx, c.cfg.Name, key, joined)
}

// wait waits for cl on behalf of one Get. A caller whose ctx ends leaves alone: the fill is
// not cancelled and still serves the others and the store.
func (c *Cache[V]) wait(ctx context.Context, key string, cl *call[V], how waiter) (Entry[V], Source, error) {
	select {
	case <-cl.done: // ended already (a GetMany's keys, once its batch has run): no select of two
	default:
		select {
		case <-cl.done:
		case <-ctx.Done():
			return Entry[V]{}, 0, ctx.Err()
		}
	}
	if cl.abandoned || cl.purged || cl.purgedCopy && how == joinedLate {
		return Entry[V]{}, 0, errAbandoned
	}
	shared := how != started
	if cl.err != nil {
		return Entry[V]{}, 0, &FillError{Name: c.cfg.Name, Key: key, Err: cl.err, Shared: shared}
	}
	switch {
	case shared:
		return cl.entry, SourceCoalesced, nil
	case cl.entry.FreshFor <= 0:
		return cl.entry, SourceStale, nil // a stale copy taken over (see run), or a value stale at once
	}
	return cl.entry, SourceFill, nil
}

// refresh starts a background refresh of key, whose stored entry e is stale or about to be,
// unless one is running or the per-node cap of refreshes is reached; then the key refreshes
// on a later read.
func (c *Cache[V]) refresh(ctx context.Context, key string, e *entry[V]) {
	if c.load == nil && c.batchLoad == nil || !e.startRefresh() {
		return
	}
	c.mu.Lock()
	if _, ok := c.calls[key]; ok || c.closed {
		c.mu.Unlock()
		return // a fill is running (it clears nothing: its entry replaces e)
	}
	if !c.cfg.Refreshes.TryAcquire() {
		c.mu.Unlock()
		e.endRefresh()
		c.stats.refreshesSkipped.Add(1)
		return
	}
	// The refresh keeps key, which may be part of a larger string (a peer's batch of keys,
	// looked up one by one): it keeps a copy, not the whole.
	key = strings.Clone(key)
	cl := &call[V]{done: make(chan struct{}), stale: e, version: max(e.version, c.tombs.Version(key)), born: c.versionNow(),
		purges: c.tags.purges.Load()}
	c.calls[key] = cl
	c.wg.Add(1)
	if c.batched() {
		b := c.enqueueLocked(ctx, key, cl, true)
		if b == nil && c.cfg.BatchWindow <= 0 {
			b = c.takeLocked(true)
		}
		c.mu.Unlock()
		c.stats.refreshes.Add(1)
		if b != nil {
			c.goRun(fillTask[V]{ctx: b.ctx, b: b}) // a refresh never runs inline
		}
		return
	}
	c.mu.Unlock()
	c.stats.refreshes.Add(1)
	c.goRun(fillTask[V]{ctx: ctx, key: key, cl: cl, slot: c.cfg.Refreshes})
}

// errAbandoned is wait's answer to a waiter of an abandoned fill (call.abandoned).
var errAbandoned = errors.New("fill: abandoned by the Get that ran it")

// result is one loader run's outcome.
type result[V any] struct {
	v    V
	copy *Copy // what the loader said it copied; nil for a load from the source
	err  error
}

// run is a fill: it runs the loader once for cl and completes cl. On a worker (goRun), only
// the values of parent — the context of the Get that started the fill — are used. Inline, on
// the goroutine of that Get (Config.InlineFill), the loader runs under parent itself: when
// parent ends, so does the loader's ctx, and a fill that fails then is abandoned — nothing is
// stored, and its waiters start over.
func (c *Cache[V]) run(parent context.Context, key string, cl *call[V], slot *Limiter, inline bool) {
	defer c.wg.Done()
	if slot != nil {
		defer slot.Release()
	}
	base := parent
	if !inline {
		base = context.WithoutCancel(parent)
	}
	base = c.startSpan(base, key, cl)
	start, startNano := time.Now(), c.clock.NowNano()
	fc := &fillCtx{Context: base, deadline: start.Add(c.cfg.FillTimeout)}
	fc.one[0] = &cl.loading
	fc.link = link{parent: chainOf(parent), name: c.cfg.Name, key: key, choice: &fc.choice, refresh: cl.stale != nil,
		loading: fc.one[:], mu: &c.mu, asked: &cl.asked}
	x := &fc.choice
	var timer *time.Timer
	if !inline {
		// A fill on a worker ends at the fill timeout even when the loader ignores its
		// context: the timer completes cl with an error, and the loader's late result is
		// dropped. A timer is cheaper than running the loader on a goroutine of its own.
		// An inline loader must return at its ctx's end itself (Config.InlineFill).
		timer = time.AfterFunc(c.cfg.FillTimeout, func() {
			c.complete(key, cl, nil, result[V]{err: &TimeoutError{Timeout: c.cfg.FillTimeout}}, 0)
		})
		defer timer.Stop()
	}

	var r result[V]
	releaseFill := func() {}
	if c.cfg.Fills != nil {
		if release, err := c.cfg.Fills.AcquireFill(fc, c.cfg.Name, key); err != nil {
			r.err = fmt.Errorf("waiting for a fill slot: %w", err)
		} else {
			releaseFill = release
		}
	}
	if r.err == nil {
		r = c.loadSafe(fc, key) // a loader's panic is its error: the slot is released below
		if r.copy != nil {
			x.take(r.copy) // the loader has returned: nothing writes x any more
		}
	}
	// The slot is free before the fill's callers are woken: one that fills again at once
	// finds it (a Limiter of one, or a caller counting InUse, sees the fill ended).
	releaseFill()
	c.onFill(key, cl, time.Since(start), r.err)
	// What the fill's end costs is paid before its waiters are woken, not after: a waiter
	// woken on this P runs only once this goroutine parks.
	if timer != nil {
		timer.Stop()
	}
	fc.end()
	if inline && r.err != nil && parent.Err() != nil {
		r.err, x = errAbandoned, nil // complete stores nothing and marks cl abandoned
	}
	e := c.complete(key, cl, x, r, startNano)
	if e != nil && x.copied && c.clock.NowNano() >= e.fresh {
		// A stale value taken over from another node (within its grace there) is served
		// stale here too: its one refresh starts now, as a read of it would start it. The
		// refresh loads from the source (IsRefresh), so it does not take the copy again.
		c.refresh(base, key, e)
	}
}

// complete ends cl once, with the loader's result r (stored when it may be) or with the
// fill timeout's error, whichever comes first; the later call does nothing. It returns the
// entry it stored, or nil. With ReplicaConfig.Stored, the entry it stored is given to it
// before any caller of the fill is woken.
func (c *Cache[V]) complete(key string, cl *call[V], x *choice, r result[V], startNano int64) *entry[V] {
	s, ok := c.settle(key, cl, x, r, startNano)
	if !ok {
		return nil
	}
	if s.stored && c.rc.Stored != nil {
		c.rc.Stored([]string{key})
	}
	return c.finish(&s)
}

// settled is a fill's result once settle has stored it (or not), for finish to hand to its
// callers.
type settled[V any] struct {
	cl             *call[V]
	r              result[V]
	e              *entry[V] // what was to be stored, nil when nothing was kept
	stored, purged bool
	copied         bool // the loader took a copy from elsewhere (see choice), at version
	span           trace.Span
	links          []trace.Link
	now, fresh     int64
	stale          int64
	version        uint64
	fillMicros     uint32
	tags           []string
	born           uint64
}

// settle is the first half of complete: it stores the fill's result when it may, and ends
// the fill's call in c.calls; false when cl was completed already. (The result is a value:
// a pointer would cost every fill an allocation.)
func (c *Cache[V]) settle(key string, cl *call[V], x *choice, r result[V], startNano int64) (settled[V], bool) {
	s := c.prepare(cl, x, r, startNano)
	c.mu.Lock()
	ok := c.settleLocked(key, &s)
	c.mu.Unlock()
	if ok {
		endSpan(s.span, s.links, s.r.err)
	}
	return s, ok
}

// prepare is the part of settle that needs no lock: what the fill's result is, and the entry
// to store, if it is to be kept.
func (c *Cache[V]) prepare(cl *call[V], x *choice, r result[V], startNano int64) settled[V] {
	now := c.clock.NowNano()
	var (
		e              *entry[V] // what may be stored: allocated only if it would be kept
		fresh, stale   int64
		version        uint64
		fillMicros     uint32
		notFound, kept bool
		copied         bool
	)
	born := cl.born
	var tags []string
	if x != nil { // the loader returned, so x is no longer written
		version = cl.version
		if x.copied {
			version, copied = x.version, true
		}
		if x.bornSet {
			born = x.born
		}
		tags = x.tags
		if err := CheckTags(tags); err != nil && r.err == nil {
			r.err = err // a value whose tags break a limit is not stored: its callers say why
		}
		fillMicros = micros(time.Duration(now - startNano))
		switch {
		case r.err == nil:
			fresh, stale = c.lifetime(now, x)
			kept = true
		case errors.Is(r.err, ErrNotFound) && (c.cfg.NegativeTTL > 0 || x.set):
			// A loader's SetExpiry says how long its not-found is remembered (one taken over
			// from another node keeps its remaining time), else NegativeTTL.
			notFound, kept = true, true
			fresh = deadline(now, c.cfg.NegativeTTL)
			if x.set {
				fresh = deadline(now, x.fresh)
			}
			stale = fresh
		}
	}
	if kept && stale > now {
		e = newEntry(r.v, c.tags, tags, born)
		e.fresh, e.stale, e.version, e.fillMicros = fresh, stale, version, fillMicros
		if notFound {
			e.flags.Or(flagNotFound)
		}
	}
	return settled[V]{cl: cl, r: r, e: e, copied: copied, now: now, fresh: fresh, stale: stale,
		version: version, fillMicros: fillMicros, tags: tags, born: born}
}

// settleLocked is the part of settle under c.mu: it stores s's entry when it may, sets
// s.stored and s.purged, and ends the call in c.calls; false when the call was completed
// already. c.mu must be held.
func (c *Cache[V]) settleLocked(key string, s *settled[V]) bool {
	cl, e := s.cl, s.e
	if cl.completed {
		return false
	}
	cl.completed = true
	s.span, s.links = cl.span, cl.links // ended once c.mu is released (endSpan)
	cl.links = nil
	// A value the loader gave no lifetime (SetExpiry(ctx, 0, 0)) is returned but not stored;
	// nor is a copy older than a write known here (it was on its way when the write landed).
	// A value with a tag purged since it was born is not stored either — and one that would
	// not have been stored anyway (no lifetime; a near cache's copy of a key that is not hot)
	// is checked all the same, as it is returned. One the loader made is not returned
	// (purged): its callers fill again, from a source that has moved on. A copy from
	// elsewhere is returned to the Gets that waited on the fill before the purge was
	// recorded here, as a copy older than a write is: the member it came from had not heard
	// of the purge when it answered — it will before the purge returns, or the purge names it
	// unreached — and asking it again might only bring the same copy back. The Gets that
	// joined later fill again (see joinedLate).
	tagPurged := s.r.err == nil && (e != nil && e.purged() || e == nil && c.tags.Purged(s.tags, s.born))
	s.purged = tagPurged && !s.copied
	cl.purgedCopy = tagPurged && s.copied
	s.stored = e != nil && !cl.revoked && !c.closed && !tagPurged &&
		(!s.copied || s.version >= c.tombs.Floor(key))
	if s.stored {
		c.store.Set(key, e)
	}
	// A revoked call was detached by the write that revoked it (revokeLocked), and a newer
	// fill may have taken its place; any other is still the key's.
	if !cl.revoked {
		delete(c.calls, key)
	}
	return true
}

// finish is the second half of complete: it hands the settled result to the fill's callers,
// and returns the entry it stored, or nil.
func (c *Cache[V]) finish(s *settled[V]) *entry[V] {
	cl, r, e := s.cl, s.r, s.e
	if r.err == errAbandoned {
		cl.abandoned = true
		cl.end()
		return nil
	}
	if s.purged {
		c.stats.fills.Add(1)
		c.stats.purged.Add(1)
		cl.purged = true
		if cl.stale != nil {
			cl.stale.endRefresh()
		}
		cl.end()
		return nil
	}
	c.stats.fills.Add(1)
	if r.err != nil && !errors.Is(r.err, ErrNotFound) {
		c.stats.fillErrors.Add(1)
	}
	if !s.stored && cl.stale != nil {
		cl.stale.endRefresh() // the stale entry stays; a later read may retry
	}
	if r.err == nil {
		if e != nil {
			cl.entry = e.export(s.now)
		} else {
			cl.entry = exported(r.v, s.fresh, s.stale, s.version, s.fillMicros, s.now)
			if len(s.tags) > 0 { // returned, not stored: its callers still see its tags
				cl.entry.Tags, cl.entry.Born = s.tags, s.born
			}
		}
	}
	cl.err = r.err
	cl.end()
	if !s.stored {
		return nil
	}
	return e
}

// end wakes cl's callers: it closes cl.done, or, when cl shares it, counts cl out and closes
// it if cl was the last.
func (cl *call[V]) end() {
	if cl.left == nil || cl.left.Add(-1) == 0 {
		close(cl.done)
	}
}

// loadSafe runs the loader, recovering a panic into a *PanicError logged with its stack.
func (c *Cache[V]) loadSafe(ctx context.Context, key string) (r result[V]) {
	defer func() {
		if p := recover(); p != nil {
			stack := debug.Stack()
			c.cfg.Logger.Error("corral: loader panic", "cache", c.cfg.Name, "key", key,
				"panic", fmt.Sprint(p), "stack", string(stack))
			r = result[V]{err: &PanicError{Value: p, Stack: stack}}
		}
	}()
	r.v, r.copy, r.err = c.load(ctx, key)
	return r
}

func (c *Cache[V]) weigh(key string, v V) int64 {
	return int64(len(key)) + max(c.cfg.Weigher(key, v), 0) + entryOverhead
}
