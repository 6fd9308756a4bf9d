package fill

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// batchCounter is a batch loader that counts its calls and how often each key was loaded.
// Keys starting with "missing" are not found.
type batchCounter struct {
	mu    sync.Mutex
	calls [][]string
	loads map[string]int
	hold  chan struct{} // non-nil: each call waits for it (or its ctx)
	fail  error         // non-nil: each call fails with it
}

func (b *batchCounter) load(ctx context.Context, keys []string) (map[string]string, error) {
	b.mu.Lock()
	b.calls = append(b.calls, slices.Clone(keys))
	if b.loads == nil {
		b.loads = map[string]int{}
	}
	for _, k := range keys {
		b.loads[k]++
	}
	b.mu.Unlock()
	if b.hold != nil {
		select {
		case <-b.hold:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if b.fail != nil {
		return nil, b.fail
	}
	out := make(map[string]string, len(keys))
	for _, k := range keys {
		if !strings.HasPrefix(k, "missing") {
			out[k] = "v:" + k
		}
	}
	return out, nil
}

func (b *batchCounter) numCalls() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.calls)
}

// maxLoads returns the most times one key was loaded.
func (b *batchCounter) maxLoads() (string, int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	worst, most := "", 0
	for k, n := range b.loads {
		if n > most {
			worst, most = k, n
		}
	}
	return worst, most
}

func keysN(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprint(prefix, i)
	}
	return out
}

// A GetMany of cold keys is one batch loader call with every key once; not-found keys are in
// neither map; a second GetMany is all hits.
func TestGetManyIsOneBatchCall(t *testing.T) {
	var bl batchCounter
	c, _ := newTest[string](t, nil, Config[string]{TTL: time.Hour, BatchLoad: bl.load, BatchWindow: -1})
	keys := append(keysN("k", 100), "missing1", "k7") // k7 twice
	values, errs := c.GetMany(context.Background(), keys)
	if len(errs) != 0 {
		t.Fatalf("errs = %v", errs)
	}
	if len(values) != 100 || values["k42"] != "v:k42" {
		t.Fatalf("%d values, k42 = %q", len(values), values["k42"])
	}
	if _, ok := values["missing1"]; ok {
		t.Fatal("a not-found key has a value")
	}
	if n := bl.numCalls(); n != 1 || len(bl.calls[0]) != 101 {
		t.Fatalf("%d batch calls (%v); want one of 101 keys", n, bl.calls)
	}
	// A not-found is not remembered (NegativeTTL 0): asked again, it is loaded again.
	if _, errs := c.GetMany(context.Background(), keys[:100]); len(errs) != 0 || bl.numCalls() != 1 {
		t.Fatalf("second GetMany: errs %v, %d calls; want hits", errs, bl.numCalls())
	}
	if s := c.Stats(); s.BatchLoads != 1 || s.BatchKeys != 101 || s.Fills != 101 {
		t.Fatalf("stats %+v: want 1 batch load of 101 keys, 101 fills", s)
	}
}

// Overlapping GetManys and Gets of the same keys load each key once, and Gets that miss
// within the window go in one call.
func TestBatchesLoadEachKeyOnce(t *testing.T) {
	bl := batchCounter{hold: make(chan struct{})}
	c, _ := newTest[string](t, nil, Config[string]{TTL: time.Hour, BatchLoad: bl.load, BatchWindow: 20 * time.Millisecond})
	keys := keysN("k", 50)
	var wg sync.WaitGroup
	var failures atomic.Int32
	for i := range 20 {
		wg.Go(func() {
			ks := keys[i : i+30]
			if i%2 == 0 {
				ks = keys[i*2%20 : 50]
			}
			values, errs := c.GetMany(context.Background(), ks)
			if len(errs) != 0 || len(values) != len(ks) {
				failures.Add(1)
			}
		})
	}
	for i := range 100 {
		wg.Go(func() {
			if v, err := c.Get(context.Background(), keys[i%50]); err != nil || v != "v:"+keys[i%50] {
				failures.Add(1)
			}
		})
	}
	eventually(t, "a batch call", func() bool { return bl.numCalls() > 0 })
	close(bl.hold)
	wg.Wait()
	if f := failures.Load(); f != 0 {
		t.Fatalf("%d callers failed", f)
	}
	if k, n := bl.maxLoads(); n != 1 {
		t.Fatalf("%s loaded %d times", k, n)
	}
	if len(bl.loads) != 50 {
		t.Fatalf("%d keys loaded, want 50", len(bl.loads))
	}
}

