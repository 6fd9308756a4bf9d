package fill

import (
	"context"
	"sync/atomic"
)

// Limiter bounds how many operations run at once. One Limiter can be shared by several
// caches, which makes the bound per process (per node) rather than per cache.
type Limiter struct {
	slots chan struct{} // buffered: its capacity is the bound, its length the slots in use
	full  atomic.Uint64 // operations that found every slot taken (see Full)
}

// NewLimiter returns a Limiter that admits n operations at once. n < 1 is treated as 1.
func NewLimiter(n int) *Limiter {
	if n < 1 {
		n = 1
	}
	return &Limiter{slots: make(chan struct{}, n)}
}

// TryAcquire takes a slot if one is free and reports whether it did.
func (l *Limiter) TryAcquire() bool {
	select {
	case l.slots <- struct{}{}:
		return true
	default:
		l.full.Add(1)
		return false
	}
}

// Acquire waits for a slot until ctx ends, and then returns ctx.Err().
func (l *Limiter) Acquire(ctx context.Context) error {
	select {
	case l.slots <- struct{}{}:
		return nil
	default:
	}
	l.full.Add(1)
	select {
	case l.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Full counts the operations that found every slot taken: a TryAcquire that failed, or an
// Acquire that had to wait. It only grows (a limit-hit metric).
func (l *Limiter) Full() uint64 { return l.full.Load() }

// Release frees a slot taken by TryAcquire or Acquire.
func (l *Limiter) Release() { <-l.slots }

// InUse returns the slots taken now.
func (l *Limiter) InUse() int { return len(l.slots) }

// Cap returns the bound.
func (l *Limiter) Cap() int { return cap(l.slots) }
