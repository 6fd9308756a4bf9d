package fill

import (
	"context"
	"time"
)

// Fills run on worker goroutines that outlive them, not on a new goroutine each. A new
// goroutine starts on a small stack, and a fill's call path — a peer request through gRPC
// and protobuf — is deep enough to grow it, copying it each time: 14 % of a caller's CPU at
// 16 concurrent remote Gets, in a CPU profile of `make bench-compare`. A worker's stack has
// grown once. A fill is handed to a worker that is waiting for one, or starts a new worker
// when none is; up to maxIdleWorkers wait at a time, each for at most workerIdle, so a
// quiet cache keeps no goroutine but its sweeper.

const (
	maxIdleWorkers = 16
	workerIdle     = 10 * time.Second
)

// fillTask is one fill for a worker: run's arguments.
type fillTask[V any] struct {
	ctx  context.Context
	key  string
	cl   *call[V]
	slot *Limiter
	b    *batch[V] // a batch's fill (runBatch) instead of key's
	fn   func()    // a fill's own work handed off (Go) instead of a fill
}

// do runs t's fill.
func (c *Cache[V]) do(t fillTask[V]) {
	switch {
	case t.fn != nil:
		defer c.wg.Done()
		t.fn()
	case t.b != nil:
		c.runBatch(t.ctx, t.b, false)
	default:
		c.run(t.ctx, t.key, t.cl, t.slot, false)
	}
}

// Go runs f on one of the cache's workers, for a loader that does part of its work at once on
// another goroutine — a batch's request to one of its owners, while it asks another — as deep
// as a fill goes, which a new goroutine would grow its stack for. Close waits for f as for a
// fill; once the cache is closed, f runs on the caller's goroutine.
func (r *Replica[V]) Go(f func()) {
	c := r.Cache
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		f()
		return
	}
	c.wg.Add(1) // under mu: Close has not begun to wait
	c.mu.Unlock()
	c.goRun(fillTask[V]{fn: f})
}

// goRun runs t's fill on a worker. The caller has counted the fill in c.wg.
func (c *Cache[V]) goRun(t fillTask[V]) {
	select {
	case c.tasks <- t:
		return
	default:
	}
	c.wg.Add(1) // the worker; the fill's own count keeps wg above zero meanwhile
	c.workers.Add(1)
	go c.work(t)
}

// work runs t, then every fill handed to it, until it has waited workerIdle for one, more
// than maxIdleWorkers wait, or the cache closes.
func (c *Cache[V]) work(t fillTask[V]) {
	defer c.wg.Done()
	defer c.workers.Add(-1)
	idle := time.NewTimer(workerIdle)
	defer idle.Stop()
	for {
		c.do(t)
		t = fillTask[V]{} // holds nothing while it waits
		if c.idleWorkers.Add(1) > maxIdleWorkers {
			c.idleWorkers.Add(-1)
			return
		}
		idle.Reset(workerIdle)
		handed := false
		select {
		case t = <-c.tasks:
			handed = true
		case <-idle.C:
		case <-c.quit:
		}
		c.idleWorkers.Add(-1)
		if !handed {
			return
		}
	}
}
