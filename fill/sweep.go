package fill

import "time"

// Sweep drops every entry that can no longer be served — past its grace, a remembered
// not-found past NegativeTTL, or carrying a tag purged after it was made — and returns how
// many it dropped. Reads never serve such an entry; it only holds memory until a sweep, a
// write of its key or eviction drops it. A Cache sweeps itself every Config.SweepInterval;
// Sweep is for a caller that wants it now. It also forgets the tag purges past their TTL.
func (c *Cache[V]) Sweep() int {
	c.tags.Expire()
	now := c.clock.NowNano()
	var dead []string
	for k, e := range c.store.All() {
		if now >= e.stale || e.purged() {
			dead = append(dead, k)
		}
	}
	dropped := 0
	for _, k := range dead {
		c.mu.Lock()
		// Checked again under mu: a write or a fill may have replaced it since.
		if e, ok := c.store.GetIfPresent(k); ok {
			if purged := e.purged(); purged || c.clock.NowNano() >= e.stale {
				c.store.Invalidate(k)
				dropped++
				if purged {
					c.stats.purged.Add(1)
				}
			}
		}
		c.mu.Unlock()
	}
	return dropped
}

// sweepEvery sweeps every interval until Close.
func (c *Cache[V]) sweepEvery(interval time.Duration) {
	defer close(c.sweepDone)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			c.Sweep()
		case <-c.sweepStop:
			return
		}
	}
}
