package corral_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/corralcache/corral"
	"github.com/corralcache/corral/internal/clustertest"
)

// The batch promises are checked on clusters in virtual time (newVirtualCluster): each test
// counts loads or keys' owners, which hold only while every member's view stays the same.

// batchSource is a batch loader shared by every node of a cluster: it counts each node's
// calls and each key's loads. Keys starting with "missing" are not found, "bad" ones fail.
type batchSource struct {
	mu     sync.Mutex
	calls  map[string]int // by node
	loads  map[string]int // by key
	hold   chan struct{}  // non-nil: calls wait for it (or their ctx)
	loaded atomic.Int64   // keys loaded in all
}

func newBatchSource() *batchSource {
	return &batchSource{calls: map[string]int{}, loads: map[string]int{}}
}

// on returns the batch loader of the node called node.
func (s *batchSource) on(node string) corral.BatchLoadFunc[string] {
	return func(ctx context.Context, keys []string) (map[string]string, error) {
		s.mu.Lock()
		s.calls[node]++
		for _, k := range keys {
			s.loads[k]++
		}
		s.mu.Unlock()
		s.loaded.Add(int64(len(keys)))
		if s.hold != nil {
			select {
			case <-s.hold:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		out := make(map[string]string, len(keys))
		for _, k := range keys {
			if strings.HasPrefix(k, "bad") {
				return nil, fmt.Errorf("no row for %s", k)
			}
			if !strings.HasPrefix(k, "missing") {
				out[k] = "v:" + k
			}
		}
		return out, nil
	}
}

// worst returns the key loaded most often and how often.
func (s *batchSource) worst() (string, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	worst, most := "", 0
	for k, n := range s.loads {
		if n > most {
			worst, most = k, n
		}
	}
	return worst, most
}

// batchGroups registers a group on every node whose loader is src's batch loader only.
func batchGroups(tb testing.TB, nodes []*corral.Node, name string, src *batchSource, opts ...corral.GroupOption) []*corral.Group[string] {
	tb.Helper()
	var gs []*corral.Group[string]
	for _, n := range nodes {
		g, err := corral.NewGroup[string](n, name, nil, append([]corral.GroupOption{corral.WithTTL(time.Hour), corral.WithBatchLoad(src.on(n.Name()))}, opts...)...)
		if err != nil {
			tb.Fatal(err)
		}
		gs = append(gs, g)
	}
	return gs
}

func manyKeys(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprint(prefix, i)
	}
	return out
}

// One GetMany of 100 cold keys over 5 nodes: every key loaded exactly once, at most one batch
// loader call per owner, one request per remote owner; a second GetMany loads nothing.
func TestGetManyOneLoadPerOwner(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		nodes := newVirtualCluster(t, 5, nil)
		src := newBatchSource()
		gs := batchGroups(t, nodes, "g", src)
		keys := manyKeys("page:", 100)
		values, err := gs[0].GetMany(context.Background(), keys)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			if values[k] != "v:"+k {
				t.Fatalf("%s = %q", k, values[k])
			}
		}
		if k, n := src.worst(); n != 1 {
			t.Fatalf("%s loaded %d times", k, n)
		}
		owners := map[string]bool{}
		for _, k := range keys {
			owners[nodes[0].Owner(k).Name] = true
		}
		src.mu.Lock()
		for node, n := range src.calls {
			if n > 1 || !owners[node] {
				t.Errorf("node %s: %d batch loader calls (an owner: %v)", node, n, owners[node])
			}
		}
		src.mu.Unlock()
		remote := len(owners)
		if owners[nodes[0].Name()] {
			remote--
		}
		if s := gs[0].Stats(); s.BatchRequests != uint64(remote) {
			t.Errorf("%d batched requests sent for %d remote owners", s.BatchRequests, remote)
		}
		if _, err := gs[1].GetMany(context.Background(), keys); err != nil || src.loaded.Load() != 100 {
			t.Fatalf("second GetMany: %v, %d keys loaded in all", err, src.loaded.Load())
		}
	})
}

