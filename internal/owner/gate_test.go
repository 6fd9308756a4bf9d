package owner

import (
	"testing"
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