// A batch waits BatchWindow after its first key for more; MaxBatch keys load at once.
func TestBatchWindowAndMaxBatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var bl batchCounter
		c, err := New[string](nil, Config[string]{TTL: time.Hour, BatchLoad: bl.load, BatchWindow: 10 * time.Millisecond,
			MaxBatch: 4, Clock: NewSystemClock(), SweepInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(context.Background())
		var wg sync.WaitGroup
		for _, k := range []string{"a", "b", "c"} {
			wg.Go(func() { c.Get(context.Background(), k) })
			time.Sleep(time.Millisecond)
		}
		synctest.Wait()
		if n := bl.numCalls(); n != 0 {
			t.Fatalf("%d calls before the window ended", n)
		}
		time.Sleep(10 * time.Millisecond)
		wg.Wait()
		if n := bl.numCalls(); n != 1 || len(bl.calls[0]) != 3 {
			t.Fatalf("calls %v; want one of a, b, c", bl.calls)
		}
		// Ten keys with MaxBatch 4: two full batches at once, the last two after the window.
		c.GetMany(context.Background(), keysN("m", 10))
		if n := bl.numCalls(); n != 4 {
			t.Fatalf("calls %v; want 4 in all", bl.calls)
		}
		for _, call := range bl.calls[1:] {
			if len(call) > 4 {
				t.Fatalf("a call of %d keys over MaxBatch 4", len(call))
			}
		}
	})
}

// A batch loader's error fails every key of its call and stores nothing: the next GetMany
// loads again. A panic is every key's *PanicError.
func TestBatchErrorAndPanic(t *testing.T) {
	bl := batchCounter{fail: errors.New("db down")}
	c, _ := newTest[string](t, nil, Config[string]{TTL: time.Hour, BatchLoad: bl.load, BatchWindow: -1})
	_, errs := c.GetMany(context.Background(), []string{"a", "b"})
	var fe *FillError
	if len(errs) != 2 || !errors.As(errs["a"], &fe) || !errors.Is(errs["b"], bl.fail) {
		t.Fatalf("errs = %v; want both keys failed with the loader's error", errs)
	}
	bl.fail = nil
	if values, errs := c.GetMany(context.Background(), []string{"a", "b"}); len(errs) != 0 || values["a"] != "v:a" {
		t.Fatalf("after the error: %v, %v", values, errs)
	}
	if n := bl.numCalls(); n != 2 {
		t.Fatalf("%d calls; the failed keys were not loaded again", n)
	}

	p, _ := newTest[string](t, nil, Config[string]{BatchLoad: func(context.Context, []string) (map[string]string, error) {
		panic("boom")
	}, BatchWindow: -1})
	_, errs = p.GetMany(context.Background(), []string{"x", "y"})
	var pe *PanicError
	if len(errs) != 2 || !errors.As(errs["x"], &pe) || !errors.As(errs["y"], &pe) {
		t.Fatalf("errs = %v; want a *PanicError for each key", errs)
	}
}

// Bad keys and fill cycles are per-key errors; an empty list is an empty answer; a GetMany
// whose ctx ends gets ctx.Err() for the keys not answered, and their fill goes on.
func TestGetManyEdges(t *testing.T) {
	bl := batchCounter{hold: make(chan struct{})}
	var c *Replica[string]
	c, _ = newTest[string](t, nil, Config[string]{TTL: time.Hour, BatchWindow: -1, BatchLoad: func(ctx context.Context, keys []string) (map[string]string, error) {
		if slices.Contains(keys, "cycle") {
			_, errs := c.GetMany(ctx, []string{"cycle"})
			return nil, errs["cycle"]
		}
		return bl.load(ctx, keys)
	}})
	if v, errs := c.GetMany(context.Background(), nil); len(v) != 0 || errs != nil {
		t.Fatalf("GetMany(nil) = %v, %v", v, errs)
	}
	var ke *KeyError
	if _, errs := c.GetMany(context.Background(), []string{"", strings.Repeat("k", MaxKeyBytes+1)}); !errors.As(errs[""], &ke) || len(errs) != 2 {
		t.Fatalf("bad keys: %v", errs)
	}
	if _, errs := c.GetMany(context.Background(), []string{"cycle"}); !errors.Is(errs["cycle"], ErrFillCycle) {
		t.Fatalf("a batch loader asking for its own key: %v", errs)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan map[string]error)
	go func() { _, errs := c.GetMany(ctx, []string{"slow1", "slow2"}); done <- errs }()
	eventually(t, "the batch call", func() bool { return bl.numCalls() > 0 })
	cancel()
	if errs := <-done; !errors.Is(errs["slow1"], context.Canceled) || !errors.Is(errs["slow2"], context.Canceled) {
		t.Fatalf("a cancelled GetMany: %v", errs)
	}
	close(bl.hold)
	eventually(t, "the fill stored", func() bool { _, ok := c.Peek("slow2"); return ok })
}