// Twenty overlapping GetManys and a hundred Gets at once, on every node: each key once.
func TestGetManyOverlappingLoadEachKeyOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		nodes := newVirtualCluster(t, 3, nil)
		src := newBatchSource()
		src.hold = make(chan struct{})
		gs := batchGroups(t, nodes, "g", src, corral.WithBatchWindow(5*time.Millisecond))
		keys := manyKeys("k", 60)
		var wg sync.WaitGroup
		var failed atomic.Int32
		for i := range 20 {
			wg.Go(func() {
				ks := keys[i : i+40]
				values, err := gs[i%3].GetMany(context.Background(), ks)
				if err != nil || len(values) != len(ks) {
					failed.Add(1)
					t.Errorf("GetMany: %d values, %v", len(values), err)
				}
			})
		}
		for i := range 100 {
			wg.Go(func() {
				k := keys[i%60]
				if v, err := gs[i%3].Get(context.Background(), k); err != nil || v != "v:"+k {
					failed.Add(1)
					t.Errorf("Get(%s) = %q, %v", k, v, err)
				}
			})
		}
		clustertest.Eventually(t, "the first batch", func() bool { return src.loaded.Load() > 0 })
		close(src.hold)
		wg.Wait()
		if k, n := src.worst(); n != 1 {
			t.Fatalf("%s loaded %d times", k, n)
		}
		if n := src.loaded.Load(); n != 60 {
			t.Fatalf("%d keys loaded, want 60", n)
		}
	})
}

// Not-found keys are absent; failed keys are in a *ManyError with the error Get would return;
// a bad key is a *LimitError in it; too many keys fail the whole call; duplicates and an
// empty list are fine. A batch loader's error fails every key of its call.
func TestGetManyErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		nodes := newVirtualCluster(t, 2, nil)
		// Keys are loaded one by one here, so that one fails alone.
		gs := groups(t, nodes, "g", func(ctx context.Context, key string) (string, error) {
			switch {
			case strings.HasPrefix(key, "bad"):
				return "", fmt.Errorf("no row for %s", key)
			case strings.HasPrefix(key, "missing"):
				return "", corral.ErrNotFound
			}
			return "v:" + key, nil
		})
		ctx := context.Background()
		if v, err := gs[0].GetMany(ctx, nil); err != nil || len(v) != 0 {
			t.Fatalf("GetMany(nil) = %v, %v", v, err)
		}
		local, remote := keyOwnedBy(t, nodes[0], "bad-here"), keyOwnedBy(t, nodes[1], "bad-there")
		values, err := gs[0].GetMany(ctx, []string{"a", "a", "missing1", "", "b", local, remote})
		var me *corral.ManyError
		if !errors.As(err, &me) {
			t.Fatalf("err = %v; want a *ManyError", err)
		}
		if len(values) != 2 || values["a"] != "v:a" || values["b"] != "v:b" {
			t.Fatalf("values = %v", values)
		}
		if _, ok := me.Errors["missing1"]; ok {
			t.Fatal("a not-found key is an error")
		}
		var le *corral.LimitError
		if !errors.As(me.Errors[""], &le) || !errors.As(err, &le) {
			t.Fatalf("empty key: %v", me.Errors[""])
		}
		var fe *corral.FillError
		if !errors.As(me.Errors[local], &fe) || fe.Remote || !strings.Contains(fe.Error(), "no row") {
			t.Fatalf("the key that failed here: %v", me.Errors[local])
		}
		if !errors.As(me.Errors[remote], &fe) || !fe.Remote || !strings.Contains(fe.Error(), "no row") {
			t.Fatalf("the key that failed on its owner: %v", me.Errors[remote])
		}
		if len(me.Errors) != 3 {
			t.Fatalf("errors %v; want the empty key and the two bad ones", me.Errors)
		}
		if _, err := gs[0].GetMany(ctx, make([]string, corral.MaxGetManyKeys+1)); !errors.Is(err, corral.ErrTooManyKeys) {
			t.Fatalf("too many keys: %v", err)
		}

		// With a batch loader, an error fails its whole call — and stores nothing.
		src := newBatchSource()
		bs := batchGroups(t, nodes, "batch", src, corral.WithBatchWindow(0))
		owned := []string{keyOwnedBy(t, nodes[1], "bad"), keyOwnedBy(t, nodes[1], "fine")}
		if _, err := bs[0].GetMany(ctx, owned); !errors.As(err, &me) || len(me.Errors) != 2 {
			t.Fatalf("a failed batch: %v", err)
		}
		if _, err := bs[0].Get(ctx, owned[1]); err != nil || src.loaded.Load() != 3 {
			t.Fatalf("Get after the failed batch: %v, %d keys loaded in all; want it loaded again", err, src.loaded.Load())
		}
	})
}

