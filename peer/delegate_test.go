package peer

import (
	"context"
	"log/slog"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
)

func testNode(name string, w wireMeta) *memberlist.Node {
	return &memberlist.Node{Name: name, Addr: net.IPv4(10, 0, 0, 1), Port: 7946, Meta: w.encode()}
}

func TestDelegateRefusesIncompatibleMembers(t *testing.T) {
	d := newDelegate("self", Meta{RingVersion: RingVersion}, slog.New(slog.DiscardHandler), newView("self", nil, nil, slog.New(slog.DiscardHandler)))
	ok := testNode("ok", wireMeta{Meta: Meta{PeerAddr: "10.0.0.1:7947", RingVersion: RingVersion}})
	other := testNode("other", wireMeta{Meta: Meta{RingVersion: RingVersion + 1}})
	garbage := &memberlist.Node{Name: "garbage", Meta: []byte("serf tags")}
	empty := &memberlist.Node{Name: "empty"}

	if err := d.NotifyAlive(ok); err != nil {
		t.Errorf("NotifyAlive(compatible): %v", err)
	}
	for _, n := range []*memberlist.Node{other, garbage, empty} {
		if err := d.NotifyAlive(n); err == nil {
			t.Errorf("NotifyAlive(%s) admitted it", n.Name)
		}
	}

	if err := d.NotifyMerge([]*memberlist.Node{ok}); err != nil {
		t.Errorf("NotifyMerge(compatible): %v", err)
	}
	if err := d.NotifyMerge([]*memberlist.Node{ok, other}); err == nil {
		t.Error("NotifyMerge accepted a cluster with another ring version")
	}
	// A dead member's meta does not matter: it will not be admitted anyway.
	deadOther := *other
	deadOther.State = memberlist.StateDead
	if err := d.NotifyMerge([]*memberlist.Node{ok, &deadOther}); err != nil {
		t.Errorf("NotifyMerge refused because of a dead member: %v", err)
	}
}

func TestViewTellsLeaveFromFail(t *testing.T) {
	v := newView("self", nil, func(Event) {}, slog.New(slog.DiscardHandler))
	d := newDelegate("self", Meta{RingVersion: RingVersion}, slog.New(slog.DiscardHandler), v)
	meta := wireMeta{Meta: Meta{PeerAddr: "10.0.0.1:7947", RingVersion: RingVersion}}
	leaving := meta
	leaving.leaving = true

	d.NotifyJoin(testNode("crashes", meta))
	d.NotifyJoin(testNode("leaves", meta))
	d.NotifyJoin(testNode("leaves-unannounced", meta))
	d.NotifyUpdate(testNode("leaves", leaving)) // the leaving flag alone: no event
	d.NotifyLeave(testNode("crashes", meta))
	d.NotifyLeave(testNode("leaves", leaving))
	d.NotifyLeave(testNode("leaves-unannounced", meta))

	var got []string
	for _, e := range v.pending {
		got = append(got, e.Kind.String()+" "+e.Member.Name)
	}
	want := []string{"join crashes", "join leaves", "join leaves-unannounced", "fail crashes", "leave leaves", "fail leaves-unannounced"}
	if !slices.Equal(got, want) {
		t.Errorf("events %q, want %q", got, want)
	}
	if len(v.list()) != 0 {
		t.Errorf("members left: %v", v.list())
	}
}

// run delivers every event, and coalesces changes of the live set without losing the last one.
func TestViewDelivery(t *testing.T) {
	var (
		mu      sync.Mutex // guards events, changes
		events  []Event
		changes [][]Member
	)
	unblock := make(chan struct{})
	v := newView("self", func(ms []Member) {
		mu.Lock()
		changes = append(changes, ms)
		first := len(changes) == 1
		mu.Unlock()
		if first {
			<-unblock // hold the first delivery while a burst is recorded
		}
	}, func(e Event) {
		mu.Lock()
		defer mu.Unlock()
		events = append(events, e)
	}, slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		v.run(ctx)
	}()

	member := func(name, peerAddr string) liveMember {
		return liveMember{Member: Member{Name: name, GossipAddr: "10.0.0.1:7946", Meta: Meta{PeerAddr: peerAddr}}}
	}
	v.join(member("a", "x:1"))
	waitUntil(t, func() bool { v.mu.Lock(); defer v.mu.Unlock(); return len(v.pending) == 0 })
	// The first OnChange is now running (or about to): record a burst behind it.
	v.join(member("b", "x:1"))
	v.update(member("b", "x:2"))
	v.join(member("c", "x:1"))
	v.leave(member("c", "x:1"))
	v.update(member("b", "x:2")) // no change at all: no event
	close(unblock)
	waitUntil(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(events) == 5 && len(changes) >= 2
	})
	cancel()
	<-done

	var kinds []string
	for _, e := range events {
		kinds = append(kinds, e.String())
	}
	wantEvents := []string{"join a (10.0.0.1:7946)", "join b (10.0.0.1:7946)", "update b (10.0.0.1:7946)",
		"join c (10.0.0.1:7946)", "fail c (10.0.0.1:7946)"}
	if !slices.Equal(kinds, wantEvents) {
		t.Errorf("events %q, want %q", kinds, wantEvents)
	}
	if len(changes) != 2 {
		t.Fatalf("%d OnChange calls, want 2 (the burst coalesced): %v", len(changes), changes)
	}
	last := changes[len(changes)-1]
	if len(last) != 2 || last[0].Name != "a" || last[1].Name != "b" || last[1].Meta.PeerAddr != "x:2" {
		t.Errorf("last OnChange %+v, want a and b with x:2", last)
	}
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached")
		}
		time.Sleep(time.Millisecond)
	}
}
