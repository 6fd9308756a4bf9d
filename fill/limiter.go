package fill

import (
	"context"
	"sync"
	"sync/atomic"
)

// Limiter bounds how many operations run at once. One Limiter can be shared by several
// caches, which makes the bound per process (per node) rather than per cache.
type Limiter struct {
	slots chan struct{} // buffered: its capacity is the bound, its length the slots in use
	full  atomic.Uint64 // operations that found every slot taken (see Full)

	mu sync.Mutex
	// guards holders: the fills that hold a slot taken by AcquireFill, by cache name and
	// key, with how many of them (acting owners on several views may run one twice)
	holders map[holderKey]int
}

type holderKey struct{ name, key string }

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

// AcquireFill takes a slot for the fill of name/key whose context is ctx (a loader's: its
// chain holds the fills it is part of), waiting until ctx ends, and returns the function that
// gives it back. A fill nested in a fill that holds a slot of l — its chain names one, on
// this process or back on it through others — takes none and runs on that fill's: waiting
// for a slot that its own parent holds would never end, and would hold every other fill up
// behind it. So the bound counts outermost fills; nested ones run within their budget.
func (l *Limiter) AcquireFill(ctx context.Context, name, key string) (release func(), err error) {
	if chain := chainOf(ctx); chain != nil && l.holdsAny(chain.parent) {
		return noRelease, nil
	}
	if err := l.Acquire(ctx); err != nil {
		return nil, err
	}
	h := holderKey{name, key}
	l.mu.Lock()
	if l.holders == nil {
		l.holders = make(map[holderKey]int)
	}
	l.holders[h]++
	l.mu.Unlock()
	return func() {
		l.mu.Lock()
		if l.holders[h]--; l.holders[h] <= 0 {
			delete(l.holders, h)
		}
		l.mu.Unlock()
		l.Release()
	}, nil
}

func noRelease() {}

// holdsAny reports whether a fill of chain holds a slot of l.
func (l *Limiter) holdsAny(chain *link) bool {
	if chain == nil {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for ; chain != nil; chain = chain.parent {
		if l.holders[holderKey{chain.name, chain.key}] > 0 {
			return true
		}
	}
	return false
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
