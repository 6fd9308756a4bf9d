package fill

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"testing"
	"time"
)

func TestWriteDuringFillRevokesTheFill(t *testing.T) {
	tests := []struct {
		name  string
		write func(c *Replica[string]) error
		want  string // held after the fill ends; "" = nothing
	}{
		{"Remove", func(c *Replica[string]) error { _, err := c.Remove("k"); return err }, ""},
		{"Set", func(c *Replica[string]) error { _, err := c.Set("k", "written"); return err }, "written"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := &counting{release: make(chan struct{})}
			c, _ := newTest(t, l.load, Config[string]{TTL: time.Minute})
			got := make(chan string, 1)
			go func() { v, _ := c.Get(context.Background(), "k"); got <- v }()
			eventually(t, "fill running", func() bool { return l.runs.Load() == 1 })
			if err := tt.write(c); err != nil {
				t.Fatal(err)
			}
			close(l.release)
			if v := <-got; v != "v:k" { // the fill's waiters still get its value
				t.Fatalf("waiter got %q", v)
			}
			e, ok := c.Peek("k")
			if tt.want == "" && ok {
				t.Fatalf("revoked fill stored %q", e.Value)
			}
			if tt.want != "" && (!ok || e.Value != tt.want) {
				t.Fatalf("held %q, want %q", e.Value, tt.want)
			}
		})
	}
}

func TestGetAfterRemoveStartsANewFill(t *testing.T) {
	l := &counting{release: make(chan struct{})}
	c, _ := newTest(t, l.load, Config[string]{TTL: time.Minute})
	go c.Get(context.Background(), "k")
	eventually(t, "first fill", func() bool { return l.runs.Load() == 1 })
	c.Remove("k")
	done := make(chan struct{})
	go func() { c.Get(context.Background(), "k"); close(done) }()
	eventually(t, "second fill", func() bool { return l.runs.Load() == 2 })
	close(l.release)
	<-done
}

func TestPutKeepsTheNewerVersion(t *testing.T) {
	c, clk := newTest[string](t, nil, Config[string]{})
	ok, _ := c.Put("k", Entry[string]{Value: "v5", FreshFor: time.Second, StaleFor: time.Second, Version: 5})
	if !ok {
		t.Fatal("Put into an empty cache refused")
	}
	if ok, _ := c.Put("k", Entry[string]{Value: "v3", FreshFor: time.Minute, StaleFor: time.Minute, Version: 3}); ok {
		t.Fatal("an older version replaced a newer one")
	}
	if ok, _ := c.Put("k", Entry[string]{Value: "v9", FreshFor: time.Second, StaleFor: 2 * time.Second, Version: 9}); !ok {
		t.Fatal("a newer version was refused")
	}
	e, _ := c.Peek("k")
	if e.Value != "v9" || e.FreshFor != time.Second || e.StaleFor != 2*time.Second {
		t.Fatalf("held %+v", e)
	}
	// Remaining durations, not instants: after 1.5 s the entry is stale with 0.5 s left.
	clk.Advance(1500 * time.Millisecond)
	if e, ok := c.Peek("k"); !ok || e.FreshFor > 0 || e.StaleFor != 500*time.Millisecond {
		t.Fatalf("after 1.5 s: %+v %v", e, ok)
	}
	if ok, _ := c.Put("k", Entry[string]{Value: "dead", StaleFor: 0, Version: 99}); ok {
		t.Fatal("an entry with nothing left was stored")
	}
	if c.Invalidate("k", 9) || !c.Invalidate("k", 10) {
		t.Fatal("Invalidate compared versions wrongly")
	}
}

// A write remembered here — by Remove, Set, or an Invalidate of a write made elsewhere —
// refuses every copy older than it that arrives later, through Put or through a fill whose
// loader copied the value (a Copy); copies at or above it are stored.
func TestWritesRefuseOlderCopies(t *testing.T) {
	tests := []struct {
		name  string
		write func(c *Replica[string]) uint64
	}{
		{"Remove", func(c *Replica[string]) uint64 { v, _ := c.Remove("k"); return v }},
		{"Set", func(c *Replica[string]) uint64 { v, _ := c.Set("k", "set"); c.Invalidate("k", v+1); return v + 1 }},
		{"Invalidate", func(c *Replica[string]) uint64 { c.Invalidate("k", 40); return 40 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			copyVersion := uint64(0)
			c, _ := newReplicaTest(t, func(ctx context.Context, key string) (string, *Copy, error) {
				return "copy", &Copy{FreshFor: Never, StaleFor: Never, Version: copyVersion}, nil
			}, Config[string]{}, ReplicaConfig{})
			w := tt.write(c)
			if ok, _ := c.Put("k", Entry[string]{Value: "old", FreshFor: time.Minute, StaleFor: time.Minute, Version: w - 1}); ok {
				t.Fatal("Put stored a copy older than the write")
			}
			copyVersion = w - 1
			if v, err := c.Get(context.Background(), "k"); err != nil || v != "copy" {
				t.Fatalf("Get = %q, %v", v, err)
			}
			if _, ok := c.Peek("k"); ok {
				t.Fatal("a fill stored a copy older than the write")
			}
			copyVersion = w
			c.Get(context.Background(), "k")
			if e, ok := c.Peek("k"); !ok || e.Version != w {
				t.Fatalf("a copy as new as the write was not stored: %+v %v", e, ok)
			}
		})
	}
}