// A caller whose ctx ends gets ctx.Err() at once; the batch goes on and stores its values.
func TestGetManyCallerLeaves(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		nodes := newVirtualCluster(t, 2, nil)
		src := newBatchSource()
		src.hold = make(chan struct{})
		gs := batchGroups(t, nodes, "g", src)
		keys := manyKeys("slow", 10)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { _, err := gs[0].GetMany(ctx, keys); done <- err }()
		clustertest.Eventually(t, "the batch loader called", func() bool { return src.loaded.Load() == 10 })
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("GetMany after its ctx ended = %v", err)
		}
		close(src.hold)
		values, err := gs[1].GetMany(context.Background(), keys)
		if err != nil || len(values) != 10 {
			t.Fatalf("GetMany after: %d values, %v", len(values), err)
		}
		if n := src.loaded.Load(); n != 10 {
			t.Fatalf("%d keys loaded; the first batch did not store them", n)
		}
	})
}

// Without a batch loader, a GetMany's misses each run the LoadFunc, once per key, at once.
func TestGetManyWithLoadFunc(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		nodes := newVirtualCluster(t, 3, nil)
		src := clustertest.NewSource(20 * time.Millisecond)
		gs := groups(t, nodes, "g", src.Load, corral.WithTTL(time.Hour))
		keys := manyKeys("k", 30)
		values, err := gs[1].GetMany(context.Background(), keys)
		if err != nil || len(values) != 30 {
			t.Fatalf("%d values, %v", len(values), err)
		}
		for _, k := range keys {
			if n := src.Count(k); n != 1 {
				t.Fatalf("%s loaded %d times", k, n)
			}
		}
	})
}

// Once a Set or Remove returned nil, no GetMany started after it returns the older value —
// a near copy included.
func TestGetManyAfterWrites(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		nodes := newVirtualCluster(t, 3, nil)
		src := newBatchSource()
		gs := batchGroups(t, nodes, "g", src)
		ctx := context.Background()
		keys := manyKeys("w", 20)
		for range 3 { // hot: near copies on every node
			for _, g := range gs {
				if _, err := g.GetMany(ctx, keys); err != nil {
					t.Fatal(err)
				}
			}
		}
		for i, k := range keys {
			var err error
			if i%2 == 0 {
				err = gs[i%3].Set(ctx, k, "new:"+k)
			} else {
				err = gs[i%3].Remove(ctx, k)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		for _, g := range gs {
			values, err := g.GetMany(ctx, keys)
			if err != nil {
				t.Fatal(err)
			}
			for i, k := range keys {
				want := "v:" + k // removed: loaded again
				if i%2 == 0 {
					want = "new:" + k
				}
				if values[k] != want {
					t.Fatalf("%s = %q after the write returned, want %q", k, values[k], want)
				}
			}
		}
	})
}

