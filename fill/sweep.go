package fill

import "time"

// Sweep drops every entry that can no longer be served — past its grace, or a remembered
// not-found past NegativeTTL — and returns how many it dropped. Reads never serve such an
// entry; it only holds memory until a sweep, a write of its key or eviction drops it. A
// Cache sweeps itself every Config.SweepInterval; Sweep is for a caller that wants it now.
func (c *Cache[V]) Sweep() int {
	now := c.clock.NowNano()
	var dead []string
	for k, e := range c.store.All() {
		if now >= e.stale {
			dead = append(dead, k)
		}
	}
	dropped := 0
	for _, k := range dead {
		c.mu.Lock()
		// Checked again under mu: a write or a fill may have replaced it since.
		if e, ok := c.store.GetIfPresent(k); ok && c.clock.NowNano() >= e.stale {
			c.store.Invalidate(k)
			dropped++
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
