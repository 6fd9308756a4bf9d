package corral

import (
	"math/rand/v2"
	"sync"
)

// lockedRand shares Config.Rand between the goroutines that draw from it (fills, the view's
// callbacks); a *rand.Rand is not safe for concurrent use.
type lockedRand struct {
	mu sync.Mutex
	// guards r
	r *rand.Rand
}

// newLockedRand returns r made safe for concurrent use, or nil for a nil r.
func newLockedRand(r *rand.Rand) *lockedRand {
	if r == nil {
		return nil
	}
	return &lockedRand{r: r}
}

// Float64 returns a number uniform in [0, 1).
func (l *lockedRand) Float64() float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.r.Float64()
}

// child returns a source of its own seeded from l, for a user that draws on one goroutine.
func (l *lockedRand) child() *rand.Rand {
	l.mu.Lock()
	defer l.mu.Unlock()
	return rand.New(rand.NewPCG(l.r.Uint64(), l.r.Uint64()))
}

// float returns l's Float64 for fill.Config.Rand, or nil (fill's default) for a nil l.
func (l *lockedRand) float() func() float64 {
	if l == nil {
		return nil
	}
	return l.Float64
}
