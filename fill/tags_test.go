package fill

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// RemoveByTag removes every entry stored with the tag before it, written or filled, and
// nothing else; a value tagged after it is served.
func TestRemoveByTag(t *testing.T) {
	var runs atomic.Int32
	c, _ := newTest(t, func(ctx context.Context, key string) (string, error) {
		n := runs.Add(1)
		if strings.HasPrefix(key, "f") {
			Tag(ctx, "customer:7", "x")
		}
		return fmt.Sprint("load", n, ":", key), nil
	}, Config[string]{TTL: time.Hour})
	ctx := context.Background()
	c.Set("a", "A", "customer:7")
	c.Set("b", "B", "customer:8")
	c.Set("c", "C")
	filled, _ := c.Get(ctx, "f1")
	if _, err := c.RemoveByTag("customer:7"); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]bool{"a": false, "b": true, "c": true, "f1": false} {
		_, ok := c.Peek(key)
		if ok != want {
			t.Errorf("Peek(%s) after the purge = %v, want %v", key, ok, want)
		}
	}
	if v, _ := c.Get(ctx, "f1"); v == filled {
		t.Fatalf("Get(f1) after the purge returned the purged value %q", v)
	}
	if v, err := c.Get(ctx, "a"); err != nil || v == "A" {
		t.Fatalf("Get(a) after the purge = %q, %v; want a fill", v, err)
	}
	// Tagged after the purge: served, and carries its tags.
	c.Set("a2", "A2", "customer:7")
	e, ok := c.Peek("a2")
	if !ok || e.Value != "A2" || len(e.Tags) != 1 || e.Tags[0] != "customer:7" {
		t.Fatalf("Peek(a2) = %+v, %v", e, ok)
	}
	before := runs.Load()
	if v, _ := c.Get(ctx, "f1"); !strings.HasPrefix(v, "load") || runs.Load() != before {
		t.Fatalf("the value filled after the purge was not kept: %q, %d loads", v, runs.Load()-before)
	}
}

// A fill in flight when the purge lands, whose value carries the tag, is not stored, and no
// Get that waits on it gets it: they fill again.
// So too for a value the loader gives no lifetime, which is returned but never stored.
func TestPurgeDuringFill(t *testing.T) {
	for _, kept := range []bool{true, false} {
		t.Run(fmt.Sprintf("kept=%v", kept), func(t *testing.T) { testPurgeDuringFill(t, kept) })
	}
}

func testPurgeDuringFill(t *testing.T, kept bool) {
	release := make(chan struct{})
	var runs atomic.Int32
	c, _ := newTest(t, func(ctx context.Context, key string) (string, error) {
		n := runs.Add(1)
		if n == 1 {
			<-release
		}
		Tag(ctx, "t")
		if !kept {
			SetExpiry(ctx, 0, 0)
		}
		return fmt.Sprint("v", n), nil
	}, Config[string]{TTL: time.Hour, FillTimeout: 10 * time.Second})
	ctx := context.Background()
	first := make(chan string, 1)
	go func() { v, _ := c.Get(ctx, "k"); first <- v }()
	eventually(t, "the fill to start", func() bool { return runs.Load() == 1 })
	if _, err := c.RemoveByTag("t"); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	after := make([]string, 5)
	for i := range after {
		wg.Go(func() { after[i], _ = c.Get(ctx, "k") })
	}
	close(release)
	wg.Wait()
	if v := <-first; v == "v1" {
		t.Fatal("the Get that started the purged fill got its value")
	}
	for i, v := range after {
		if v == "v1" || v == "" {
			t.Fatalf("Get %d after the purge = %q", i, v)
		}
	}
	if e, ok := c.Peek("k"); kept && (!ok || e.Value == "v1") || !kept && ok {
		t.Fatalf("stored after the purge: %+v, %v", e, ok)
	}
	if s := c.Stats(); s.Purged == 0 {
		t.Fatalf("Stats.Purged = 0, want the purged fill counted")
	}
}

// A copy from elsewhere carries its tags and born version: born before a purge known here,
// it is refused; born after, stored. Peek, PeekAny and All never show a purged entry.
func TestPutChecksPurges(t *testing.T) {
	tags := NewTags(TagsConfig{})
	c, _ := newTest[string](t, nil, Config[string]{TTL: time.Hour}, ReplicaConfig{Tags: tags})
	tags.Purge("t", 100)
	if ok, err := c.Put("old", Entry[string]{Value: "o", FreshFor: time.Hour, StaleFor: time.Hour, Tags: []string{"t"}, Born: 99}); ok || err != nil {
		t.Fatalf("Put of a copy born before the purge = %v, %v; want refused", ok, err)
	}
	if ok, err := c.Put("new", Entry[string]{Value: "n", FreshFor: time.Hour, StaleFor: time.Hour, Tags: []string{"t"}, Born: 100}); !ok || err != nil {
		t.Fatalf("Put of a copy born at the purge = %v, %v; want stored", ok, err)
	}
	if _, err := c.Put("bad", Entry[string]{Value: "b", FreshFor: time.Hour, StaleFor: time.Hour, Tags: []string{"a b"}}); err == nil {
		t.Fatal("Put of a malformed tag: no error")
	}
	tags.Purge("t", 200)
	if _, ok := c.PeekAny("new"); ok {
		t.Fatal("PeekAny returned a purged entry")
	}
	for k := range c.All() {
		t.Fatalf("All yielded %s after the purge", k)
	}
	if n := c.Sweep(); n != 1 {
		t.Fatalf("Sweep dropped %d, want the purged entry", n)
	}
}

