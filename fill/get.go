package fill

import "context"

// Get returns the value of key: the stored value while it is fresh; a stale value within
// grace (starting one background refresh); otherwise the result of one fill shared by every
// concurrent Get of the key.
//
// Errors: a *KeyError for a bad key; ErrFillCycle when ctx is the context of a fill of key;
// ctx.Err() alone when ctx ends first (the fill goes on and serves the other callers and the
// store); a *FillError when the fill failed; ErrNotFound for a remembered not-found;
// ErrClosed after Close.
func (c *Cache[V]) Get(ctx context.Context, key string) (V, error) {
	// The hit path: one store lookup, one clock read, one striped count. Nothing here
	// allocates or takes a lock.
	if e, ok := c.store.GetIfPresent(key); ok {
		var now int64
		if c.coarse != nil {
			now = c.coarse.NowNano()
		} else {
			now = c.clock.NowNano()
		}
		// One load of the flags says "a value, untagged": a tagged one checks its tags.
		if f := e.flags.Load(); now < e.fresh && f&flagNotFound == 0 && (f&flagTagged == 0 || !e.purged()) {
			c.stats.gets.Add()
			if c.cfg.RefreshAhead > 0 && c.refreshEarly(e, now) {
				c.refresh(ctx, key, e)
			}
			return e.value, nil
		}
	}
	c.stats.gets.Add()
	en, _, err := c.getEntry(ctx, key)
	return en.Value, err
}

// GetStamped is Get's hit path for an entry that carries stamp: it returns the value and
// true when key is stored, fresh and stamped so (by GetStamping); otherwise it does nothing
// and returns false. A stamp is the caller's word that something it checked before stamping
// still holds — corral stamps a key's entry with the ring it found the key owned here under,
// so that while that ring stands a hit skips the owner lookup. stamp must be in
// [1, StampMask].
func (r *Replica[V]) GetStamped(ctx context.Context, key string, stamp uint32) (V, bool) {
	if e := r.stamped(ctx, key, stamp); e != nil {
		return e.value, true
	}
	var zero V
	return zero, false
}

// GetStampedTags is GetStamped that also returns the entry's tags (nil: none).
func (r *Replica[V]) GetStampedTags(ctx context.Context, key string, stamp uint32) (V, []string, bool) {
	if e := r.stamped(ctx, key, stamp); e != nil {
		tags, _ := e.tagsOf()
		return e.value, tags, true
	}
	var zero V
	return zero, nil, false
}

// stamped is GetStamped's entry, nil for none.
func (r *Replica[V]) stamped(ctx context.Context, key string, stamp uint32) *entry[V] {
	c := r.Cache
	// A stamped entry is never a remembered not-found (GetStamping stamps only values), so
	// the stamp is the one flag word to read; a tagged entry checks its tags too.
	if e, ok := c.store.GetIfPresent(key); ok {
		f := e.flags.Load()
		if f>>stampShift != stamp || f&flagTagged != 0 && e.purged() {
			return nil
		}
		var now int64
		if c.coarse != nil {
			now = c.coarse.NowNano()
		} else {
			now = c.clock.NowNano()
		}
		if now < e.fresh {
			c.stats.gets.Add()
			if c.cfg.RefreshAhead > 0 && c.refreshEarly(e, now) {
				c.refresh(ctx, key, e)
			}
			return e
		}
	}
	return nil
}

// GetStamping is Get that stamps the entry it answers a fresh hit from with stamp, for
// GetStamped (a value a fill stores is stamped by the next hit). stamp must be in
// [1, StampMask].
func (r *Replica[V]) GetStamping(ctx context.Context, key string, stamp uint32) (V, error) {
	if v, ok := r.HitStamping(ctx, key, stamp); ok {
		return v, nil
	}
	return r.Cache.Get(ctx, key)
}

// HitStamping is GetStamping's hit: it returns the value and true when key is stored and
// fresh (stamping its entry with stamp), and false otherwise, having done nothing. It never
// waits.
func (r *Replica[V]) HitStamping(ctx context.Context, key string, stamp uint32) (V, bool) {
	if e := r.hitStamping(ctx, key, stamp); e != nil {
		return e.value, true
	}
	var zero V
	return zero, false
}

// HitStampingTags is HitStamping that also returns the entry's tags (nil: none).
func (r *Replica[V]) HitStampingTags(ctx context.Context, key string, stamp uint32) (V, []string, bool) {
	if e := r.hitStamping(ctx, key, stamp); e != nil {
		tags, _ := e.tagsOf()
		return e.value, tags, true
	}
	var zero V
	return zero, nil, false
}

