package fill

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"
)

// A batch is one run of a batch loader for several keys, each of which has a call of its own
// in Cache.calls: a Get of any of them joins its call as it joins a fill of one key, so every
// key is still filled once however the keys are asked for. Misses go to the cache's pending
// batch (one for misses, one for refreshes), which loads when it holds Config.MaxBatch keys,
// when Config.BatchWindow has passed since its first key, or at once without a window; a
// GetMany puts all its misses in under one lock.

// BatchLoadFunc loads the values of several keys in one call (a database's
// SELECT … WHERE id IN (…)): the keys a cache must fill together — the misses of a GetMany,
// with those of other Gets and GetManys that come within Config.BatchWindow, at most
// Config.MaxBatch of them, each once. A key absent from the map it returns is ErrNotFound; an
// error fails every key of the call and stores nothing (the next Get fills again). It runs
// under a fill's own context, as a LoadFunc does: Tag and SetExpiry called with that context
// apply to every key of the call, TagKey to one.
type BatchLoadFunc[V any] func(ctx context.Context, keys []string) (map[string]V, error)

// ReplicaBatchLoadFunc loads keys for a Replica as a BatchLoadFunc does, but answers each
// key on its own, in out (as long as keys), without a map: out[i], keys[i]'s answer, is its
// value, the copy of another replica's it took instead (as a ReplicaLoadFunc does), or its
// error; it is ErrNotFound until the loader sets it. An error fails every key. The loader may
// set different keys' answers from several goroutines at once, never after it returned.
type ReplicaBatchLoadFunc[V any] func(ctx context.Context, keys []string, out []Loaded[V]) error

// Loaded is one key's answer of a ReplicaBatchLoadFunc.
type Loaded[V any] struct {
	Value V
	Copy  *Copy // non-nil: Value was taken from elsewhere (see ReplicaLoadFunc)
	Err   error // ErrNotFound for a key that does not exist
}

// Batching defaults and bounds (Config.BatchWindow, Config.MaxBatch).
const (
	// DefaultBatchWindow is how long a batch waits for more keys after its first by
	// default: long enough for the misses of requests that arrive together, short beside a
	// database round trip.
	DefaultBatchWindow = time.Millisecond
	// MaxBatchWindow is the longest BatchWindow.
	MaxBatchWindow = time.Second
	// DefaultMaxBatch is the most keys one BatchLoadFunc call gets by default: a page's
	// keys on one owner are one call.
	DefaultMaxBatch = 1024
)

// batch is a batch loader's run for keys, each with its call; calls[i] is keys[i]'s.
type batch[V any] struct {
	ctx     context.Context // whose values the loader gets: its first caller's
	keys    []string
	calls   []*call[V]
	refresh bool        // a batch of refreshes (see IsRefresh)
	slots   int         // Config.Refreshes slots its refreshes hold, given back when it ends
	timer   *time.Timer // ends its window; nil without one
	// links are the spans of the callers other than ctx's whose misses joined the batch
	// (ReplicaConfig.Tracing), each once.
	links []trace.Link
}

// batched reports whether a Get's miss and a refresh go to the batch loader.
func (c *Cache[V]) batched() bool {
	return c.batchLoad != nil && (c.load == nil || !c.rc.BatchOnlyMany)
}

// kind is the index in Cache.pending of the batch a miss (or a refresh) goes to.
func kind(refresh bool) int {
	if refresh {
		return 1
	}
	return 0
}

// enqueueLocked adds key, whose fill is cl, to the pending batch of its kind, and returns
// that batch when it is full: the caller starts it. c.mu must be held.
func (c *Cache[V]) enqueueLocked(ctx context.Context, key string, cl *call[V], refresh bool) *batch[V] {
	k := kind(refresh)
	b := c.pending[k]
	if b == nil {
		b = &batch[V]{ctx: ctx, refresh: refresh}
		c.pending[k] = b
		if w := c.cfg.BatchWindow; w > 0 {
			b.timer = time.AfterFunc(w, func() { c.windowEnded(b) })
		}
	}
	b.keys = append(b.keys, key)
	b.calls = append(b.calls, cl)
	if c.rc.Tracing != nil {
		b.linkLocked(ctx)
	}
	if refresh {
		b.slots++ // the refresh's slot (see refresh), given back when the batch ends
	}
	if len(b.keys) >= c.cfg.MaxBatch {
		return c.takeLocked(refresh)
	}
	return nil
}