// Caches that share a Tags registry are purged together.
func TestSharedTagsPurgeTogether(t *testing.T) {
	tags := NewTags(TagsConfig{})
	var version atomic.Uint64
	cfg := Config[string]{TTL: time.Hour}
	rc := ReplicaConfig{Tags: tags, NextVersion: func() uint64 { return version.Add(1) },
		VersionNow: func() uint64 { return version.Load() }}
	a, _ := newTest[string](t, nil, cfg, rc)
	cfg.Name = "b"
	b, _ := newTest[string](t, nil, cfg, rc)
	a.Set("k", "a", "t")
	b.Set("k", "b", "t")
	if _, err := a.RemoveByTag("t"); err != nil {
		t.Fatal(err)
	}
	if _, ok := b.Peek("k"); ok {
		t.Fatal("a purge through one cache left the other's entry")
	}
}

// Tags that break a limit fail the fill (the caller is told which), and Set refuses them.
func TestTagLimits(t *testing.T) {
	long := strings.Repeat("x", MaxTagBytes+1)
	many := make([]string, MaxTags+1)
	for i := range many {
		many[i] = fmt.Sprint("t", i)
	}
	wide := make([]string, MaxTags)
	for i := range wide {
		wide[i] = fmt.Sprint(i, strings.Repeat("y", MaxTagsBytes/MaxTags))
	}
	tests := []struct {
		name string
		tags []string
	}{
		{"empty", []string{""}},
		{"too long", []string{long}},
		{"space", []string{"a b"}},
		{"control", []string{"a\nb"}},
		{"too many", many},
		{"too many bytes", wide},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var te *TagError
			if err := CheckTags(tt.tags); !errors.As(err, &te) {
				t.Fatalf("CheckTags = %v, want a *TagError", err)
			}
			c, _ := newTest(t, func(ctx context.Context, key string) (string, error) {
				Tag(ctx, tt.tags...)
				return "v", nil
			}, Config[string]{TTL: time.Hour})
			if _, err := c.Get(context.Background(), "k"); !errors.As(err, &te) {
				t.Fatalf("Get of a value tagged %q = %v, want a *TagError", tt.name, err)
			}
			if _, ok := c.Peek("k"); ok {
				t.Fatal("a value with bad tags was stored")
			}
			if _, err := c.Set("k", "v", tt.tags...); !errors.As(err, &te) {
				t.Fatalf("Set = %v, want a *TagError", err)
			}
		})
	}
	if err := CheckTags([]string{"customer:7", "tenant/a", "ünïcode"}); err != nil {
		t.Fatalf("CheckTags of good tags: %v", err)
	}
}

// A purge is remembered for its TTL, then forgotten; the entries it removed stay removed.
func TestTagPurgeExpires(t *testing.T) {
	clk := &FakeClock{}
	tags := NewTags(TagsConfig{TTL: time.Minute, Clock: clk})
	c, _ := newTest[string](t, nil, Config[string]{TTL: time.Hour, Clock: clk}, ReplicaConfig{Tags: tags})
	c.Set("k", "v", "t")
	tags.Purge("t", 1<<40)
	if tags.Len() != 1 || tags.Mark("t") != 1<<40 {
		t.Fatalf("after the purge: %d purges, mark %d", tags.Len(), tags.Mark("t"))
	}
	clk.Advance(2 * time.Minute)
	if tags.Len() != 0 {
		t.Fatalf("%d purges remembered past the TTL", tags.Len())
	}
	if _, ok := c.Peek("k"); ok {
		t.Fatal("an entry a purge removed came back once the purge was forgotten")
	}
}

