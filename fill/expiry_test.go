package fill

import (
	"context"
	"testing"
	"time"
)

func TestTTL(t *testing.T) {
	l := &counting{}
	c, clk := newTest(t, l.load, Config[string]{TTL: time.Second})
	get := func() {
		t.Helper()
		if _, err := c.Get(context.Background(), "k"); err != nil {
			t.Fatal(err)
		}
	}
	get()
	clk.Advance(999 * time.Millisecond)
	get()
	if l.runs.Load() != 1 {
		t.Fatal("refilled before TTL")
	}
	clk.Advance(time.Millisecond)
	get()
	if l.runs.Load() != 2 {
		t.Fatal("not refilled at TTL")
	}
}

func TestZeroTTLNeverExpires(t *testing.T) {
	l := &counting{}
	c, clk := newTest(t, l.load, Config[string]{})
	c.Get(context.Background(), "k")
	clk.Advance(100 * 365 * 24 * time.Hour)
	e, src, err := c.GetEntry(context.Background(), "k")
	if err != nil || src != SourceHit || e.FreshFor != Never || l.runs.Load() != 1 {
		t.Fatalf("entry %+v %v %v after a century, runs %d", e, src, err, l.runs.Load())
	}
}

func TestJitterStaysWithinBounds(t *testing.T) {
	tests := []struct {
		name string
		u    float64
		want time.Duration
	}{
		{"lowest", 0, 800 * time.Millisecond},
		{"middle", 0.5, time.Second},
		{"highest", 0.999999, 1200 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, _ := newTest(t, (&counting{}).load, Config[string]{
				TTL: time.Second, Jitter: 0.2, Rand: func() float64 { return tt.u },
			})
			e, _, err := c.GetEntry(context.Background(), "k")
			if err != nil {
				t.Fatal(err)
			}
			if d := e.FreshFor - tt.want; d < -time.Microsecond || d > time.Microsecond {
				t.Fatalf("FreshFor = %v, want %v", e.FreshFor, tt.want)
			}
		})
	}
}

func TestStaleWhileRevalidate(t *testing.T) {
	l := &counting{value: func(_ string, run int64) (string, error) {
		return []string{"", "v1", "v2", "v3"}[run], nil
	}}
	c, clk := newTest(t, l.load, Config[string]{TTL: time.Second, Grace: 10 * time.Second})
	c.Get(context.Background(), "k")
	l.release = make(chan struct{})
	clk.Advance(2 * time.Second) // stale, within grace

	// Many stale reads: all answered at once with the old value; one refresh.
	for range 100 {
		e, src, err := c.GetEntry(context.Background(), "k")
		if err != nil || src != SourceStale || e.Value != "v1" {
			t.Fatalf("stale read = %q %v %v", e.Value, src, err)
		}
	}
	eventually(t, "refresh running", func() bool { return l.runs.Load() == 2 })
	close(l.release)
	eventually(t, "refreshed value", func() bool { e, ok := c.Peek("k"); return ok && e.Value == "v2" })
	if s := c.Stats(); s.Refreshes != 1 || s.StaleServed != 100 || s.Fills != 2 {
		t.Fatalf("stats = %+v", s)
	}

	// Past TTL + grace: a cold miss, filled in the caller's Get.
	clk.Advance(20 * time.Second)
	l.release = nil
	e, src, err := c.GetEntry(context.Background(), "k")
	if err != nil || src != SourceFill || e.Value != "v3" {
		t.Fatalf("past grace = %q %v %v", e.Value, src, err)
	}
}

func TestRefreshCapSkipsAndRetriesLater(t *testing.T) {
	l := &counting{}
	c, clk := newTest(t, l.load, Config[string]{TTL: time.Second, Grace: time.Minute, Refreshes: NewLimiter(1)})
	c.Get(context.Background(), "a")
	c.Get(context.Background(), "b")
	l.release = make(chan struct{})
	clk.Advance(2 * time.Second)

	c.Get(context.Background(), "a") // takes the only refresh slot and holds it
	eventually(t, "a refreshing", func() bool { return l.runs.Load() == 3 })
	c.Get(context.Background(), "b") // no slot: skipped
	if s := c.Stats(); s.RefreshesSkipped != 1 || s.Refreshes != 1 {
		t.Fatalf("stats = %+v", s)
	}
	close(l.release)
	eventually(t, "a refreshed", func() bool { return c.cfg.Refreshes.InUse() == 0 })
	c.Get(context.Background(), "b") // a later read refreshes
	eventually(t, "b refreshed", func() bool { return c.Stats().Refreshes == 2 && c.cfg.Refreshes.InUse() == 0 })
	if e, ok := c.Peek("b"); !ok || e.FreshFor <= 0 {
		t.Fatalf("b not fresh after its refresh: %+v", e)
	}
}

