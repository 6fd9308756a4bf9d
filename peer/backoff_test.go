package peer

import (
	"math/rand/v2"
	"testing"
	"time"
)

func TestBackoff(t *testing.T) {
	b := newBackoff(100*time.Millisecond, time.Second, rand.New(rand.NewPCG(1, 2)))
	ceilings := []time.Duration{100, 200, 400, 800, 1000, 1000, 1000}
	for i, c := range ceilings {
		c *= time.Millisecond
		d := b.next()
		if d < c/2 || d > c {
			t.Errorf("wait %d = %v, want in [%v, %v]", i, d, c/2, c)
		}
	}

	// Equal bounds: a fixed wait, drawn from [d/2, d] all the same.
	b = newBackoff(time.Second, time.Second, rand.New(rand.NewPCG(1, 2)))
	for range 5 {
		if d := b.next(); d < 500*time.Millisecond || d > time.Second {
			t.Errorf("wait %v out of [500ms, 1s]", d)
		}
	}
}

func TestBackoffIsJittered(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	seen := map[time.Duration]bool{}
	for range 10 {
		seen[newBackoff(time.Second, time.Second, r).next()] = true
	}
	if len(seen) < 5 {
		t.Errorf("10 first waits took only %d values: pods would retry in lockstep", len(seen))
	}
}
