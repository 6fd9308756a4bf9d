package fill

import (
	"fmt"
	"testing"
	"time"
)

func TestTombstonesRememberTheLargestVersionForTTL(t *testing.T) {
	clk := &FakeClock{}
	ts := NewTombstones(TombstoneConfig{TTL: time.Minute, Clock: clk})
	ts.Record("k", 5)
	ts.Record("k", 3) // an older write arriving late does not lower it
	if v := ts.Version("k"); v != 5 {
		t.Fatalf("Version = %d, want 5", v)
	}
	clk.Advance(30 * time.Second)
	ts.Record("k", 6) // a later write extends the memory
	clk.Advance(45 * time.Second)
	if v := ts.Version("k"); v != 6 {
		t.Fatalf("75 s after the first write, 45 s after the last: Version = %d, want 6", v)
	}
	clk.Advance(16 * time.Second)
	if v := ts.Version("k"); v != 0 {
		t.Fatalf("past TTL: Version = %d, want 0", v)
	}
	ts.Record("other", 1) // expiry happens on Record
	if n := ts.Len(); n != 1 {
		t.Fatalf("Len = %d, want 1", n)
	}
	if f := ts.Floor("k"); f != 0 {
		t.Fatalf("an expired write left a floor of %d", f)
	}
}

// Past MaxBytes the oldest writes are forgotten, but a copy older than one of them is
// still refused: its version stays in the floor of its bucket.
func TestTombstonesFoldEvictedWritesIntoFloors(t *testing.T) {
	clk := &FakeClock{}
	ts := NewTombstones(TombstoneConfig{TTL: time.Hour, MaxBytes: 20 * (tombOverhead + queuedOverhead + 4), Clock: clk})
	for i := range 100 {
		ts.Record(fmt.Sprintf("k%03d", i), uint64(100+i))
	}
	if n := ts.Len(); n > 20 {
		t.Fatalf("Len = %d past MaxBytes", n)
	}
	if v := ts.Version("k000"); v != 0 {
		t.Fatalf("the oldest write is still held: %d", v)
	}
	if f := ts.Floor("k000"); f < 100 {
		t.Fatalf("Floor of a forgotten write = %d, want ≥ 100", f)
	}
	if f := ts.Floor("k099"); f != 199 {
		t.Fatalf("Floor of a held write = %d, want 199", f)
	}
}

// The same write recorded again at once (by each cache of a group: the store that applied
// it, then the ones its writer tells) costs no more bytes; recorded again later (a member
// that learned of it late), it is remembered for TTL from then.
func TestTombstonesRecordAWriteOnce(t *testing.T) {
	clk := &FakeClock{}
	ts := NewTombstones(TombstoneConfig{TTL: time.Minute, Clock: clk})
	ts.Record("k", 5)
	before := ts.bytes
	clk.Advance(time.Millisecond)
	ts.Record("k", 5)
	ts.Record("k", 5)
	if ts.bytes != before || len(ts.queue)-ts.head != 1 {
		t.Fatalf("the same write recorded three times at once holds %d bytes (once: %d) and %d queue records", ts.bytes, before, len(ts.queue)-ts.head)
	}
	clk.Advance(30 * time.Second)
	ts.Record("k", 5)
	clk.Advance(59 * time.Second)
	if v := ts.Version("k"); v != 5 {
		t.Fatalf("89 s after the first record, 59 s after the last: Version = %d, want 5", v)
	}
	clk.Advance(2 * time.Second)
	if v := ts.Version("k"); v != 0 {
		t.Fatalf("61 s after the last record: Version = %d, want 0", v)
	}
}

func TestTombstonesIgnoreVersionZero(t *testing.T) {
	ts := NewTombstones(TombstoneConfig{})
	ts.Record("k", 0)
	if ts.Len() != 0 {
		t.Fatal("version 0 recorded")
	}
}

func TestTombstonesAllYieldsTheLiveWrites(t *testing.T) {
	clk := &FakeClock{}
	ts := NewTombstones(TombstoneConfig{TTL: time.Minute, Clock: clk})
	ts.Record("old", 1)
	clk.Advance(45 * time.Second)
	ts.Record("new", 2)
	clk.Advance(30 * time.Second)
	got := map[string]uint64{}
	for k, v := range ts.All() {
		got[k] = v
	}
	if len(got) != 1 || got["new"] != 2 {
		t.Fatalf("All = %v, want only new@2", got)
	}
}