// takeLocked takes the pending batch of its kind out, to be started by the caller; nil when
// there is none. c.mu must be held.
func (c *Cache[V]) takeLocked(refresh bool) *batch[V] {
	k := kind(refresh)
	b := c.pending[k]
	c.pending[k] = nil
	if b != nil && b.timer != nil {
		b.timer.Stop()
	}
	return b
}

// windowEnded starts b when its window ends, unless it was started already (it filled up).
func (c *Cache[V]) windowEnded(b *batch[V]) {
	c.mu.Lock()
	k := kind(b.refresh)
	if c.pending[k] != b {
		c.mu.Unlock()
		return
	}
	c.pending[k] = nil
	c.mu.Unlock()
	c.goRun(fillTask[V]{ctx: b.ctx, b: b})
}

// missBatched is miss for a cache with a batch loader, from where miss has registered cl,
// the fill of key, under c.mu (which it releases): the key goes to the pending batch, which
// this Get starts when it is full or there is no window — on this goroutine with
// Config.InlineFill, as miss runs an inline fill — and the Get waits for cl.
func (c *Cache[V]) missBatched(ctx context.Context, key string, cl *call[V]) (Entry[V], Source, error) {
	b := c.enqueueLocked(ctx, key, cl, false)
	if b == nil && c.cfg.BatchWindow <= 0 {
		b = c.takeLocked(false)
	}
	c.mu.Unlock()
	if b != nil && c.rc.InlineFill {
		done, err := c.startWait(ctx, key, false)
		if err == nil {
			defer done()
		}
		c.runBatch(ctx, b, true)
		if err := ctx.Err(); err != nil {
			return Entry[V]{}, 0, err
		}
		e, src, err := c.wait(ctx, key, cl, started) // cl is done: its result
		if err == errAbandoned {
			return c.miss(ctx, key) // the batch's runner left, or the value was purged as it came: fill again
		}
		return e, src, err
	}
	if b != nil {
		c.goRun(fillTask[V]{ctx: b.ctx, b: b})
	}
	e, src, err := c.waitFor(ctx, key, cl, started)
	if err == errAbandoned {
		return c.miss(ctx, key)
	}
	return e, src, err
}