// A fill's result carries the latest write known when it started, so copies of it are
// compared with later writes correctly.
func TestFillVersionIsTheLatestKnownWrite(t *testing.T) {
	c, _ := newTest(t, func(ctx context.Context, key string) (string, error) { return "v", nil }, Config[string]{})
	ctx := context.Background()
	c.Get(ctx, "fresh")
	if e, _ := c.Peek("fresh"); e.Version != 0 {
		t.Fatalf("a key never written: version %d", e.Version)
	}
	c.Invalidate("w", 7)
	c.Get(ctx, "w")
	if e, _ := c.Peek("w"); e.Version != 7 {
		t.Fatalf("after a write at 7: version %d", e.Version)
	}
}

// An Invalidate that lands while a fill runs revokes it when the fill started before the
// write was known, and the next Get fills again.
func TestInvalidateRevokesOlderFills(t *testing.T) {
	release := make(chan struct{})
	var loads atomic.Int32
	c, _ := newTest(t, func(ctx context.Context, key string) (string, error) {
		n := loads.Add(1)
		if n == 1 {
			<-release
		}
		return fmt.Sprint("v", n), nil
	}, Config[string]{})
	done := make(chan string)
	go func() { v, _ := c.Get(context.Background(), "k"); done <- v }()
	eventually(t, "the fill to start", func() bool { return loads.Load() == 1 })
	c.Invalidate("k", 3)
	close(release)
	if v := <-done; v != "v1" {
		t.Fatalf("the waiter got %q", v) // it asked before the write
	}
	if _, ok := c.Peek("k"); ok {
		t.Fatal("the revoked fill stored its result")
	}
	if v, _ := c.Get(context.Background(), "k"); v != "v2" {
		t.Fatalf("after the write: %q", v)
	}
}

func TestAllYieldsServableEntries(t *testing.T) {
	c, clk := newTest[string](t, nil, Config[string]{TTL: time.Second})
	c.Set("a", "1")
	clk.Advance(2 * time.Second)
	c.Set("b", "2")
	var keys []string
	for k := range c.All() {
		keys = append(keys, k)
	}
	if len(keys) != 1 || keys[0] != "b" {
		t.Fatalf("All = %v", keys)
	}
}

// A write that arrives late — after a newer write of the key — is applied at its own version
// and does not pass the newer one; duplicates of one write are harmless.
func TestSetAtAndRemoveAtKeepTheNewerWrite(t *testing.T) {
	c, _ := newTest[string](t, nil, Config[string]{})
	if ok, _ := c.SetAt("k", "v20", 20); !ok {
		t.Fatal("a first write refused")
	}
	if ok, _ := c.SetAt("k", "v10", 10); ok {
		t.Fatal("a late write passed a newer one")
	}
	if e, _ := c.Peek("k"); e.Value != "v20" || e.Version != 20 {
		t.Fatalf("held %+v", e)
	}
	c.RemoveAt("k", 15) // a late removal
	if e, ok := c.Peek("k"); !ok || e.Value != "v20" {
		t.Fatalf("a late removal dropped a newer write: %+v %v", e, ok)
	}
	c.RemoveAt("k", 30)
	if _, ok := c.Peek("k"); ok {
		t.Fatal("a newer removal left the value")
	}
	if ok, _ := c.SetAt("k", "v25", 25); ok {
		t.Fatal("a write older than a remembered removal was stored")
	}
	if ok, _ := c.SetAt("k", "v30", 30); !ok { // the same version again: a duplicate or a tie
		t.Fatal("a write at the remembered version refused")
	}
}

