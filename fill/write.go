package fill

import (
	"context"
	"fmt"
	"iter"
	"math"
	"time"
)

// Set stores v for key with the cache's TTL, jitter and grace, tagged with tags (see Tags),
// and returns the write's version. A fill of key in flight when Set lands does not store its
// (older) result, and the write is remembered (Tombstones), so no copy older than it is
// stored later. Errors: a *KeyError, a *TagError, ErrClosed.
func (c *Cache[V]) Set(key string, v V, tags ...string) (uint64, error) {
	if err := CheckKey(key); err != nil {
		return 0, err
	}
	if err := CheckTags(tags); err != nil {
		return 0, err
	}
	now := c.clock.NowNano()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return 0, ErrClosed
	}
	// The version is drawn under mu, so that the writes of one cache are stored in the
	// order of their versions; a tagged value is born with its write.
	version := c.nextVersion()
	e := newEntry(v, c.tags, tags, version)
	e.fresh, e.stale = c.lifetime(now, nil)
	e.version = version
	c.tombs.Record(key, e.version)
	c.revokeLocked(key, e.version)
	c.store.Set(key, e)
	return e.version, nil
}

// SetAt is Set with the write's version given by the caller — a writer elsewhere that drew
// it from its own clock — instead of drawn here: a write that reaches the cache late (sent
// before a newer write, delayed, retried) is applied at its own version and cannot pass the
// newer one. It stores v, tagged with tags and born at version (see Tags), and reports
// true, unless a write of key at a higher version is known here (the held entry's, or a
// remembered one) or a tag was purged after version; either way the write is remembered,
// and fills in flight that started before it are revoked.
func (r *Replica[V]) SetAt(key string, v V, version uint64, tags ...string) (bool, error) {
	c := r.Cache
	if err := CheckKey(key); err != nil {
		return false, err
	}
	if err := CheckTags(tags); err != nil {
		return false, err
	}
	e := newEntry(v, c.tags, tags, version)
	e.version = version
	e.fresh, e.stale = c.lifetime(c.clock.NowNano(), nil)
	return c.setAt(key, e, math.MaxUint64)
}

// SetFor is SetAt with a lifetime of the caller's instead of the cache's TTL, jitter and
// grace — v is fresh for freshFor (Never = forever), then served stale for staleFor more —
// and a condition: known is the latest write of key the caller knew of when it started
// building v (a lease's grant, say). When a write of key newer than known is known here by
// now, that write revoked the caller's right to store: SetFor changes nothing and returns
// false. Pass math.MaxUint64 to store whatever was written since. The value is tagged with
// tags and born at version, as SetAt's.
func (r *Replica[V]) SetFor(key string, v V, freshFor, staleFor time.Duration, known, version uint64, tags ...string) (bool, error) {
	c := r.Cache
	if err := CheckKey(key); err != nil {
		return false, err
	}
	if freshFor < 0 || staleFor < 0 {
		return false, fmt.Errorf("corral: negative lifetime %v + %v", freshFor, staleFor)
	}
	if err := CheckTags(tags); err != nil {
		return false, err
	}
	e := newEntry(v, c.tags, tags, version)
	e.version, e.fresh = version, deadline(c.clock.NowNano(), freshFor)
	e.stale = satAdd(e.fresh, staleFor)
	return c.setAt(key, e, known)
}

// setAt stores e, a write at e.version, under SetAt's and SetFor's rules.
func (c *Cache[V]) setAt(key string, e *entry[V], known uint64) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false, ErrClosed
	}
	// Only this key's own writes count, not the Tombstones' floors: a floor may hold a newer
	// write of another key, which says nothing of this one. Checked under mu, where every
	// write records its version: a write either landed before this check or after it.
	latest := c.tombs.Version(key)
	if old, ok := c.store.GetIfPresent(key); ok {
		latest = max(latest, old.version)
	}
	if latest > known {
		return false, nil // revoked: nothing changes
	}
	c.tombs.Record(key, e.version)
	c.revokeLocked(key, e.version)
	if latest > e.version {
		return false, nil // a newer write is here already
	}
	if e.purged() {
		// A purge of one of its tags overtook the write: the write stands (remembered, the
		// older copies gone) but its value is purged.
		c.store.Invalidate(key)
		return false, nil
	}
	c.store.Set(key, e)
	return true, nil
}

// RemoveAt is Remove with the removal's version given by the caller (see SetAt): it deletes
// key unless the held entry is of a higher version, remembers the removal and revokes older
// fills.
func (r *Replica[V]) RemoveAt(key string, version uint64) error {
	c := r.Cache
	if err := CheckKey(key); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	c.tombs.Record(key, version)
	c.revokeLocked(key, version)
	if old, ok := c.store.GetIfPresent(key); ok && old.version <= version {
		c.store.Invalidate(key)
	}
	return nil
}

