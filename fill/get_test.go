package fill

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

func TestGetFillsOnceThenHits(t *testing.T) {
	l := &counting{}
	c, _ := newTest(t, l.load, Config[string]{TTL: time.Minute})
	for i := 0; i < 3; i++ {
		v, err := c.Get(context.Background(), "a")
		if err != nil || v != "v:a" {
			t.Fatalf("Get = %q, %v", v, err)
		}
	}
	if got := l.runs.Load(); got != 1 {
		t.Fatalf("loader ran %d times, want 1", got)
	}
	if s := c.Stats(); s.Gets != 3 || s.Fills != 1 || s.Coalesced != 0 {
		t.Fatalf("stats = %+v", s)
	}
}

// The falsifiable claim of docs/design.md on one node: K concurrent Gets for an expired key add 1
// to fills and K−1 to coalesced.
func TestStampedeOneFillKMinusOneCoalesced(t *testing.T) {
	const K = 200
	l := &counting{release: make(chan struct{})}
	c, clk := newTest(t, l.load, Config[string]{TTL: time.Second})
	close(l.release)
	if _, err := c.Get(context.Background(), "hot"); err != nil {
		t.Fatal(err)
	}
	clk.Advance(2 * time.Second) // expired
	l.release = make(chan struct{})
	before := c.Stats()

	var wg sync.WaitGroup
	sources := make([]Source, K)
	for i := range K {
		wg.Go(func() {
			e, src, err := c.GetEntry(context.Background(), "hot")
			if err != nil || e.Value != "v:hot" {
				t.Errorf("Get = %q, %v", e.Value, err)
			}
			sources[i] = src
		})
	}
	// Hold the loader until every other Get has joined the fill.
	eventually(t, "K-1 coalesced", func() bool { return c.Stats().Coalesced-before.Coalesced == K-1 })
	close(l.release)
	wg.Wait()

	after := c.Stats()
	if d := after.Fills - before.Fills; d != 1 {
		t.Errorf("fills grew by %d, want 1", d)
	}
	if d := after.Coalesced - before.Coalesced; d != K-1 {
		t.Errorf("coalesced grew by %d, want %d", d, K-1)
	}
	var fills int
	for _, s := range sources {
		if s == SourceFill {
			fills++
		}
	}
	if fills != 1 {
		t.Errorf("%d Gets saw SourceFill, want 1", fills)
	}
	if got := l.runs.Load(); got != 2 {
		t.Errorf("loader ran %d times in all, want 2", got)
	}
}