// SetFor stores with the caller's lifetime, and stores nothing once a write newer than the
// one the caller knew of has landed.
func TestSetForLifetimeAndRevocation(t *testing.T) {
	clk := &FakeClock{}
	c, _ := newTest(t, nil, Config[string]{TTL: time.Hour, Grace: time.Hour, Clock: clk})
	if ok, err := c.SetFor("k", "a", time.Second, 2*time.Second, math.MaxUint64, 10); !ok || err != nil {
		t.Fatalf("SetFor = %v, %v", ok, err)
	}
	if e, ok := c.Peek("k"); !ok || e.FreshFor != time.Second || e.StaleFor != 3*time.Second || e.Version != 10 {
		t.Fatalf("Peek = %+v, %v", e, ok)
	}
	clk.Advance(2 * time.Second)
	if e, ok := c.Peek("k"); !ok || e.FreshFor > 0 {
		t.Fatalf("past its TTL, within its SWR: Peek = %+v, %v", e, ok)
	}
	known := c.Tombstones().Version("k")
	c.RemoveAt("k", 20)
	if ok, err := c.SetFor("k", "b", time.Second, 0, known, 30); ok || err != nil {
		t.Fatalf("SetFor after a newer Remove = %v, %v; want false", ok, err)
	}
	if _, ok := c.Peek("k"); ok {
		t.Fatal("a refused SetFor stored")
	}
	if v := c.Tombstones().Version("k"); v != 20 {
		t.Fatalf("a refused SetFor changed the remembered writes: %d", v)
	}
	if ok, err := c.SetFor("k", "c", Never, 0, 20, 30); !ok || err != nil {
		t.Fatalf("SetFor knowing the Remove = %v, %v", ok, err)
	}
	if e, ok := c.Peek("k"); !ok || e.FreshFor != Never {
		t.Fatalf("Never: Peek = %+v, %v", e, ok)
	}
	if _, err := c.SetFor("k", "d", -1, 0, math.MaxUint64, 40); err == nil {
		t.Fatal("negative lifetime accepted")
	}
}

// What a node may take over from another — Put, PeekAny and All — includes stale values
// within grace and remembered not-founds, with their remaining time.
func TestTakeOverStaleAndNotFound(t *testing.T) {
	c, clk := newTest[string](t, nil, Config[string]{TTL: time.Second})
	if ok, err := c.Put("stale", Entry[string]{Value: "old", FreshFor: -time.Second, StaleFor: time.Minute, Version: 5}); !ok || err != nil {
		t.Fatalf("Put(stale) = %v, %v", ok, err)
	}
	if ok, err := c.Put("gone", Entry[string]{NotFound: true, FreshFor: time.Minute, StaleFor: time.Minute, Version: 6}); !ok || err != nil {
		t.Fatalf("Put(not found) = %v, %v", ok, err)
	}
	if e, ok := c.Peek("stale"); !ok || e.Value != "old" || e.FreshFor > 0 {
		t.Fatalf("Peek(stale) = %+v, %v", e, ok)
	}
	if _, ok := c.Peek("gone"); ok {
		t.Fatal("Peek returned a not-found")
	}
	if e, ok := c.PeekAny("gone"); !ok || !e.NotFound || e.FreshFor != time.Minute || e.Version != 6 {
		t.Fatalf("PeekAny(gone) = %+v, %v", e, ok)
	}
	if _, err := c.Get(context.Background(), "gone"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get(gone) = %v, want ErrNotFound", err)
	}
	seen := map[string]bool{}
	for k, e := range c.All() {
		seen[k] = e.NotFound
	}
	if len(seen) != 2 || !seen["gone"] || seen["stale"] {
		t.Fatalf("All = %v", seen)
	}
	clk.Advance(2 * time.Minute)
	if _, ok := c.PeekAny("gone"); ok {
		t.Fatal("PeekAny returned a not-found past its time")
	}
}

// A loader that takes over a stale copy from elsewhere (a Copy, with a lifetime that is
// already past its freshness) has it served stale, and the copy's one refresh starts at once:
// it loads from the source (IsRefresh), and replaces the copy.
func TestStaleCopyIsRefreshedOnce(t *testing.T) {
	var refreshes atomic.Int32
	var c *Replica[string]
	c, clk := newReplicaTest(t, func(ctx context.Context, key string) (string, *Copy, error) {
		if IsRefresh(ctx) {
			refreshes.Add(1)
			return "new", nil, nil
		}
		return "copied", &Copy{FreshFor: 0, StaleFor: time.Minute, Version: 3}, nil
	}, Config[string]{TTL: time.Hour}, ReplicaConfig{})
	v, src, err := c.GetEntry(context.Background(), "k")
	if err != nil || v.Value != "copied" || src != SourceStale {
		t.Fatalf("GetEntry = %+v (%v), %v; want the stale copy", v, src, err)
	}
	eventually(t, "the refresh", func() bool { e, ok := c.Peek("k"); return ok && e.Value == "new" })
	clk.Advance(time.Second)
	if got := refreshes.Load(); got != 1 {
		t.Fatalf("%d refreshes, want 1", got)
	}
}

