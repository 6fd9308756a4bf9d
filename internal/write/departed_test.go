package write

import (
	"fmt"
	"testing"
	"time"
)

// Departures forgets a member that comes back, and stays bounded, dropping the oldest
// departures first.
func TestDepartures(t *testing.T) {
	var d Departures
	t0 := time.Unix(0, 0)
	d.Left("a", t0)
	if !d.has("a") || d.has("b") {
		t.Fatal("a left and b did not, but has says otherwise")
	}
	d.Back("a")
	if d.has("a") {
		t.Fatal("a came back, but is still remembered as gone")
	}
	for i := range maxDepartures + 10 {
		d.Left(fmt.Sprint("m", i), t0.Add(time.Duration(i)*time.Second))
	}
	if n := len(d.m); n != maxDepartures {
		t.Fatalf("remembers %d departures, want at most %d", n, maxDepartures)
	}
	if d.has("m0") || !d.has(fmt.Sprint("m", maxDepartures+9)) {
		t.Fatal("the oldest departures should give way, the newest stay")
	}
}
