package corral_test

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/corralcache/corral"
)

// countedGroups are group "g" on nodes, an hour's TTL, whose loader answers "v:"+key and
// counts its calls in loads.
func countedGroups(t *testing.T, nodes []*corral.Node) ([]*corral.Group[string], *atomic.Int64) {
	loads := new(atomic.Int64)
	return groups(t, nodes, "g", func(_ context.Context, key string) (string, error) {
		loads.Add(1)
		return "v:" + key, nil
	}, corral.WithTTL(time.Hour)), loads
}

// GetIfPresent answers exactly what a Get would answer from the owner's store at once — a
// fresh value, right after its fill as on later reads — and nothing else: it never loads,
// never asks the owner, and a near copy, a miss, an expired value and a bad key are false.
func TestGetIfPresent(t *testing.T) {
	nodes := newCluster(t, 2)
	gs, loads := countedGroups(t, nodes)
	ctx := context.Background()
	owner, other := gs[0], gs[1]
	key := keyOwnedBy(t, nodes[0], "present")

	if v, ok := owner.GetIfPresent(ctx, key); ok {
		t.Fatalf("GetIfPresent of a key never read = %q, true", v)
	}
	if n := loads.Load(); n != 0 {
		t.Fatalf("GetIfPresent loaded %d times", n)
	}
	if _, err := owner.Get(ctx, key); err != nil {
		t.Fatal(err)
	}
	// Right after the fill, and again (the first answer stamps the entry for the fast hit).
	for range 2 {
		if v, ok := owner.GetIfPresent(ctx, key); !ok || v != "v:"+key {
			t.Fatalf("owner's GetIfPresent after the fill = %q, %v", v, ok)
		}
	}
	// The other node reads through the owner and keeps a near copy; GetIfPresent there is
	// still false: a near copy is not the owner's value.
	for range 3 {
		if _, err := other.Get(ctx, key); err != nil {
			t.Fatal(err)
		}
	}
	if v, ok := other.GetIfPresent(ctx, key); ok {
		t.Fatalf("GetIfPresent on a node that does not own the key = %q, true", v)
	}
	if _, ok := owner.GetIfPresent(ctx, string(make([]byte, 1<<20))); ok {
		t.Fatal("GetIfPresent of a key over the size limit = true")
	}
	if n := loads.Load(); n != 1 {
		t.Fatalf("loads = %d, want the one fill", n)
	}
	// A removed value is gone at once.
	if err := owner.Remove(ctx, key); err != nil {
		t.Fatal(err)
	}
	if v, ok := owner.GetIfPresent(ctx, key); ok {
		t.Fatalf("GetIfPresent after Remove = %q, true", v)
	}
}

// An expired value is not present: GetIfPresent does not serve it stale nor refresh it.
func TestGetIfPresentExpired(t *testing.T) {
	nodes := newCluster(t, 1)
	var loads atomic.Int64
	gs := groups(t, nodes, "g", func(_ context.Context, key string) (string, error) {
		loads.Add(1)
		return "v", nil
	}, corral.WithTTL(50*time.Millisecond), corral.WithStaleWhileRevalidate(time.Hour))
	ctx := context.Background()
	if _, err := gs[0].Get(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, ok := gs[0].GetIfPresent(ctx, "k"); !ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the value is still present 10 s after its 50 ms TTL")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := loads.Load(); n != 1 {
		t.Fatalf("loads = %d: GetIfPresent refreshed a stale value", n)
	}
}

// GetIfPresentWithInfo says what GetWithInfo says of a value held fresh as the owner — the
// source and the tags, before the entry is stamped and after — and is false where
// GetIfPresent is, a value whose tag was purged included.
func TestGetIfPresentWithInfo(t *testing.T) {
	nodes := newCluster(t, 2)
	gs := groups(t, nodes, "g", func(_ context.Context, key string) (string, error) {
		return "v:" + key, nil
	}, corral.WithTTL(time.Hour))
	ctx := context.Background()
	owner, other := gs[0], gs[1]
	key := keyOwnedBy(t, nodes[0], "present")
	if _, _, ok := owner.GetIfPresentWithInfo(ctx, key); ok {
		t.Fatal("GetIfPresentWithInfo of a key never written = true")
	}
	if err := owner.SetWithTags(ctx, key, "tagged", "t1", "t2"); err != nil {
		t.Fatal(err)
	}
	_, want, err := owner.GetWithInfo(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // the first stamps the entry
		v, info, ok := owner.GetIfPresentWithInfo(ctx, key)
		if !ok || v != "tagged" || info.Source != want.Source || !slices.Equal(info.Tags, want.Tags) {
			t.Fatalf("GetIfPresentWithInfo = %q, %+v, %v; GetWithInfo says %+v", v, info, ok, want)
		}
	}
	if want.Source != corral.SourceHit || !slices.Equal(want.Tags, []string{"t1", "t2"}) {
		t.Fatalf("GetWithInfo of a tagged value held = %+v", want)
	}
	if _, _, ok := other.GetIfPresentWithInfo(ctx, key); ok {
		t.Fatal("GetIfPresentWithInfo on a node that does not own the key = true")
	}
	if err := nodes[0].RemoveByTag(ctx, "t2"); err != nil {
		t.Fatal(err)
	}
	if v, info, ok := owner.GetIfPresentWithInfo(ctx, key); ok {
		t.Fatalf("GetIfPresentWithInfo after its tag's purge = %q, %+v, true", v, info)
	}
}

