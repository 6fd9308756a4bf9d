package route

import (
	"testing"
	"time"
)

func TestBreakerWindowsDoubleAndReset(t *testing.T) {
	var b Breakers
	t0 := time.Unix(1000, 0)
	if b.Skip("a", t0) {
		t.Fatal("a closed breaker skips")
	}
	if !b.Trip("a", t0) {
		t.Fatal("the first trip does not say it opened")
	}
	if !b.Skip("a", t0.Add(breakerMin-time.Millisecond)) || b.Skip("a", t0.Add(breakerMin)) {
		t.Fatal("the first window is not breakerMin")
	}
	if b.Trip("a", t0.Add(time.Millisecond)) {
		t.Fatal("a trip of an open breaker says it opened")
	}
	t1 := t0.Add(10 * breakerMax)
	for range 10 { // it stays unreachable: the window doubles, up to breakerMax
		b.Trip("a", t1)
	}
	if !b.Skip("a", t1.Add(breakerMax-time.Millisecond)) || b.Skip("a", t1.Add(breakerMax)) {
		t.Fatal("the window does not stop at breakerMax")
	}
	b.Reset("a")
	if b.Skip("a", t1) || b.tripped.Load() != 0 {
		t.Fatal("an answer did not close the breaker")
	}
	b.Reset("b") // resetting an unknown address does nothing
	if b.tripped.Load() != 0 {
		t.Fatal("tripped count went wrong")
	}
}

// While a breaker is open and requests pass its peer by, the peer is probed at most once per
// breakerProbe; a probe that finds it answering closes the breaker at once, whatever is left
// of the window.
func TestBreakerProbesWhileOpen(t *testing.T) {
	var b Breakers
	var probed []string
	b.probe = func(addr string) { probed = append(probed, addr) }
	t0 := time.Unix(1000, 0)
	t1 := t0.Add(10 * breakerMax)
	for range 10 {
		b.Trip("a", t1) // a 15 s cut: the window is breakerMax
	}
	if !b.Skip("a", t1) || len(probed) != 0 {
		t.Fatalf("a probe started %d times at once after the trip, want 0", len(probed))
	}
	for i := range 20 { // requests every 100 ms for 2 s
		if !b.Skip("a", t1.Add(breakerProbe+time.Duration(i)*100*time.Millisecond)) {
			t.Fatal("the breaker closed without an answer")
		}
	}
	if len(probed) != 4 { // at breakerProbe, then every breakerProbe: 0.5, 1.0, 1.5, 2.0 s
		t.Fatalf("%d probes over 2 s of requests, want 4 (one per %v)", len(probed), breakerProbe)
	}
	b.Reset("a") // the probe's answer
	if b.Skip("a", t1.Add(3*time.Second)) {
		t.Fatal("the breaker stayed open after its peer answered a probe")
	}
}
