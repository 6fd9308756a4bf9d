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
		if now < e.fresh && e.flags.Load()&flagNotFound == 0 {
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

// GetEntry is Get that also returns the entry's remaining lifetime and version, and how the
// call was answered.
func (c *Cache[V]) GetEntry(ctx context.Context, key string) (Entry[V], Source, error) {
	c.stats.gets.Add()
	return c.getEntry(ctx, key)
}

// Lookup is GetEntry without counting the call in Stats.Gets: for a caller that answers
// requests counted elsewhere (a node serving its peers), so that every count stays
// monotonic without one count being derived from another.
func (c *Cache[V]) Lookup(ctx context.Context, key string) (Entry[V], Source, error) {
	return c.getEntry(ctx, key)
}

func (c *Cache[V]) getEntry(ctx context.Context, key string) (Entry[V], Source, error) {
	if err := CheckKey(key); err != nil {
		return Entry[V]{}, 0, err
	}
	if e, ok := c.store.GetIfPresent(key); ok {
		now := c.clock.NowNano()
		switch {
		case e.notFound() && now < e.fresh:
			c.stats.negativeHits.Add()
			return Entry[V]{}, SourceHit, ErrNotFound
		case now < e.fresh:
			if c.cfg.RefreshAhead > 0 && c.refreshEarly(e, now) {
				c.refresh(ctx, key, e)
			}
			return e.export(now), SourceHit, nil
		case now < e.stale && !e.notFound():
			c.stats.staleServed.Add()
			c.refresh(ctx, key, e)
			return e.export(now), SourceStale, nil
		}
	}
	return c.miss(ctx, key)
}