// Put stores an entry that another node produced, with its remaining lifetime, version, tags
// and born — a hand-off, say; a stale one within grace, or a remembered not-found
// (en.NotFound), too. It does nothing, and returns false, when en is older than a write of
// the key known here (en.Version below the Tombstones' floor), when a tag of en was purged
// after en.Born, when the held entry is as new (a newer version, or the same one living at least
// as long as en would; one past its grace or purged does not count), or when en is no
// longer servable (StaleFor ≤ 0). Fills in flight are not revoked: their results are not
// older. Errors: a *KeyError, a *TagError, ErrClosed.
func (r *Replica[V]) Put(key string, en Entry[V]) (bool, error) {
	c := r.Cache
	if err := CheckKey(key); err != nil {
		return false, err
	}
	if en.StaleFor <= 0 {
		return false, nil
	}
	if err := CheckTags(en.Tags); err != nil {
		return false, err
	}
	now := c.clock.NowNano()
	e := newEntry(en.Value, c.tags, en.Tags, en.Born)
	e.fresh, e.version, e.fillMicros = deadline(now, max(en.FreshFor, 0)), en.Version, micros(en.FillTime)
	e.stale = max(deadline(now, en.StaleFor), e.fresh)
	if en.NotFound {
		var zero V
		e.value, e.stale = zero, e.fresh // a not-found is never served stale
		e.flags.Or(flagNotFound)
	}
	if e.purged() {
		return false, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false, ErrClosed
	}
	if en.Version < c.tombs.Floor(key) {
		return false, nil
	}
	// A copy held that is as new — a newer version, or the same one living at least as long
	// (a later fill of an unchanged key lives longer: a refresh's, a refill's) — stays; one
	// that can no longer be served (past its grace, or purged) does not count.
	if old, ok := c.store.GetIfPresent(key); ok && now < old.stale && !old.purged() &&
		(old.version > en.Version || old.version == en.Version && old.fresh >= e.fresh) {
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
func (r *Replica[V]) Invalidate(key string, version uint64) bool {
	c := r.Cache
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

// Latest returns the largest version of key known here: of a remembered write of it, or of
// the entry held (fresh, stale, or a cached ErrNotFound: the version of the latest write it
// reflects); 0 when there is neither.
func (r *Replica[V]) Latest(key string) uint64 {
	c := r.Cache
	c.mu.Lock()
	defer c.mu.Unlock()
	v := c.tombs.Version(key)
	if e, ok := c.store.GetIfPresent(key); ok {
		v = max(v, e.version)
	}
	return v
}

// Peek returns the stored entry of key if it can still be served (fresh or within grace),
// without filling, counting or refreshing.
func (c *Cache[V]) Peek(key string) (Entry[V], bool) {
	e, ok := c.store.GetIfPresent(key)
	if !ok || e.notFound() || e.purged() {
		return Entry[V]{}, false
	}
	now := c.clock.NowNano()
	if now >= e.stale {
		return Entry[V]{}, false
	}
	return e.export(now), true
}

// PeekAny is Peek that also returns a remembered not-found within its TTL (with NotFound
// set): what another node may take over from this one.
func (r *Replica[V]) PeekAny(key string) (Entry[V], bool) {
	c := r.Cache
	e, ok := c.store.GetIfPresent(key)
	if !ok || e.purged() {
		return Entry[V]{}, false
	}
	now := c.clock.NowNano()
	if now >= e.stale {
		return Entry[V]{}, false
	}
	return e.export(now), true
}

// Filling reports whether a fill (or refresh) of key runs now whose loader loads the value
// itself (it called Loading).
func (r *Replica[V]) Filling(key string) bool {
	c := r.Cache
	c.mu.Lock()
	defer c.mu.Unlock()
	cl, ok := c.calls[key]
	return ok && cl.loading.Load()
}

// Running reports whether a fill of key runs now: one that loads the value, or one whose
// loader still looks for a copy elsewhere (corral's warm pull).
func (r *Replica[V]) Running(key string) bool {
	c := r.Cache
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.calls[key]
	return ok
}

// NoteAsked answers the member called name, which asked for key and found nothing here: it
// reports whether a fill of key runs that loads the value (Filling), which the member may
// wait for. A fill that has not begun to load notes the member instead, in the same look:
// its LoadingUnlessAsked then names the member (the greatest name of those that asked), so
// that it takes the member's value rather than load too.
func (r *Replica[V]) NoteAsked(key, name string) (loads bool) {
	c := r.Cache
	c.mu.Lock()
	defer c.mu.Unlock()
	cl, ok := c.calls[key]
	switch {
	case !ok:
		return false
	case cl.loading.Load():
		return true
	}
	if name > cl.asked {
		cl.asked = name
	}
	return false
}

// AwaitAny is AwaitFill that also waits for a fill whose loader has not begun to load: one
// that may be waiting for a copy from elsewhere. It is for a caller that fill cannot be
// waiting for — corral lets a member wait so only on a member whose name is greater than
// its own, so that such waits never form a cycle.
func (r *Replica[V]) AwaitAny(ctx context.Context, key string) (Entry[V], bool) {
	c := r.Cache
	c.mu.Lock()
	cl, ok := c.calls[key]
	c.mu.Unlock()
	if ok {
		select {
		case <-cl.done:
		case <-ctx.Done():
			return Entry[V]{}, false
		}
	}
	return r.PeekAny(key)
}

// AwaitFill waits, until ctx ends, for the fill of key that runs now, if its loader loads
// the value itself (it called Loading), and then returns what the cache holds of key, as
// PeekAny does. It never starts a fill, and never waits for a fill that may itself be
// waiting for a copy from elsewhere — perhaps from the caller.
func (r *Replica[V]) AwaitFill(ctx context.Context, key string) (Entry[V], bool) {
	c := r.Cache
	c.mu.Lock()
	cl, ok := c.calls[key]
	c.mu.Unlock()
	if ok && cl.loading.Load() {
		select {
		case <-cl.done:
		case <-ctx.Done():
			return Entry[V]{}, false
		}
	}
	return r.PeekAny(key)
}

// All yields every stored entry that can still be served — fresh, stale within grace, or a
// remembered not-found within its TTL (with NotFound set) — in no particular order. Entries
// written while it runs may or may not be seen.
func (c *Cache[V]) All() iter.Seq2[string, Entry[V]] {
	return func(yield func(string, Entry[V]) bool) {
		now := c.clock.NowNano()
		for k, e := range c.store.All() {
			if now >= e.stale || e.purged() {
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