// Without a batch loader, a GetMany's misses each run the loader, all at once.
func TestGetManyWithoutBatchLoader(t *testing.T) {
	var running, most atomic.Int32
	release := make(chan struct{})
	c, _ := newTest(t, func(ctx context.Context, key string) (string, error) {
		n := running.Add(1)
		defer running.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		<-release
		return "v:" + key, nil
	}, Config[string]{TTL: time.Hour})
	done := make(chan map[string]string)
	go func() { v, _ := c.GetMany(context.Background(), keysN("k", 10)); done <- v }()
	eventually(t, "ten loads at once", func() bool { return running.Load() == 10 })
	close(release)
	if v := <-done; len(v) != 10 || most.Load() != 10 {
		t.Fatalf("%d values, at most %d loads at once", len(v), most.Load())
	}
}

// Tag in a batch loader tags every key of the call, TagKey one; SetExpiry applies to every
// key; RemoveByTag removes what it should.
func TestBatchTagsAndExpiry(t *testing.T) {
	c, clk := newTest[string](t, nil, Config[string]{TTL: time.Hour, BatchWindow: -1,
		BatchLoad: func(ctx context.Context, keys []string) (map[string]string, error) {
			Tag(ctx, "all")
			TagKey(ctx, "a", "only-a")
			SetExpiry(ctx, time.Minute, 0)
			out := map[string]string{}
			for _, k := range keys {
				out[k] = k
			}
			return out, nil
		}})
	if _, errs := c.GetMany(context.Background(), []string{"a", "b"}); errs != nil {
		t.Fatal(errs)
	}
	a, _ := c.Peek("a")
	b, _ := c.Peek("b")
	if !slices.Contains(a.Tags, "all") || !slices.Contains(a.Tags, "only-a") || !slices.Contains(b.Tags, "all") || slices.Contains(b.Tags, "only-a") {
		t.Fatalf("tags: a %v, b %v", a.Tags, b.Tags)
	}
	if a.FreshFor > time.Minute || b.FreshFor > time.Minute {
		t.Fatalf("SetExpiry not applied: %v, %v", a.FreshFor, b.FreshFor)
	}
	c.RemoveByTag("only-a")
	if _, ok := c.Peek("a"); ok {
		t.Fatal("a survived the purge of its own tag")
	}
	if _, ok := c.Peek("b"); !ok {
		t.Fatal("b removed by the purge of a's tag")
	}
	clk.Advance(2 * time.Minute)
	if _, ok := c.Peek("b"); ok {
		t.Fatal("b outlived its SetExpiry")
	}
}

// Stale keys refresh through the batch loader, in one call.
func TestBatchRefresh(t *testing.T) {
	var bl batchCounter
	c, clk := newTest[string](t, nil, Config[string]{TTL: time.Minute, Grace: time.Hour, BatchLoad: bl.load, BatchWindow: -1})
	keys := keysN("k", 5)
	c.GetMany(context.Background(), keys)
	clk.Advance(2 * time.Minute)
	values, errs := c.GetMany(context.Background(), keys)
	if len(values) != 5 || errs != nil {
		t.Fatalf("stale GetMany: %v, %v", values, errs)
	}
	eventually(t, "the refreshes", func() bool {
		bl.mu.Lock()
		defer bl.mu.Unlock()
		for _, k := range keys {
			if bl.loads[k] != 2 {
				return false
			}
		}
		return true
	})
	if s := c.Stats(); s.Refreshes != 5 {
		t.Fatalf("%d refreshes, want 5", s.Refreshes)
	}
}

// A batch loader that ignores its ctx is ended at the fill timeout: every key's error says so.
func TestBatchTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		c, err := New[string](nil, Config[string]{FillTimeout: time.Second, BatchWindow: -1, Clock: NewSystemClock(), SweepInterval: -1,
			BatchLoad: func(context.Context, []string) (map[string]string, error) { <-release; return nil, nil }})
		if err != nil {
			t.Fatal(err)
		}
		_, errs := c.GetMany(context.Background(), []string{"a", "b"})
		var te *TimeoutError
		if !errors.As(errs["a"], &te) || !errors.As(errs["b"], &te) {
			t.Fatalf("errs = %v; want timeouts", errs)
		}
		close(release)
		c.Close(context.Background())
	})
}