// BenchmarkTaggedHit compares the local hit of an untagged value with one carrying one and
// four tags, in one run: a tagged hit costs a few ns a tag more.
func BenchmarkTaggedHit(b *testing.B) {
	for _, n := range []int{0, 1, 4} {
		b.Run(fmt.Sprint(n, "tags"), func(b *testing.B) {
			var tags []string
			for i := range n {
				tags = append(tags, fmt.Sprint("tag", i))
			}
			c, err := New(func(ctx context.Context, _ string) (string, error) {
				Tag(ctx, tags...)
				return "value", nil
			}, Config[string]{TTL: time.Hour})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close(context.Background())
			ctx := context.Background()
			c.Get(ctx, "hot")
			c.RemoveByTag("other") // a purge remembered: tagged hits check their tags
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := c.Get(ctx, "hot"); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}

// BenchmarkRemoveByTag times the purge of a tag carried by 100 000 of 1 000 000 entries: the
// call (a registry update) and the sweep that reclaims their memory, apart.
func BenchmarkRemoveByTag(b *testing.B) {
	const entries, tagged = 1_000_000, 100_000
	c, err := New[string](nil, Config[string]{TTL: time.Hour, MaxBytes: 1 << 30, SweepInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close(context.Background())
	for i := range entries {
		var tags []string
		if i%(entries/tagged) == 0 {
			tags = []string{"customer:7"}
		} else {
			tags = []string{fmt.Sprint("customer:", 100+i%1000)}
		}
		c.Set(fmt.Sprint("k", i), "v", tags...)
	}
	b.Run("purge", func(b *testing.B) {
		for b.Loop() {
			c.RemoveByTag("customer:7")
		}
	})
	b.Run("sweep", func(b *testing.B) {
		for b.Loop() {
			c.Sweep()
		}
	})
	if got := c.Stats().Purged; got < tagged {
		b.Fatalf("%d entries purged, want %d", got, tagged)
	}
}

// A copy from elsewhere, asked for before a purge and answered after it landed here, may go
// to the Gets that asked before the purge (the member it came from had not heard of it yet);
// a Get that joined its fill after the purge landed must not get it — the purge may have
// returned by then — and fills again. Through a LoadFunc and a batch loader, joined by Get
// and by GetMany; a copy to keep, and one with no lifetime (a near cache's of a key that is
// not hot), which is not stored but returned.
func TestPurgeDuringCopy(t *testing.T) {
	for _, batched := range []bool{false, true} {
		for _, many := range []bool{false, true} {
			for _, life := range []time.Duration{time.Hour, 0} {
				t.Run(fmt.Sprintf("batched=%v/getmany=%v/life=%v", batched, many, life), func(t *testing.T) {
					testPurgeDuringCopy(t, batched, many, life)
				})
			}
		}
	}
}

func testPurgeDuringCopy(t *testing.T, batched, many bool, life time.Duration) {
	tags := NewTags(TagsConfig{})
	release := make(chan struct{})
	var runs atomic.Int32
	// The first run answers a copy born below the purge, once released; later ones a copy
	// born after it.
	copyOf := func() (string, *Copy) {
		if runs.Add(1) == 1 {
			<-release
			return "old", &Copy{FreshFor: life, StaleFor: life, Tags: []string{"t"}, Born: 5}
		}
		return "new", &Copy{FreshFor: life, StaleFor: life, Tags: []string{"t"}, Born: 200}
	}
	var load ReplicaLoadFunc[string]
	var batchLoad ReplicaBatchLoadFunc[string]
	if batched {
		batchLoad = func(ctx context.Context, keys []string, out []Loaded[string]) error {
			v, cp := copyOf()
			for i := range keys {
				out[i] = Loaded[string]{Value: v, Copy: cp}
			}
			return nil
		}
	} else {
		load = func(ctx context.Context, key string) (string, *Copy, error) {
			v, cp := copyOf()
			return v, cp, nil
		}
	}
	c, err := NewReplica(load, batchLoad, Config[string]{TTL: time.Hour, FillTimeout: 10 * time.Second, BatchWindow: -1},
		ReplicaConfig{Tags: tags})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	ctx := context.Background()
	get := func() string {
		if many {
			vals, errs := c.GetMany(ctx, []string{"k"})
			if errs != nil {
				return fmt.Sprint(errs)
			}
			return vals["k"]
		}
		v, err := c.Get(ctx, "k")
		if err != nil {
			return err.Error()
		}
		return v
	}
	first, before := make(chan string, 1), make(chan string, 1)
	go func() { first <- get() }()
	eventually(t, "the fill to start", func() bool { return runs.Load() == 1 })
	go func() { before <- get() }()
	eventually(t, "a Get to join the fill", func() bool { return c.Stats().Coalesced == 1 })
	tags.Purge("t", 100)
	after := make([]chan string, 5)
	for i := range after {
		after[i] = make(chan string, 1)
		go func() { after[i] <- get() }()
	}
	eventually(t, "the Gets after the purge to join the fill", func() bool { return c.Stats().Coalesced == 6 })
	close(release)
	if v := <-first; v != "old" {
		t.Errorf("the Get that started the fill = %q, want the copy it asked for", v)
	}
	if v := <-before; v != "old" {
		t.Errorf("the Get that joined before the purge = %q, want the copy it asked for", v)
	}
	for i, ch := range after {
		if v := <-ch; v != "new" {
			t.Errorf("Get %d, joined after the purge = %q, want a new copy", i, v)
		}
	}
	// A copy kept is filled again once for all the late Gets; one not kept, once or more.
	if n := runs.Load(); n < 2 || life > 0 && n != 2 {
		t.Errorf("%d loader runs, want 2: the Gets that joined after the purge fill again once", n)
	}
}