// runBatch is run for a batch: it runs the batch loader once for b's keys and completes
// each key's call with its own result, as run completes a fill of one key. inline is as for
// run.
func (c *Cache[V]) runBatch(parent context.Context, b *batch[V], inline bool) {
	defer c.wg.Add(-len(b.calls))
	if b.slots > 0 {
		defer func() {
			for range b.slots {
				c.cfg.Refreshes.Release()
			}
		}()
	}
	base := parent
	if !inline {
		base = context.WithoutCancel(parent)
	}
	lctx, span := c.startBatchSpan(base, b) // the loader's context: base, with the batch's span
	start, startNano := time.Now(), c.clock.NowNano()
	fc := &fillCtx{Context: lctx, deadline: start.Add(c.cfg.FillTimeout)}
	loading := make([]*atomic.Bool, len(b.calls))
	for i, cl := range b.calls {
		loading[i] = &cl.loading
	}
	fc.link = link{parent: chainOf(parent), name: c.cfg.Name, key: b.keys[0], keys: b.keys, choice: &fc.choice,
		refresh: b.refresh, loading: loading}
	var timer *time.Timer
	if !inline {
		// As for run: the fill timeout ends every key's fill even when the loader ignores
		// its context.
		timer = time.AfterFunc(c.cfg.FillTimeout, func() {
			err := &TimeoutError{Timeout: c.cfg.FillTimeout}
			for i, cl := range b.calls {
				c.complete(b.keys[i], cl, nil, result[V]{err: err}, 0)
			}
		})
		defer timer.Stop()
	}

	out := make([]Loaded[V], len(b.keys))
	for i := range out {
		out[i].Err = ErrNotFound
	}
	var err error
	releaseFill := func() {}
	if c.cfg.Fills != nil {
		if release, aerr := c.cfg.Fills.AcquireFill(fc, c.cfg.Name, b.keys[0]); aerr != nil {
			err = fmt.Errorf("waiting for a fill slot: %w", aerr)
		} else {
			releaseFill = release
		}
	}
	if err == nil {
		err = c.batchLoadSafe(fc, b.keys, out)
	}
	releaseFill()
	c.stats.batchLoads.Add(1)
	c.stats.batchKeys.Add(uint64(len(b.keys)))
	if c.cfg.OnFill != nil {
		c.cfg.OnFill(time.Since(start), err)
	}
	if timer != nil {
		timer.Stop()
	}
	fc.end()
	x := &fc.choice // the loader has returned: nothing writes it any more
	// Settle every key first, then hand the stored entries to ReplicaConfig.Stored at once,
	// then wake every key's callers: as complete does for one key. Without Stored, each key
	// is finished once it is settled (a GetMany's calls share one done channel, closed by the
	// last). Keys are settled settleChunk at a time under one hold of c.mu.
	var done []settled[V] // a zero one (nil cl): the key was completed already
	if c.rc.Stored != nil {
		done = make([]settled[V], len(b.calls))
	}
	var stored []string
	var xk choice
	var chunk [settleChunk]settled[V]
	var settledOK [settleChunk]bool
	for from := 0; from < len(b.calls); from += settleChunk {
		n := min(settleChunk, len(b.calls)-from)
		for j := range n {
			i := from + j
			key := b.keys[i]
			r := result[V]{err: err}
			if err == nil {
				r = result[V]{v: out[i].Value, copy: out[i].Copy, err: out[i].Err}
			}
			x.forKey(key, &xk) // prepare keeps none of xk but its tags: one for every key
			xi := &xk
			if r.copy != nil {
				xi.take(r.copy)
			}
			if inline && r.err != nil && parent.Err() != nil {
				r.err, xi = errAbandoned, nil // settle stores nothing, and finish marks cl abandoned
			}
			chunk[j] = c.prepare(b.calls[i], xi, r, startNano)
		}
		c.mu.Lock()
		for j := range n {
			settledOK[j] = c.settleLocked(b.keys[from+j], &chunk[j])
		}
		c.mu.Unlock()
		for j := range n {
			i := from + j
			if settledOK[j] {
				endSpan(chunk[j].span, chunk[j].links, chunk[j].r.err)
				if span != nil {
					b.links = appendLinks(b.links, chunk[j].links)
				}
			}
			switch {
			case !settledOK[j]:
			case done == nil:
				c.finishKey(base, b.keys[i], &chunk[j])
			default:
				done[i] = chunk[j]
				if chunk[j].stored {
					stored = append(stored, b.keys[i])
				}
			}
		}
	}
	endSpan(span, b.links, err)
	if len(stored) > 0 {
		c.rc.Stored(stored)
	}
	for i := range done {
		if s := &done[i]; s.cl != nil {
			c.finishKey(base, b.keys[i], s)
		}
	}
}

// settleChunk is how many keys of a batch are settled under one hold of the cache's lock: a
// page of keys takes it a few times, not once a key, and nobody waits for it long.
const settleChunk = 16

// finishKey finishes the settled fill s of key, one of a batch's (see finish), and refreshes a
// stale copy it stored, as run does.
func (c *Cache[V]) finishKey(ctx context.Context, key string, s *settled[V]) {
	if e := c.finish(s); e != nil && s.r.copy != nil && c.clock.NowNano() >= e.fresh {
		c.refresh(ctx, key, e)
	}
}

// forKey sets xi to the choices of a batch's fill for key: the batch's, with key's own tags.
func (x *choice) forKey(key string, xi *choice) {
	*xi = *x
	if t := x.keyTags[key]; len(t) > 0 {
		xi.tags = slices.Clone(x.tags)
		for _, tag := range t {
			if !slices.Contains(xi.tags, tag) {
				xi.tags = append(xi.tags, tag)
			}
		}
	} else if len(x.tags) > 0 {
		xi.tags = slices.Clip(x.tags) // take may append: not onto the batch's
	}
	xi.keyTags = nil
}

// batchLoadSafe runs the batch loader, recovering a panic into a *PanicError logged with its
// stack.
func (c *Cache[V]) batchLoadSafe(ctx context.Context, keys []string, out []Loaded[V]) (err error) {
	defer func() {
		if p := recover(); p != nil {
			stack := debug.Stack()
			c.cfg.Logger.Error("corral: batch loader panic", "cache", c.cfg.Name, "keys", len(keys),
				"panic", fmt.Sprint(p), "stack", string(stack))
			err = &PanicError{Value: p, Stack: stack}
		}
	}()
	return c.batchLoad(ctx, keys, out)
}