func TestFailedRefreshKeepsStaleAndRetries(t *testing.T) {
	fail := true
	l := &counting{value: func(key string, run int64) (string, error) {
		if run > 1 && fail {
			return "", context.DeadlineExceeded
		}
		return "v", nil
	}}
	c, clk := newTest(t, l.load, Config[string]{TTL: time.Second, Grace: time.Minute})
	c.Get(context.Background(), "k")
	clk.Advance(2 * time.Second)
	c.Get(context.Background(), "k")
	eventually(t, "refresh failed", func() bool { return c.Stats().FillErrors == 1 && c.cfg.Refreshes.InUse() == 0 })
	if _, src, err := c.GetEntry(context.Background(), "k"); err != nil || src != SourceStale {
		t.Fatalf("after a failed refresh: %v %v", src, err)
	}
	eventually(t, "retried", func() bool { return l.runs.Load() >= 3 })
}

func TestRefreshAheadXFetch(t *testing.T) {
	// The loader takes 100 ms of fake time; β = 1. With u fixed, XFetch refreshes once
	// now + 100ms·(−ln u) ≥ fresh-until.
	var clk FakeClock
	u := 0.5 // −ln 0.5 ≈ 0.693 → refresh within the last ≈69 ms of freshness
	l := &counting{}
	c, _ := newTest(t, func(ctx context.Context, key string) (string, error) {
		clk.Advance(100 * time.Millisecond)
		return l.load(ctx, key)
	}, Config[string]{TTL: time.Second, RefreshAhead: 1, Clock: &clk, Rand: func() float64 { return 1 - u }})
	c.Get(context.Background(), "k")

	clk.Advance(900 * time.Millisecond) // 100 ms left: no early refresh
	c.Get(context.Background(), "k")
	if c.Stats().Refreshes != 0 {
		t.Fatal("refreshed 100 ms before expiry; XFetch gap is ≈69 ms")
	}
	clk.Advance(40 * time.Millisecond) // 60 ms left
	c.Get(context.Background(), "k")
	eventually(t, "early refresh", func() bool { return l.runs.Load() == 2 && c.cfg.Refreshes.InUse() == 0 })
	if c.Stats().Refreshes != 1 || c.Stats().StaleServed != 0 {
		t.Fatalf("stats = %+v", c.Stats())
	}
}

func TestSetExpiryFromTheLoader(t *testing.T) {
	c, _ := newTest(t, func(ctx context.Context, key string) (string, error) {
		if !SetExpiry(ctx, 5*time.Second, time.Second) {
			t.Error("SetExpiry refused the loader's ctx")
		}
		return "v", nil
	}, Config[string]{TTL: time.Hour, Jitter: 0.5})
	e, _, err := c.GetEntry(context.Background(), "k")
	if err != nil || e.FreshFor != 5*time.Second || e.StaleFor != 6*time.Second {
		t.Fatalf("entry = %+v, %v", e, err)
	}
	if SetExpiry(context.Background(), time.Second, 0) {
		t.Fatal("SetExpiry accepted a ctx that is not a loader's")
	}
}

func TestZeroLifetimeIsReturnedNotStored(t *testing.T) {
	l := &counting{}
	c, _ := newTest(t, func(ctx context.Context, key string) (string, error) {
		SetExpiry(ctx, 0, 0)
		return l.load(ctx, key)
	}, Config[string]{TTL: time.Hour})
	for range 2 {
		if v, err := c.Get(context.Background(), "k"); err != nil || v != "v:k" {
			t.Fatalf("Get = %q, %v", v, err)
		}
	}
	if l.runs.Load() != 2 {
		t.Fatalf("loader ran %d times, want 2: a zero-lifetime value was stored", l.runs.Load())
	}
}

// Sweep drops what can no longer be served, and only that; the Cache sweeps itself every
// SweepInterval.
func TestSweep(t *testing.T) {
	l := &counting{value: func(key string, _ int64) (string, error) {
		if key == "gone" {
			return "", ErrNotFound
		}
		return "v:" + key, nil
	}}
	c, clk := newTest(t, l.load, Config[string]{TTL: time.Minute, Grace: time.Minute, NegativeTTL: time.Second, SweepInterval: -1})
	ctx := context.Background()
	c.Get(ctx, "old")
	c.Get(ctx, "gone")
	clk.Advance(90 * time.Second) // old is within grace; gone's not-found has lapsed
	c.Get(ctx, "new")
	if n := c.Sweep(); n != 1 {
		t.Fatalf("Sweep dropped %d, want 1 (the lapsed not-found)", n)
	}
	if _, ok := c.Peek("old"); !ok {
		t.Fatal("Sweep dropped an entry within grace")
	}
	clk.Advance(time.Minute) // old is past its grace now; new is stale
	if n := c.Sweep(); n != 1 {
		t.Fatalf("Sweep dropped %d, want 1 (old)", n)
	}
	if s := c.Stats(); s.Entries != 1 {
		t.Fatalf("%d entries after the sweeps, want 1 (new)", s.Entries)
	}

	// The sweeper does the same on its own.
	auto, clk2 := newTest(t, l.load, Config[string]{TTL: time.Second, SweepInterval: 10 * time.Millisecond})
	auto.Get(ctx, "a")
	clk2.Advance(2 * time.Second)
	eventually(t, "the sweeper dropped a", func() bool { return auto.Stats().Entries == 0 })
}