// hitStamping is HitStamping's entry, nil for none.
func (r *Replica[V]) hitStamping(ctx context.Context, key string, stamp uint32) *entry[V] {
	e := r.Cache.freshHit(ctx, key)
	if e != nil {
		e.stamp(stamp)
	}
	return e
}

// freshHit returns key's entry when it is stored and fresh — a value, not a remembered
// not-found, and not purged — counting the Get and starting a refresh ahead of expiry
// (Config.RefreshAhead), as a hit does; nil, having done nothing, otherwise.
func (c *Cache[V]) freshHit(ctx context.Context, key string) *entry[V] {
	e, ok := c.store.GetIfPresent(key)
	if !ok {
		return nil
	}
	now := c.clock.NowNano()
	if now >= e.fresh || e.notFound() || e.purged() {
		return nil
	}
	c.stats.gets.Add()
	if c.cfg.RefreshAhead > 0 && c.refreshEarly(e, now) {
		c.refresh(ctx, key, e)
	}
	return e
}

// GetFresh is GetEntry for a value stored here and fresh, and nothing else: it returns the
// value and its tags (nil: none), counting the Get, when key's value is stored and fresh, and
// false otherwise, having done nothing — a miss, a stale value, a remembered not-found, a
// value whose tag was purged, a bad key. It never waits: a refresh ahead of expiry
// (Config.RefreshAhead) starts in the background, as for GetEntry.
func (r *Replica[V]) GetFresh(ctx context.Context, key string) (V, []string, bool) {
	if CheckKey(key) == nil {
		if e := r.Cache.freshHit(ctx, key); e != nil {
			tags, _ := e.tagsOf()
			return e.value, tags, true
		}
	}
	var zero V
	return zero, nil, false
}

// GetEntry is Get that also returns the entry's remaining lifetime and version, and how the
// call was answered.
func (c *Cache[V]) GetEntry(ctx context.Context, key string) (Entry[V], Source, error) {
	c.stats.gets.Add()
	return c.getEntry(ctx, key)
}

// Lookup is GetEntry without counting the call in Stats.Gets: for a caller that answers
// requests counted elsewhere (a node serving its peers), so that every count stays
// monotonic without one count being derived from another.
func (r *Replica[V]) Lookup(ctx context.Context, key string) (Entry[V], Source, error) {
	c := r.Cache
	return c.getEntry(ctx, key)
}

// LookupHeld is Lookup for a key held here: it answers as Lookup would when the key is
// stored fresh, or stale within grace (starting its refresh), and reports false otherwise,
// having done nothing. It never waits: a node answers peers' hits with it on the goroutine
// that reads their requests. A remembered ErrNotFound is left to Lookup.
func (r *Replica[V]) LookupHeld(ctx context.Context, key string) (Entry[V], Source, bool) {
	c := r.Cache
	if CheckKey(key) != nil {
		return Entry[V]{}, 0, false
	}
	e, src, _, ok := c.held(ctx, key, false)
	return e, src, ok
}

func (c *Cache[V]) getEntry(ctx context.Context, key string) (Entry[V], Source, error) {
	if err := CheckKey(key); err != nil {
		return Entry[V]{}, 0, err
	}
	if e, src, err, ok := c.held(ctx, key, true); ok {
		return e, src, err
	}
	return c.miss(ctx, key)
}

// held answers from the store when key is there, fresh or within grace (or, with negatives,
// remembered as not found); ok is false when a fill is needed. It does not count the get.
func (c *Cache[V]) held(ctx context.Context, key string, negatives bool) (Entry[V], Source, error, bool) {
	e, ok := c.store.GetIfPresent(key)
	if !ok || e.purged() {
		return Entry[V]{}, 0, nil, false
	}
	now := c.clock.NowNano()
	switch {
	case e.notFound() && now < e.fresh:
		if !negatives {
			return Entry[V]{}, 0, nil, false
		}
		c.stats.negativeHits.Add()
		return Entry[V]{}, SourceHit, ErrNotFound, true
	case now < e.fresh:
		if c.cfg.RefreshAhead > 0 && c.refreshEarly(e, now) {
			c.refresh(ctx, key, e)
		}
		return e.export(now), SourceHit, nil, true
	case now < e.stale && !e.notFound():
		c.stats.staleServed.Add()
		c.refresh(ctx, key, e)
		return e.export(now), SourceStale, nil, true
	}
	return Entry[V]{}, 0, nil, false
}