// Repeated stampedes on a key that expires between rounds: every round costs exactly one
// fill. Gets that arrive just after the fill ended find its entry (the second look).
func TestRepeatedStampedesOneFillEach(t *testing.T) {
	l := &counting{}
	c, clk := newTest(t, l.load, Config[string]{TTL: time.Second})
	for round := 1; round <= 20; round++ {
		clk.Advance(2 * time.Second)
		var wg sync.WaitGroup
		for range 50 {
			wg.Go(func() {
				if _, err := c.Get(context.Background(), "k"); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if got := l.runs.Load(); got != int64(round) {
			t.Fatalf("after round %d the loader ran %d times", round, got)
		}
	}
}

func TestWaiterWhoseContextEndsLeavesAlone(t *testing.T) {
	l := &counting{release: make(chan struct{})}
	c, _ := newTest(t, l.load, Config[string]{TTL: time.Minute})

	leaderCtx, cancelLeader := context.WithCancel(context.Background())
	leaderErr := make(chan error, 1)
	go func() {
		_, err := c.Get(leaderCtx, "k")
		leaderErr <- err
	}()
	eventually(t, "fill started", func() bool { return l.runs.Load() == 1 })
	waiterErr := make(chan error, 1)
	var waiterVal string
	go func() {
		v, err := c.Get(context.Background(), "k")
		waiterVal = v
		waiterErr <- err
	}()
	eventually(t, "waiter joined", func() bool { return c.Stats().Coalesced == 1 })

	// The leader gives up: it gets ctx.Err() alone, and the fill goes on.
	cancelLeader()
	if err := <-leaderErr; !errors.Is(err, context.Canceled) {
		t.Fatalf("leader err = %v, want context.Canceled", err)
	}
	var fe *FillError
	close(l.release)
	if err := <-waiterErr; err != nil || waiterVal != "v:k" {
		t.Fatalf("waiter = %q, %v (FillError: %v)", waiterVal, err, errors.As(err, &fe))
	}
	// The fill fed the store too.
	if e, ok := c.Peek("k"); !ok || e.Value != "v:k" {
		t.Fatalf("Peek = %+v, %v", e, ok)
	}
	if got := l.runs.Load(); got != 1 {
		t.Fatalf("loader ran %d times", got)
	}
}

func TestNilLoaderIsAStore(t *testing.T) {
	c, _ := newTest[string](t, nil, Config[string]{})
	if _, err := c.Get(context.Background(), "k"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get = %v, want ErrNotFound", err)
	}
	if _, err := c.Set("k", "x"); err != nil {
		t.Fatal(err)
	}
	if v, err := c.Get(context.Background(), "k"); err != nil || v != "x" {
		t.Fatalf("Get = %q, %v", v, err)
	}
}

func TestBadKeys(t *testing.T) {
	c, _ := newTest(t, (&counting{}).load, Config[string]{})
	long := string(make([]byte, MaxKeyBytes+1))
	tests := []struct {
		name string
		key  string
		ok   bool
	}{
		{"empty", "", false},
		{"too long", long, false},
		{"at the limit", long[:MaxKeyBytes], true},
		{"binary", "\x00\xff/..", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := c.Get(context.Background(), tt.key)
			var ke *KeyError
			if tt.ok != (err == nil) || (!tt.ok && !errors.As(err, &ke)) {
				t.Fatalf("Get(%d bytes) = %v", len(tt.key), err)
			}
			if _, err := c.Set(tt.key, "x"); tt.ok != (err == nil) {
				t.Fatalf("Set = %v", err)
			}
			if _, err := c.Remove(tt.key); tt.ok != (err == nil) {
				t.Fatalf("Remove = %v", err)
			}
		})
	}
}

func TestConfigValidation(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config[string]
	}{
		{"bad name", Config[string]{Name: "a/b"}},
		{"long name", Config[string]{Name: string(make([]byte, 65))}},
		{"negative ttl", Config[string]{TTL: -1}},
		{"jitter 1", Config[string]{Jitter: 1}},
		{"negative jitter", Config[string]{Jitter: -0.1}},
		{"negative grace", Config[string]{Grace: -1}},
		{"negative beta", Config[string]{RefreshAhead: -1}},
		{"negative negative ttl", Config[string]{NegativeTTL: -1}},
		{"negative fill timeout", Config[string]{FillTimeout: -1}},
		{"negative max bytes", Config[string]{MaxBytes: -1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.Clock = &FakeClock{}
			if c, err := New(nil, tt.cfg); err == nil {
				c.Close(context.Background())
				t.Fatal("New accepted a bad config")
			}
		})
	}
}

func TestClosed(t *testing.T) {
	l := &counting{}
	c, err := New(l.load, Config[string]{}) // the real coarse clock, owned and stopped
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(context.Background()); err != nil {
		t.Fatal("second Close:", err)
	}
	if _, err := c.Get(context.Background(), "k"); !errors.Is(err, ErrClosed) {
		t.Fatalf("Get after Close = %v", err)
	}
}

func TestMaxBytesBoundsTheStore(t *testing.T) {
	l := &counting{value: func(key string, _ int64) (string, error) { return string(make([]byte, 1000)), nil }}
	c, _ := newTest(t, l.load, Config[string]{MaxBytes: 50_000})
	for i := range 500 {
		if _, err := c.Get(context.Background(), "key-"+string(rune('a'+i%26))+string(rune(i))); err != nil {
			t.Fatal(err)
		}
	}
	c.store.CleanUp()
	if s := c.Stats(); s.Bytes > 50_000 || s.Entries == 0 {
		t.Fatalf("store holds %d bytes in %d entries, bound 50000", s.Bytes, s.Entries)
	}
}

func TestAdmissionControlWaitsForASlot(t *testing.T) {
	l := &counting{release: make(chan struct{})}
	slots := NewLimiter(1)
	c, _ := newTest(t, l.load, Config[string]{Fills: slots})
	first := make(chan error, 1)
	go func() { _, err := c.Get(context.Background(), "a"); first <- err }()
	eventually(t, "first fill running", func() bool { return l.runs.Load() == 1 })

	// The second key's fill waits for the slot; its caller waits within its own context.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := c.Get(ctx, "b"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Get over the bound = %v, want DeadlineExceeded", err)
	}
	if got := l.runs.Load(); got != 1 {
		t.Fatalf("loader ran %d times while the slot was taken", got)
	}
	if got := slots.Full(); got != 1 {
		t.Fatalf("Limiter.Full = %d, want the one fill that waited", got)
	}
	close(l.release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	// b's fill got the slot once a's ended, and stored its value.
	eventually(t, "b filled", func() bool { _, ok := c.Peek("b"); return ok })
}

// InlineFill: a fill runs on the goroutine of the Get that starts it, under its ctx. A Get
// whose ctx ends leaves at once (its loader's ctx ends too); the fill it ran is abandoned,
// nothing is stored, and the Get that waited on it fills again. No worker ever starts.
func TestInlineFill(t *testing.T) {
	l := &counting{release: make(chan struct{})}
	c, _ := newTest(t, l.load, Config[string]{TTL: time.Minute}, ReplicaConfig{InlineFill: true})
	ctx, cancel := context.WithCancel(context.Background())
	leader := make(chan error, 1)
	go func() { _, err := c.Get(ctx, "k"); leader <- err }()
	eventually(t, "fill started", func() bool { return l.runs.Load() == 1 })
	type got struct {
		v   string
		src Source
		err error
	}
	follower := make(chan got, 1)
	go func() {
		e, src, err := c.GetEntry(context.Background(), "k")
		follower <- got{e.Value, src, err}
	}()
	eventually(t, "follower waiting", func() bool { return c.Stats().Coalesced == 1 })
	cancel()
	if err := <-leader; !errors.Is(err, context.Canceled) {
		t.Fatalf("leader = %v, want context.Canceled", err)
	}
	eventually(t, "the follower filling again", func() bool { return l.runs.Load() == 2 })
	if _, ok := c.Peek("k"); ok {
		t.Fatal("the abandoned fill stored something")
	}
	close(l.release)
	if f := <-follower; f.err != nil || f.v != "v:k" || f.src != SourceFill {
		t.Fatalf("follower = %q %v %v, want v:k from its own fill", f.v, f.src, f.err)
	}
	if _, ok := c.Peek("k"); !ok {
		t.Fatal("the follower's fill stored nothing")
	}
	if v, src := mustGetEntry(t, c, "k2"); v != "v:k2" || src != SourceFill {
		t.Fatalf("inline fill = %q %v", v, src)
	}
	if n := c.workers.Load(); n != 0 {
		t.Fatalf("%d fill workers started, want 0", n)
	}
}

func mustGetEntry(t *testing.T, c *Replica[string], key string) (string, Source) {
	t.Helper()
	e, src, err := c.GetEntry(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	return e.Value, src
}

// A stamp marks the entry a hit was answered from: GetStamped answers only while the entry
// carries that stamp and is fresh, and a new entry (a write, a refill) carries none.
func TestStamps(t *testing.T) {
	l := &counting{}
	c, clk := newTest(t, l.load, Config[string]{TTL: time.Minute})
	ctx := context.Background()
	if _, ok := c.GetStamped(ctx, "a", 1); ok {
		t.Fatal("GetStamped answered a key never stored")
	}
	if v, err := c.GetStamping(ctx, "a", 1); err != nil || v != "v:a" { // fills; stamps nothing yet
		t.Fatalf("GetStamping = %q, %v", v, err)
	}
	if _, ok := c.GetStamped(ctx, "a", 1); ok {
		t.Fatal("GetStamped answered from an entry a fill stored, which no hit has stamped")
	}
	c.GetStamping(ctx, "a", 1) // a hit: stamps
	if v, ok := c.GetStamped(ctx, "a", 1); !ok || v != "v:a" {
		t.Fatalf("GetStamped(1) = %q, %v after a stamping hit", v, ok)
	}
	if _, ok := c.GetStamped(ctx, "a", 2); ok {
		t.Fatal("GetStamped answered for another stamp")
	}
	c.GetStamping(ctx, "a", 2)
	if _, ok := c.GetStamped(ctx, "a", 1); ok {
		t.Fatal("the old stamp still answers after a restamp")
	}
	if _, err := c.Set("a", "new"); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.GetStamped(ctx, "a", 2); ok {
		t.Fatal("GetStamped answered from the entry a Set replaced")
	}
	c.GetStamping(ctx, "a", 2)
	clk.Advance(2 * time.Minute)
	if _, ok := c.GetStamped(ctx, "a", 2); ok {
		t.Fatal("GetStamped answered an expired entry")
	}
	if s := c.Stats(); s.Gets != 5 || s.Fills != 1 {
		t.Fatalf("stats = %+v: want every answered call counted once (5 Gets) and 1 fill", s)
	}
}

// LookupHeld answers what Lookup would from the store, and nothing else: no fill, no wait,
// no count of a remembered not-found.
func TestLookupHeld(t *testing.T) {
	l := &counting{value: func(key string, _ int64) (string, error) {
		if key == "gone" {
			return "", ErrNotFound
		}
		return "v:" + key, nil
	}}
	c, clk := newTest(t, l.load, Config[string]{TTL: time.Minute, Grace: time.Minute, NegativeTTL: time.Minute})
	ctx := context.Background()
	if _, _, ok := c.LookupHeld(ctx, "a"); ok || l.runs.Load() != 0 {
		t.Fatalf("LookupHeld of a missing key: ok=%v, %d fills", ok, l.runs.Load())
	}
	c.Get(ctx, "a")
	if e, src, ok := c.LookupHeld(ctx, "a"); !ok || e.Value != "v:a" || src != SourceHit {
		t.Fatalf("LookupHeld = %+v, %v, %v; want the fresh value as a hit", e, src, ok)
	}
	clk.Advance(90 * time.Second)
	if e, src, ok := c.LookupHeld(ctx, "a"); !ok || e.Value != "v:a" || src != SourceStale {
		t.Fatalf("LookupHeld within grace = %+v, %v, %v; want the stale value", e, src, ok)
	}
	// The stale answer started the key's one refresh, in the background: it ends (and is
	// counted) before the stats are compared below.
	eventually(t, "a refreshed", func() bool { return c.Stats().Fills == 2 })
	if _, _, ok := c.LookupHeld(ctx, string(make([]byte, 5000))); ok {
		t.Fatal("LookupHeld answered a bad key")
	}
	c.Get(ctx, "gone")
	// The counters, not the store's size: Entries and Bytes are the store's estimates, which
	// it brings up to date in the background (the refresh the stale answer above started,
	// the not-found just stored).
	counters := func() Stats { s := c.Stats(); s.Entries, s.Bytes = 0, 0; return s }
	before := counters()
	if _, _, ok := c.LookupHeld(ctx, "gone"); ok {
		t.Fatal("LookupHeld answered a remembered not-found (Lookup's to answer)")
	}
	if after := counters(); after != before {
		t.Fatalf("LookupHeld of a not-found changed the stats: %+v -> %+v", before, after)
	}
}