// An owner answers a batch with as many values as a message has room for; the asker asks
// again for the rest, which the owner's store holds by then: every key comes back, each
// loaded once.
func TestGetManyLargerThanAMessage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		nodes := newVirtualCluster(t, 2, func(string) corral.Config { return corral.Config{MaxValueBytes: 1000} })
		n1 := nodes[1]
		var loads atomic.Int64
		gs := groups(t, nodes, "big", func(ctx context.Context, key string) (string, error) {
			loads.Add(1)
			return strings.Repeat(key[:1], 600), nil
		}, corral.WithTTL(time.Hour))
		var keys []string
		for i := range 10 {
			keys = append(keys, keyOwnedBy(t, n1, fmt.Sprint(string(rune('a'+i)), "-")))
		}
		values, err := gs[0].GetMany(context.Background(), keys)
		if err != nil || len(values) != 10 {
			t.Fatalf("%d values, %v", len(values), err)
		}
		for _, k := range keys {
			if values[k] != strings.Repeat(k[:1], 600) {
				t.Fatalf("%s = %.20q…", k, values[k])
			}
		}
		if n := loads.Load(); n != 10 {
			t.Fatalf("%d loads for 10 keys", n)
		}
		if s := gs[0].Stats(); s.BatchRequests < 5 {
			t.Fatalf("%d batched requests: the owner answered more than a message holds", s.BatchRequests)
		}
	})
}

// A page of keys owned by another node, some of whose values carry tags: an owner answers
// untagged values in its answer's columns and tagged ones, not-founds and failures each on
// their own, and the asker puts every key's answer back in its place. After RemoveByTag, a
// GetMany loads the tagged keys again, and only them.
func TestGetManyTaggedValues(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		nodes := newVirtualCluster(t, 2, nil)
		var mu sync.Mutex
		loads := map[string]int{}
		gs := groups(t, nodes, "g", func(ctx context.Context, key string) (string, error) {
			mu.Lock()
			loads[key]++
			n := loads[key]
			mu.Unlock()
			switch {
			case strings.HasPrefix(key, "missing"):
				return "", corral.ErrNotFound
			case strings.HasPrefix(key, "bad"):
				return "", fmt.Errorf("no row for %s", key)
			case strings.HasPrefix(key, "tagged"):
				corral.Tag(ctx, "t")
			}
			return fmt.Sprintf("v%d:%s", n, key), nil
		}, corral.WithTTL(time.Hour))
		var keys []string
		for i := range 40 {
			prefix := [...]string{"plain", "tagged", "missing", "bad"}[i%4]
			keys = append(keys, keyOwnedBy(t, nodes[1], fmt.Sprintf("%s%d-", prefix, i)))
		}
		ctx := context.Background()
		check := func(round int, want func(key string) string) {
			t.Helper()
			values, err := gs[0].GetMany(ctx, keys)
			var me *corral.ManyError
			if !errors.As(err, &me) || len(me.Errors) != 10 {
				t.Fatalf("round %d: err = %v; want a *ManyError of the 10 bad keys", round, err)
			}
			for _, k := range keys {
				switch {
				case strings.HasPrefix(k, "bad"):
					if !strings.Contains(fmt.Sprint(me.Errors[k]), "no row for "+k) {
						t.Fatalf("round %d: %s failed with %v", round, k, me.Errors[k])
					}
				case strings.HasPrefix(k, "missing"):
					if _, ok := values[k]; ok {
						t.Fatalf("round %d: not-found %s = %q", round, k, values[k])
					}
				default:
					if values[k] != want(k) {
						t.Fatalf("round %d: %s = %q, want %q", round, k, values[k], want(k))
					}
				}
			}
			if len(values) != 20 {
				t.Fatalf("round %d: %d values, want 20", round, len(values))
			}
		}
		first := func(k string) string { return "v1:" + k }
		check(1, first)
		check(2, first) // held by the owner now: the same values, in the same places
		if err := nodes[0].RemoveByTag(ctx, "t"); err != nil {
			t.Fatal(err)
		}
		check(3, func(k string) string {
			if strings.HasPrefix(k, "tagged") {
				return "v2:" + k
			}
			return first(k)
		})
	})
}
