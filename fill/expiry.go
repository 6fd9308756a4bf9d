package fill

import (
	"context"
	"math"
	"slices"
	"time"
)

// SetExpiry lets a loader choose how long the value it is about to return stays fresh and
// then stale, overriding the cache's TTL, jitter and grace for this one value (for example
// from an HTTP origin's Cache-Control). It must be called with the ctx the loader was given,
// before the loader returns. It reports false, and does nothing, when ctx is not a loader's
// context or a duration is negative. freshFor 0 means the value is stale at once; Never
// means it never expires.
func SetExpiry(ctx context.Context, freshFor, staleFor time.Duration) bool {
	l := chainOf(ctx)
	if l == nil || l.choice == nil || freshFor < 0 || staleFor < 0 {
		return false
	}
	l.choice.set = true
	l.choice.fresh, l.choice.stale = freshFor, staleFor
	return true
}

// choice is what a loader chose through SetExpiry and Tag, and what its Copy said. It is
// written by the loader's goroutine and read by the fill after the loader returned (the
// loader's return orders the two).
type choice struct {
	set          bool // SetExpiry was called
	fresh, stale time.Duration

	copied  bool // the loader returned a Copy
	version uint64

	bornSet bool // the Copy's tags came with its born version
	born    uint64

	tags []string // Tag's, in order, duplicates dropped

	keyTags map[string][]string // TagKey's, by key, in a batch's fill
}

// Tag adds tags to the value the loader is about to return, for RemoveByTag (see Tags); calls
// add up. It must be called with the ctx the loader was given, before the loader returns;
// it does nothing when ctx is not a loader's. Tags that break a limit (CheckTags) fail the
// fill with a *TagError: the value is not stored, and every caller gets the error.
func Tag(ctx context.Context, tags ...string) {
	l := chainOf(ctx)
	if l == nil || l.choice == nil {
		return
	}
	for _, t := range tags {
		if !slices.Contains(l.choice.tags, t) {
			l.choice.tags = append(l.choice.tags, t)
		}
	}
}

// lifetime returns the fresh-until and stale-until instants for a value filled at now.
func (c *Cache[V]) lifetime(now int64, x *choice) (fresh, stale int64) {
	if x != nil && x.set {
		fresh = deadline(now, x.fresh)
		return fresh, satAdd(fresh, x.stale)
	}
	if c.cfg.TTL == 0 {
		return math.MaxInt64, math.MaxInt64
	}
	ttl := c.cfg.TTL
	if c.cfg.Jitter > 0 {
		// Uniform in [TTL·(1−j), TTL·(1+j)): keys written together expire apart.
		ttl += time.Duration(float64(ttl) * c.cfg.Jitter * (2*c.rand() - 1))
	}
	fresh = deadline(now, ttl)
	return fresh, satAdd(fresh, c.cfg.Grace)
}

func satAdd(at int64, d time.Duration) int64 {
	if at == math.MaxInt64 {
		return at
	}
	return deadline(at, d)
}

// refreshEarly is XFetch (probabilistic early expiration): a fresh hit refreshes early when
// now − δ·β·ln(u) ≥ fresh-until, with δ the measured fill time and u uniform in (0,1]. The
// probability is ~0 long before expiry and rises towards 1 as it nears, sooner for values
// that are slow to fill, so the refresh usually finishes before anyone sees the key expire.
func (c *Cache[V]) refreshEarly(e *entry[V], now int64) bool {
	if e.fresh == math.MaxInt64 || e.fillMicros == 0 {
		return false
	}
	u := 1 - c.rand() // (0,1]: ln(0) would be -Inf
	gap := -float64(e.fillTime()) * c.cfg.RefreshAhead * math.Log(u)
	return float64(now)+gap >= float64(e.fresh)
}
