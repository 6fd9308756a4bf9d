package group

import (
	"context"
	"testing"
	"time"

	"github.com/corralcache/corral/internal/lease"
	"github.com/corralcache/corral/internal/view"
	"github.com/corralcache/corral/peer"
	"github.com/corralcache/corral/ring"
)

// viewOwnedBy is tn's view rebuilt as if the members were ms (self among them or not): the
// view after a membership change that this test makes up.
func viewOwnedBy(tb testing.TB, tn *testNode, ms []peer.Member) *view.View {
	tb.Helper()
	v, _, err := view.Next(tn.env.View.Load(), ms, ring.DefaultConfig(), time.Now(), tn.env.PeekWindow, nil)
	if err != nil {
		tb.Fatal(err)
	}
	return v
}

// A lease whose key moved to another owner ends; the node that granted it grants no other
// token for that key until the moved lease would have lapsed — a caller whose view is behind
// still asks it, as acting owner, and the new owner grants its own: one extra filler per
// ownership change, not two. When the key comes back, it grants again.
func TestMovedLeaseIsNotGrantedAgain(t *testing.T) {
	tn := newTestNode(t, testNodeConfig{})
	g := newGroup(t, tn, "g", noLoader, stringCodec{}, Options{})
	ctx := context.Background()
	if err := g.SetWithExpiry(ctx, "k", "old", lease.Expiry{TTL: time.Millisecond, SWR: time.Hour}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond)
	first, err := g.Lease(ctx, "k", time.Minute, 0)
	if err != nil || first.State != lease.Stale || first.Token == "" {
		t.Fatalf("first Lease = %+v, %v; want stale with a token", first, err)
	}
	self := []peer.Member{{Name: tn.env.Self, Meta: peer.Meta{PeerAddr: testAddr}}}
	elsewhere := viewOwnedBy(t, tn, []peer.Member{{Name: "other", Meta: peer.Meta{PeerAddr: "192.0.2.1:7947"}}})
	g.ViewChanged(elsewhere)
	ans, err := g.leases.Acquire(ctx, "k", time.Minute, time.Now())
	if err != nil || ans.State != lease.Stale || ans.Token != "" {
		t.Fatalf("Lease as acting owner after the key moved away = %+v, %v; want stale without a token", ans, err)
	}
	if err := g.Remove(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	if ans, err := g.leases.Acquire(ctx, "k", time.Minute, time.Now()); err != nil || ans.State != lease.Moved {
		t.Fatalf("Lease of a missing key after its lease moved away = %+v, %v; want moved", ans, err)
	}
	g.ViewChanged(viewOwnedBy(t, tn, self)) // the key is this node's again
	if ans, err := g.leases.Acquire(ctx, "k", time.Minute, time.Now()); err != nil || ans.State != lease.Fill || ans.Token == "" {
		t.Fatalf("Lease once the key is back = %+v, %v; want fill", ans, err)
	}
}
