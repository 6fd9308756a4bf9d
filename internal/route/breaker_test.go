package route

import (
	"testing"
	"time"
)

// A breaker opens at the first trip and stays open, however long, until its peer answers:
// no request is sent to a peer found unreachable to learn whether it still is (the Router's
// probes learn it, off the requests).
func TestBreakerStaysOpenUntilAnswered(t *testing.T) {
	var b Breakers
	opened := 0
	b.opened = func() { opened++ }
	t0 := time.Unix(1000, 0)
	if b.Skip("a", t0) {
		t.Fatal("a closed breaker skips")
	}
	if !b.Trip("a", t0) || opened != 1 {
		t.Fatalf("the first trip does not say it opened (opened called %d times)", opened)
	}
	if b.Trip("a", t0.Add(time.Millisecond)) || opened != 1 {
		t.Fatalf("a trip of an open breaker says it opened (opened called %d times)", opened)
	}
	if !b.Skip("a", t0.Add(time.Hour)) {
		t.Fatal("the breaker closed without an answer")
	}
	if got := b.open(); len(got) != 1 || got[0] != "a" {
		t.Fatalf("open breakers %v, want [a]", got)
	}
	b.Reset("a")
	if b.Skip("a", t0) || b.tripped.Load() != 0 {
		t.Fatal("an answer did not close the breaker")
	}
	b.Reset("b") // resetting an unknown address does nothing
	if b.tripped.Load() != 0 || len(b.open()) != 0 {
		t.Fatal("tripped count went wrong")
	}
}

// Requests that find peers unreachable while the probe of every member runs wait for it,
// rather than ask the members it probes one after the other; one runs it.
func TestOneSweepAtATime(t *testing.T) {
	var b Breakers
	done, run := b.startSweep()
	if !run {
		t.Fatal("the first sweep does not run")
	}
	again, run2 := b.startSweep()
	if run2 || again != done {
		t.Fatal("a second sweep started while one ran")
	}
	b.endSweep()
	select {
	case <-done:
	default:
		t.Fatal("the end of the sweep did not release its waiters")
	}
	if _, run := b.startSweep(); !run {
		t.Fatal("no sweep runs after the last one ended")
	}
	b.endSweep()
}