// TagKey tags the value a batch loader is about to return for key (see Tag, which tags every
// key of the batch); calls add up. It must be called with the ctx the loader was given, before
// the loader returns; it does nothing when ctx is not a loader's. In a LoadFunc it tags the
// value when key is the key being filled.
func TagKey(ctx context.Context, key string, tags ...string) {
	l := chainOf(ctx)
	if l == nil || l.choice == nil {
		return
	}
	if l.keys == nil {
		if l.key == key {
			Tag(ctx, tags...)
		}
		return
	}
	if !slices.Contains(l.keys, key) {
		return
	}
	if l.choice.keyTags == nil {
		l.choice.keyTags = make(map[string][]string)
	}
	l.choice.keyTags[key] = append(l.choice.keyTags[key], tags...)
}

// Result is one key's answer of GetEntries: its entry and how it was found, or its error.
type Result[V any] struct {
	Entry  Entry[V]
	Source Source
	Err    error // as GetEntry's: ErrNotFound for a key that is not found
}

// GetMany returns the values of keys, each read as Get would read it: the stored value while
// it is fresh, a stale one within grace (starting its one refresh), else a fill — joining a
// fill of the key already in flight. The keys that miss are filled together: with
// Config.BatchLoad in one call per batch (see BatchLoadFunc), else each by the loader, all
// at once. A key that is not found is in neither map; a key that failed is in errs with the
// error Get would have returned (a *KeyError for a bad key, ErrFillCycle, a *FillError, …).
// A key asked for twice is read once. When ctx ends first, each key not answered yet is in
// errs with ctx.Err(); the fills go on and serve the other callers and the store.
func (c *Cache[V]) GetMany(ctx context.Context, keys []string) (values map[string]V, errs map[string]error) {
	values = make(map[string]V, len(keys))
	for key, r := range c.getMany(ctx, keys, true) {
		switch {
		case r.Err == nil:
			values[key] = r.Entry.Value
		case errors.Is(r.Err, ErrNotFound):
		default:
			if errs == nil {
				errs = make(map[string]error)
			}
			errs[key] = r.Err
		}
	}
	return values, errs
}

// GetEntries is GetMany answering each key as GetEntry would.
func (r *Replica[V]) GetEntries(ctx context.Context, keys []string) map[string]Result[V] {
	return r.getMany(ctx, keys, true)
}

// LookupEntries is GetEntries on behalf of another process: it counts no Get (see Lookup).
func (r *Replica[V]) LookupEntries(ctx context.Context, keys []string) map[string]Result[V] {
	return r.getMany(ctx, keys, false)
}

// GetEach is GetEntries without the map: it answers each of keys with answer, given the
// key's index in keys, on the calling goroutine, as the answers come. keys should hold each
// key once: a key asked for twice is answered twice (its second read joins its first's fill).
// When ctx ends first, each key not answered yet is answered with ctx.Err().
func (r *Replica[V]) GetEach(ctx context.Context, keys []string, answer func(i int, r Result[V])) {
	r.getEach(ctx, keys, true, answer)
}

// LookupEach is GetEach on behalf of another process: it counts no Get (see Lookup).
func (r *Replica[V]) LookupEach(ctx context.Context, keys []string, answer func(i int, r Result[V])) {
	r.getEach(ctx, keys, false, answer)
}

// getMany answers each of keys, counting a Get of each when count is set; a key asked for
// twice is read once.
func (c *Cache[V]) getMany(ctx context.Context, keys []string, count bool) map[string]Result[V] {
	out := make(map[string]Result[V], len(keys))
	uniq := keys
	for i, key := range keys {
		if _, dup := out[key]; dup {
			if len(uniq) == len(keys) { // the first duplicate: uniq becomes a list of its own
				uniq = slices.Clone(keys[:i])
			}
			continue
		}
		out[key] = Result[V]{}
		if len(uniq) < len(keys) { // past a duplicate
			uniq = append(uniq, key)
		}
	}
	c.getEach(ctx, uniq, count, func(i int, r Result[V]) { out[uniq[i]] = r })
	return out
}

