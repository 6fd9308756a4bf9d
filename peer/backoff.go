package peer

import (
	"math/rand/v2"
	"time"
)

// backoff computes the waits between join attempts while no seed has been reached: it doubles
// from min up to max, and each wait is drawn uniformly from [d/2, d] so that pods started
// together (a Deployment rollout) do not retry in lockstep against the same seeds.
//
// A backoff is used by one goroutine.
type backoff struct {
	min, max time.Duration
	// cur is the ceiling of the next wait; zero before the first call to next.
	cur  time.Duration
	rand *rand.Rand
}

func newBackoff(min, max time.Duration, r *rand.Rand) *backoff {
	return &backoff{min: min, max: max, rand: r}
}

// next returns the next wait.
func (b *backoff) next() time.Duration {
	switch {
	case b.cur == 0:
		b.cur = b.min
	case b.cur < b.max/2:
		b.cur *= 2
	default:
		b.cur = b.max
	}
	half := b.cur / 2
	return half + time.Duration(b.rand.Int64N(int64(b.cur-half)+1))
}
