package corral

import (
	"testing"
	"time"
)

func TestBreakerWindowsDoubleAndReset(t *testing.T) {
	var b breakers
	t0 := time.Unix(1000, 0)
	if b.skip("a", t0) {
		t.Fatal("a closed breaker skips")
	}
	if !b.trip("a", t0) {
		t.Fatal("the first trip does not say it opened")
	}
	if !b.skip("a", t0.Add(breakerMin-time.Millisecond)) || b.skip("a", t0.Add(breakerMin)) {
		t.Fatal("the first window is not breakerMin")
	}
	if b.trip("a", t0.Add(time.Millisecond)) {
		t.Fatal("a trip of an open breaker says it opened")
	}
	t1 := t0.Add(10 * breakerMax)
	for range 10 { // it stays unreachable: the window doubles, up to breakerMax
		b.trip("a", t1)
	}
	if !b.skip("a", t1.Add(breakerMax-time.Millisecond)) || b.skip("a", t1.Add(breakerMax)) {
		t.Fatal("the window does not stop at breakerMax")
	}
	b.reset("a")
	if b.skip("a", t1) || b.tripped.Load() != 0 {
		t.Fatal("an answer did not close the breaker")
	}
	b.reset("b") // resetting an unknown address does nothing
	if b.tripped.Load() != 0 {
		t.Fatal("tripped count went wrong")
	}
}