// getEach answers each of keys with answer (see GetEach), counting a Get of each when count
// is set.
func (c *Cache[V]) getEach(ctx context.Context, keys []string, count bool, answer func(i int, r Result[V])) {
	var misses []int32 // the indexes of the keys that miss
	for i, key := range keys {
		if err := CheckKey(key); err != nil {
			answer(i, Result[V]{Err: err})
			continue
		}
		if count {
			c.stats.gets.Add()
		}
		if e, src, err, ok := c.held(ctx, key, true); ok {
			answer(i, Result[V]{Entry: e, Source: src, Err: err})
			continue
		}
		if misses == nil {
			misses = make([]int32, 0, len(keys)-i)
		}
		misses = append(misses, int32(i))
	}
	if len(misses) == 0 {
		return
	}
	type waiting struct {
		i   int32
		how waiter
		cl  *call[V]
	}
	waits := make([]waiting, 0, len(misses))
	var singles []fillTask[V]
	var batches []*batch[V]
	// The fills this GetMany starts, in one allocation; when they all go to one batch, which
	// ends them all at once, they share one done channel (see call.end).
	var calls []call[V]
	var first *batch[V] // the batch of the first fill started, when they all go to it
	oneBatch := c.batchLoad != nil
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		for _, i := range misses {
			answer(int(i), Result[V]{Err: ErrClosed})
		}
		return
	}
	now := c.clock.NowNano()
	purges := c.tags.purges.Load() // for the fills it starts, and for those it joins (see joinedAt)
	// The fills it starts are born now, all of them: one reading before any starts is no
	// later than each one's own would be, which is what a born version must be (see Tags).
	born := c.versionNow()
	chain := chainOf(ctx) // once: a nil chain (no fill above this GetMany) has no link
	for m, i := range misses {
		key := keys[i]
		if chain.inChain(c.cfg.Name, key) {
			answer(int(i), Result[V]{Err: ErrFillCycle})
			continue
		}
		if cl, ok := c.calls[key]; ok {
			c.stats.coalesced.Add(1)
			waits = append(waits, waiting{i, c.joinedAt(cl, purges), cl})
			continue
		}
		// Look again under mu, as miss does: a fill may have ended since the first look.
		var known uint64
		if e, ok := c.store.GetIfPresent(key); ok {
			if e.purged() {
				c.store.Invalidate(key)
				c.stats.purged.Add(1)
			} else if now < e.fresh {
				if e.notFound() {
					c.stats.negativeHits.Add()
					answer(int(i), Result[V]{Source: SourceHit, Err: ErrNotFound})
				} else {
					answer(int(i), Result[V]{Entry: e.export(now), Source: SourceHit})
				}
				continue
			}
			known = e.version
		}
		if c.load == nil && c.batchLoad == nil {
			answer(int(i), Result[V]{Err: ErrNotFound})
			continue
		}
		if calls == nil {
			calls = make([]call[V], 0, len(misses)-m) // never grown: the calls stay where they are
		}
		calls = calls[:len(calls)+1] // set in place: a call is too large to copy in
		cl := &calls[len(calls)-1]
		cl.version, cl.born, cl.purges = max(known, c.tombs.Version(key)), born, purges
		c.calls[key] = cl
		c.wg.Add(1)
		waits = append(waits, waiting{i, started, cl})
		if c.batchLoad == nil {
			singles = append(singles, fillTask[V]{ctx: ctx, key: key, cl: cl})
			continue
		}
		b := c.enqueueLocked(ctx, key, cl, false)
		if b != nil {
			batches = append(batches, b)
		} else {
			b = c.pending[kind(false)]
			if rest := len(misses) - m - 1; cap(b.keys)-len(b.keys) < rest {
				// Room for this GetMany's other misses at once, not a growth at a time.
				b.keys, b.calls = slices.Grow(b.keys, rest), slices.Grow(b.calls, rest)
			}
		}
		if first == nil {
			first = b
		}
		oneBatch = oneBatch && b == first
	}
	if c.batchLoad != nil && c.cfg.BatchWindow <= 0 {
		if b := c.takeLocked(false); b != nil {
			batches = append(batches, b)
		}
	}
	// Before c.mu is released: nobody else has seen the calls yet.
	if oneBatch && len(calls) > 1 {
		done, left := make(chan struct{}), new(atomic.Int32)
		left.Store(int32(len(calls)))
		for i := range calls {
			calls[i].done, calls[i].left = done, left
		}
	} else {
		for i := range calls {
			calls[i].done = make(chan struct{})
		}
	}
	c.mu.Unlock()
	for _, t := range singles {
		c.goRun(t)
	}
	for i, b := range batches {
		if c.rc.InlineFill && i == len(batches)-1 {
			c.runBatch(ctx, b, true) // the others run meanwhile, on workers
			continue
		}
		c.goRun(fillTask[V]{ctx: b.ctx, b: b})
	}
	for _, w := range waits {
		key := keys[w.i]
		e, src, err := c.waitFor(ctx, key, w.cl, w.how)
		if err == errAbandoned {
			e, src, err = c.getEntry(ctx, key) // its fill was abandoned or purged: alone, again
		}
		answer(int(w.i), Result[V]{Entry: e, Source: src, Err: err})
	}
}
