package fill

import (
	"fmt"
	"iter"
	"time"
)

// Set stores v for key with the cache's TTL, jitter and grace, and returns the write's
// version. A fill of key in flight when Set lands does not store its (older) result, and
// the write is remembered (Tombstones), so no copy older than it is stored later.
func (c *Cache[V]) Set(key string, v V) (uint64, error) {
	if err := CheckKey(key); err != nil {
		return 0, err
	}
	now := c.clock.NowNano()
	e := &entry[V]{value: v}
	e.fresh, e.stale = c.lifetime(now, nil)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return 0, ErrClosed
	}
	// The version is drawn under mu, so that the writes of one cache are stored in the
	// order of their versions.
	e.version = c.nextVersion()
	c.tombs.Record(key, e.version)
	c.revokeLocked(key, e.version)
	c.store.Set(key, e)
	return e.version, nil
}

// SetFor is Set with a lifetime of the caller's instead of the cache's TTL, jitter and
// grace: v is fresh for freshFor (Never = forever), then served stale for staleFor more.
// known is the latest write of key the caller knew of when it started building v (a
// lease's grant, say): when a newer write of key is known here by now (the Tombstones'
// floor is above known), SetFor stores nothing and returns version 0 — that write revoked
// the caller's right to store. Pass math.MaxUint64 to store whatever was written since.
func (c *Cache[V]) SetFor(key string, v V, freshFor, staleFor time.Duration, known uint64) (uint64, error) {
	if err := CheckKey(key); err != nil {
		return 0, err
	}
	if freshFor < 0 || staleFor < 0 {
		return 0, fmt.Errorf("corral: negative lifetime %v + %v", freshFor, staleFor)
	}
	now := c.clock.NowNano()
	e := &entry[V]{value: v, fresh: deadline(now, freshFor)}
	e.stale = satAdd(e.fresh, staleFor)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return 0, ErrClosed
	}
	// Checked under mu, where every write records its version: a write either landed
	// before this check (and refuses the store) or gets a larger version after it.
	if c.tombs.Floor(key) > known {
		return 0, nil
	}
	e.version = c.nextVersion()
	c.tombs.Record(key, e.version)
	c.revokeLocked(key, e.version)
	c.store.Set(key, e)
	return e.version, nil
}

// Put stores an entry that another node produced, with its remaining lifetime and version —
// a hand-off, say. It does nothing, and returns false, when en is older than a write of the
// key known here (en.Version below the Tombstones' floor), when the held entry's version is
// at least en.Version, or when en is no longer servable (StaleFor ≤ 0). Fills in flight are
// not revoked: their results are not older.
func (c *Cache[V]) Put(key string, en Entry[V]) (bool, error) {
	if err := CheckKey(key); err != nil {
		return false, err
	}
	if en.StaleFor <= 0 {
		return false, nil
	}
	now := c.clock.NowNano()
	e := &entry[V]{
		value:      en.Value,
		fresh:      deadline(now, max(en.FreshFor, 0)),
		version:    en.Version,
		fillMicros: micros(en.FillTime),
	}
	e.stale = max(deadline(now, en.StaleFor), e.fresh)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false, ErrClosed
	}
	if en.Version < c.tombs.Floor(key) {
		return false, nil
	}
	if old, ok := c.store.GetIfPresent(key); ok && old.version >= en.Version && now < old.stale {
		return false, nil
	}
	c.store.Set(key, e)
	return true, nil
}

// Remove deletes key and returns the version of the removal. A fill of key in flight when
// Remove lands does not store its result (a lease that the delete revokes), though its
// waiters still get it; Gets after Remove start a new fill. The removal is remembered
// (Tombstones), so no copy older than it is stored later.
func (c *Cache[V]) Remove(key string) (uint64, error) {
	if err := CheckKey(key); err != nil {
		return 0, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return 0, ErrClosed
	}
	v := c.nextVersion()
	c.tombs.Record(key, v)
	c.revokeLocked(key, v)
	c.store.Invalidate(key)
	return v, nil
}

// Invalidate applies a write of key made elsewhere, at version: it drops the held entry when
// that is older (its version below version), revokes the fills in flight that started
// before this node knew of the write, and remembers the write, so that no older copy is
// stored later. It reports whether an entry was dropped. It works after Close too, which
// changes nothing but the Tombstones.
func (c *Cache[V]) Invalidate(key string, version uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.tombs.Record(key, version)
	c.revokeLocked(key, version)
	if old, ok := c.store.GetIfPresent(key); ok && old.version < version {
		c.store.Invalidate(key)
		return true
	}
	return false
}

// revokeLocked stops a fill of key in flight that started before the write of version was
// known here from storing its result, and detaches it, so that later Gets start a fresh fill
// rather than join one older than the write.
func (c *Cache[V]) revokeLocked(key string, version uint64) {
	if cl, ok := c.calls[key]; ok && cl.version < version {
		cl.revoked = true
		delete(c.calls, key)
	}
}

// Peek returns the stored entry of key if it can still be served (fresh or within grace),
// without filling, counting or refreshing.
func (c *Cache[V]) Peek(key string) (Entry[V], bool) {
	e, ok := c.store.GetIfPresent(key)
	if !ok || e.notFound() {
		return Entry[V]{}, false
	}
	now := c.clock.NowNano()
	if now >= e.stale {
		return Entry[V]{}, false
	}
	return e.export(now), true
}

// All yields every stored entry that can still be served, in no particular order. Entries
// written while it runs may or may not be seen.
func (c *Cache[V]) All() iter.Seq2[string, Entry[V]] {
	return func(yield func(string, Entry[V]) bool) {
		now := c.clock.NowNano()
		for k, e := range c.store.All() {
			if e.notFound() || now >= e.stale {
				continue
			}
			if !yield(k, e.export(now)) {
				return
			}
		}
	}
}

// Hottest yields the keys the store's policy considers hottest first, at most n of them.
func (c *Cache[V]) Hottest(n int) []string {
	var out []string
	for e := range c.store.Hottest() {
		if len(out) >= n {
			break
		}
		out = append(out, e.Key)
	}
	return out
}
