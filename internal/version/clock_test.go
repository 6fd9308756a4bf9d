package version

import (
	"sync"
	"testing"
	"time"
)

// Versions order writes by what each node has seen, not by wall clocks: a node whose clock
// is an hour behind still draws a version above every one it has seen, and one an hour ahead
// does not make the others' later writes look older once they have seen its versions.
func TestVersionsIgnoreClockSkew(t *testing.T) {
	base := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	ahead := New("ahead", func() time.Time { return base.Add(time.Hour) })
	behind := New("behind", func() time.Time { return base.Add(-time.Hour) })

	first := ahead.Next()
	behind.Observe(first) // it heard of the write (a header, an invalidation, a state exchange)
	second := behind.Next()
	if second <= first {
		t.Fatalf("a write after one it saw got version %#x ≤ %#x: the slow clock won", second, first)
	}
	ahead.Observe(second)
	if third := ahead.Next(); third <= second {
		t.Fatalf("version %#x ≤ %#x", third, second)
	}
}

// Every version a clock hands out is larger than every one before it, also when many
// goroutines draw at once within one millisecond, and carries the node's id in its low byte.
func TestVersionsIncreaseAndCarryTheID(t *testing.T) {
	frozen := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	c := New("n0", func() time.Time { return frozen })
	const goroutines, each = 8, 1000 // far more than 256 a millisecond: the counter carries
	out := make([][]uint64, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for range each {
				out[g] = append(out[g], c.Next())
			}
		})
	}
	wg.Wait()
	seen := map[uint64]bool{}
	for _, vs := range out {
		for i, v := range vs {
			if i > 0 && v <= vs[i-1] {
				t.Fatalf("versions went from %#x to %#x on one goroutine", vs[i-1], v)
			}
			if seen[v] {
				t.Fatalf("version %#x handed out twice", v)
			}
			seen[v] = true
			if v&0xff != id("n0") {
				t.Fatalf("version %#x does not end in the node's id %#x", v, id("n0"))
			}
		}
	}
}

// Two nodes that draw in the same millisecond, each having seen nothing of the other, get
// different versions when their ids differ, so every member orders the two writes alike.
func TestConcurrentWritersDrawDistinctVersions(t *testing.T) {
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	a, b := New("n0", func() time.Time { return at }), New("n1", func() time.Time { return at })
	if id("n0") == id("n1") {
		t.Skip("the two names hash to one id")
	}
	if va, vb := a.Next(), b.Next(); va == vb {
		t.Fatalf("both drew %#x", va)
	}
}

// A restarted node starts above the versions of its earlier life without having heard of
// them: the wall clock is the floor.
func TestRestartStartsAboveItsPastVersions(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	before := New("n0", func() time.Time { return now })
	var last uint64
	for range 100 {
		last = before.Next()
	}
	now = now.Add(time.Second)
	after := New("n0", func() time.Time { return now })
	if v := after.Next(); v <= last {
		t.Fatalf("after a restart a second later: %#x ≤ %#x", v, last)
	}
}