// GetIfHeld answers what GetWithInfo answers at once from this node's memory: the owner's
// fresh value (SourceHit) and, on another node, a fresh near copy (SourceNear, counted as a
// near hit); and nothing else — a key not yet read often enough to be kept near, a copy a
// write dropped, an expired copy. GetIfPresent still ignores near copies.
func TestGetIfHeld(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		nodes := newVirtualCluster(t, 2, nil)
		gs, loads := countedGroups(t, nodes)
		ctx := context.Background()
		owner, other := gs[0], gs[1]
		key := keyOwnedBy(t, nodes[0], "held")
		if v, _, ok := other.GetIfHeld(ctx, key); ok {
			t.Fatalf("GetIfHeld of a key never read = %q, true", v)
		}
		// One read through the owner: not hot yet, so no near copy.
		if _, err := other.Get(ctx, key); err != nil {
			t.Fatal(err)
		}
		if v, info, ok := other.GetIfHeld(ctx, key); ok {
			t.Fatalf("GetIfHeld after one read = %q, %+v, true", v, info)
		}
		if _, err := other.Get(ctx, key); err != nil { // the second keeps a near copy
			t.Fatal(err)
		}
		_, want, err := other.GetWithInfo(ctx, key)
		if err != nil || want.Source != corral.SourceNear {
			t.Fatalf("GetWithInfo after two reads: %+v, %v; want a near hit", want, err)
		}
		before := other.Stats()
		v, info, ok := other.GetIfHeld(ctx, key)
		if !ok || v != "v:"+key || info.Source != want.Source || !slices.Equal(info.Tags, want.Tags) {
			t.Fatalf("GetIfHeld = %q, %+v, %v; GetWithInfo says %+v", v, info, ok, want)
		}
		after := other.Stats()
		if after.NearHits != before.NearHits+1 || after.Gets != before.Gets+1 {
			t.Fatalf("GetIfHeld's near hit counted %d near hits and %d Gets, want 1 and 1",
				after.NearHits-before.NearHits, after.Gets-before.Gets)
		}
		if v, ok := other.GetIfPresent(ctx, key); ok {
			t.Fatalf("GetIfPresent of a near copy = %q, true", v)
		}
		if v, info, ok := owner.GetIfHeld(ctx, key); !ok || v != "v:"+key || info.Source != corral.SourceHit {
			t.Fatalf("the owner's GetIfHeld = %q, %+v, %v", v, info, ok)
		}
		if _, _, ok := other.GetIfHeld(ctx, string(make([]byte, 1<<20))); ok {
			t.Fatal("GetIfHeld of a key over the size limit = true")
		}
		// A write drops every near copy before it returns.
		if err := owner.Set(ctx, key, "new"); err != nil {
			t.Fatal(err)
		}
		if v, _, ok := other.GetIfHeld(ctx, key); ok {
			t.Fatalf("GetIfHeld after a write = %q, true", v)
		}
		for range 2 {
			if v, err := other.Get(ctx, key); err != nil || v != "new" {
				t.Fatalf("Get after the write = %q, %v", v, err)
			}
		}
		if v, info, ok := other.GetIfHeld(ctx, key); !ok || v != "new" || info.Source != corral.SourceNear {
			t.Fatalf("GetIfHeld of the written value's near copy = %q, %+v, %v", v, info, ok)
		}
		// A near copy lives at most NearTTL (1 s by default).
		time.Sleep(2 * time.Second)
		if v, _, ok := other.GetIfHeld(ctx, key); ok {
			t.Fatalf("GetIfHeld of a near copy past NearTTL = %q, true", v)
		}
		if n := loads.Load(); n != 1 {
			t.Fatalf("loads = %d, want the one fill", n)
		}
	})
}
