package group

import (
	"context"
	"testing"
	"time"

	"github.com/corralcache/corral/internal/clustertest"
	"github.com/corralcache/corral/internal/version"
)

// A write whose writer never heard of a newer write the owner holds — one made on the other
// side of a split of the views, or by a node whose clock runs an hour ahead — is not lost:
// the owner answers the newer version when told, and the writer writes again above it.
func TestWriteAboveAVersionTheWriterNeverSaw(t *testing.T) {
	nodes := newCluster(t, 2)
	src := clustertest.NewSource(0)
	gs := groups(t, nodes, "g", src.Load, Options[string]{TTL: time.Hour})
	ctx := context.Background()
	// The write n1 never heard of: n0 holds it, at a version from a clock an hour ahead.
	unheard := func(key, v string) {
		at := version.New("elsewhere", func() time.Time { return time.Now().Add(time.Hour) }).Next()
		if ok, err := gs[0].local.SetAt(key, v, at); !ok || err != nil {
			t.Fatalf("SetAt(%s) on n0 = %v, %v", key, ok, err)
		}
	}

	set := keyOwnedBy(t, nodes[0], "s")
	unheard(set, "unheard")
	if err := gs[1].Set(ctx, set, "written"); err != nil {
		t.Fatal(err)
	}
	for i, v := range clustertest.GetAll(t, gs, set) {
		if v != "written" {
			t.Fatalf("node %d serves %s = %q after Set returned nil", i, set, v)
		}
	}

	removed := keyOwnedBy(t, nodes[0], "r")
	unheard(removed, "unheard")
	if err := gs[1].Remove(ctx, removed); err != nil {
		t.Fatal(err)
	}
	for i, v := range clustertest.GetAll(t, gs, removed) {
		if v != removed+"@0" {
			t.Fatalf("node %d serves %s = %q after Remove returned nil, want %q", i, removed, v, removed+"@0")
		}
	}
}