// AwaitFill waits only for a fill whose loader loads the value itself (Loading): one still
// looking for a copy elsewhere may be waiting for the caller, and waiting for it could
// deadlock the two until their fill timeouts.
func TestAwaitFillWaitsOnlyForLoading(t *testing.T) {
	looking, loading := make(chan struct{}), make(chan struct{})
	release := make(chan struct{})
	c, _ := newTest(t, func(ctx context.Context, key string) (string, error) {
		close(looking)
		<-release // looking for a copy elsewhere
		Loading(ctx)
		close(loading)
		<-release
		return "v", nil
	}, Config[string]{TTL: time.Hour, FillTimeout: 10 * time.Second})
	go c.Get(context.Background(), "k")
	<-looking
	if c.Filling("k") {
		t.Fatal("Filling while the loader still looks for a copy")
	}
	short, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, ok := c.AwaitFill(context.Background(), "k"); ok || time.Since(start) > time.Second {
		t.Fatalf("AwaitFill of a fill still looking elsewhere = %v after %v; want false at once", ok, time.Since(start))
	}
	release <- struct{}{}
	<-loading
	if !c.Filling("k") {
		t.Fatal("not Filling once the loader loads")
	}
	if _, ok := c.AwaitFill(short, "k"); ok {
		t.Fatal("AwaitFill returned before the fill ended, within a ctx that ended")
	}
	go func() { release <- struct{}{} }()
	if e, ok := c.AwaitFill(context.Background(), "k"); !ok || e.Value != "v" {
		t.Fatalf("AwaitFill = %+v, %v; want the fill's value", e, ok)
	}
}

// Two fills of one key on two members that look for a copy on each other at once: the one
// NoteAsked names (the other member asked while this fill had not begun to load) is told by
// LoadingUnlessAsked to wait rather than load, and does not count as loading meanwhile; a
// member that asks once the fill loads is told it loads, and not noted. Running says a fill
// runs, loading or not; AwaitAny waits for one that has not begun to load all the same.
func TestLoadingUnlessAsked(t *testing.T) {
	looking, asked, loaded := make(chan struct{}), make(chan string, 1), make(chan struct{})
	release := make(chan struct{})
	c, _ := newTest(t, func(ctx context.Context, key string) (string, error) {
		close(looking)
		<-release // looking for a copy elsewhere
		asked <- LoadingUnlessAsked(ctx)
		<-release // waiting for the member it names, which has nothing
		Loading(ctx)
		close(loaded)
		<-release // loading
		return "v", nil
	}, Config[string]{TTL: time.Hour, FillTimeout: 10 * time.Second})
	if c.Running("k") || c.NoteAsked("k", "n9") {
		t.Fatal("Running, or told a fill loads, with no fill running")
	}
	go c.Get(context.Background(), "k")
	<-looking
	if !c.Running("k") || c.Filling("k") {
		t.Fatal("a fill looking for a copy is not Running, or is Filling")
	}
	if c.NoteAsked("k", "n2") || c.NoteAsked("k", "n7") || c.NoteAsked("k", "n5") {
		t.Fatal("NoteAsked of a fill looking for a copy says it loads")
	}
	release <- struct{}{}
	if got := <-asked; got != "n7" {
		t.Fatalf("LoadingUnlessAsked = %q, want the greatest name that asked while the fill ran, n7", got)
	}
	if c.Filling("k") {
		t.Fatal("Filling while the loader waits for the member that asked")
	}
	short, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	if _, ok := c.AwaitAny(short, "k"); ok {
		t.Fatal("AwaitAny returned before the fill ended, within a ctx that ended")
	}
	release <- struct{}{}
	<-loaded
	if !c.NoteAsked("k", "n8") {
		t.Fatal("NoteAsked of a fill that loads does not say it loads")
	}
	go func() { release <- struct{}{} }()
	if e, ok := c.AwaitAny(context.Background(), "k"); !ok || e.Value != "v" {
		t.Fatalf("AwaitAny = %+v, %v; want the fill's value", e, ok)
	}
}
