package owner

import (
	"testing"
	"testing/synctest"
	"time"
)

// Shut waits for the writes let in, and lets none in after.
func TestWriteGate(t *testing.T) {
	var g WriteGate
	if !g.Enter() {
		t.Fatal("an open gate refused a write")
	}
	shut := make(chan struct{})
	go func() { g.Shut(); close(shut) }()
	// (A Shut that did not wait would be caught on all but a machine too busy to run it in
	// 20 ms; one that waits passes however busy the machine.)
	select {
	case <-shut:
		t.Fatal("Shut returned while a write was being applied")
	case <-time.After(20 * time.Millisecond):
	}
	g.Exit()
	<-shut
	if g.Enter() {
		t.Fatal("a shut gate let a write in")
	}
}

// A write being applied may wait on the clock (a backup's reply or its deadline), and Shut
// waits for it without holding the clock up: in a bubble, Shut and the write both block on
// things the clock can end, so virtual time runs on and the write ends. (A gate whose Shut
// blocked on a lock would hang this test: the bubble's clock never moves.) A write offered
// while Shut waits is refused at once.
func TestWriteGateShutWaitsOnTheClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var g WriteGate
		if !g.Enter() {
			t.Fatal("an open gate refused a write")
		}
		start := time.Now()
		go func() {
			time.Sleep(time.Second) // the write waits on the network
			g.Exit()
		}()
		shut := make(chan time.Time)
		go func() { g.Shut(); shut <- time.Now() }()
		synctest.Wait()
		if g.Enter() {
			t.Fatal("a write entered while Shut waited")
		}
		if took := (<-shut).Sub(start); took != time.Second {
			t.Fatalf("Shut returned after %v, want when the write ended (1s)", took)
		}
		g.Shut() // a second Shut returns at once
	})
}
