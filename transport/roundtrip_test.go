package transport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/corralcache/corral/transport/peerpb"
)

func TestRoundTrip(t *testing.T) {
	h := newFakeHandler()
	addr, _ := serve(t, h, ServerConfig{})
	c := newClient(t, ClientConfig{})
	ctx := context.Background()
	hdr := &peerpb.Header{Sender: "a", Epoch: 7, Chain: [][]byte{[]byte("g/outer")}, Clock: 9, SenderAddr: "10.0.0.9:7947"}

	// Get: the first one fills, the second hits, a peek on an absent key
	// finds nothing.
	resp, err := c.Get(ctx, addr, &peerpb.GetRequest{Header: hdr, Group: "g", Key: []byte("k")})
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if !resp.GetFound() || resp.GetSource() != peerpb.Source_FILL || string(resp.GetEntry().GetValue()) != "v:k" {
		t.Fatalf("first Get = %v, want found FILL v:k", resp)
	}
	resp, err = c.Get(ctx, addr, &peerpb.GetRequest{Header: hdr, Group: "g", Key: []byte("k")})
	if err != nil || resp.GetSource() != peerpb.Source_HIT {
		t.Fatalf("second Get = %v, %v; want HIT", resp, err)
	}
	resp, err = c.Get(ctx, addr, &peerpb.GetRequest{Header: hdr, Group: "g", Key: []byte("absent"), Peek: true})
	if err != nil || resp.GetFound() || resp.GetEntry() != nil {
		t.Fatalf("peek Get = %v, %v; want not found", resp, err)
	}
	// A Handler's nil response arrives as an empty one.
	resp, err = c.Get(ctx, addr, &peerpb.GetRequest{Group: "g", Key: []byte("nil")})
	if err != nil || resp == nil || resp.GetFound() {
		t.Fatalf("Get of nil answer = %v, %v; want empty response", resp, err)
	}

	// Set, then Get sees the value with every field intact.
	in := &peerpb.Entry{Group: "g", Key: []byte("s"), Value: []byte{0, 1, 2, 255}, FreshForNanos: 5e9, StaleForNanos: 1e9}
	sresp, err := c.Set(ctx, addr, &peerpb.SetRequest{Header: hdr, Entry: in})
	if err != nil {
		t.Fatalf("Set: %v", err)
	}
	resp, err = c.Get(ctx, addr, &peerpb.GetRequest{Group: "g", Key: []byte("s"), Peek: true})
	if err != nil {
		t.Fatalf("Get after Set: %v", err)
	}
	want := proto.Clone(in).(*peerpb.Entry)
	want.Version = sresp.GetVersion()
	if !proto.Equal(resp.GetEntry(), want) {
		t.Fatalf("Get after Set = %v, want %v", resp.GetEntry(), want)
	}

	// Remove bumps the version and the key is gone.
	rresp, err := c.Remove(ctx, addr, &peerpb.RemoveRequest{Header: hdr, Group: "g", Key: []byte("s")})
	if err != nil {
		t.Fatalf("Remove: %v", err)
	}
	if rresp.GetVersion() <= sresp.GetVersion() {
		t.Fatalf("Remove version %d, want > %d", rresp.GetVersion(), sresp.GetVersion())
	}
	resp, err = c.Get(ctx, addr, &peerpb.GetRequest{Group: "g", Key: []byte("s"), Peek: true})
	if err != nil || resp.GetFound() {
		t.Fatalf("Get after Remove = %v, %v; want not found", resp, err)
	}

	// Invalidate reaches the handler.
	if resp, err := c.Invalidate(ctx, addr, &peerpb.InvalidateRequest{Header: hdr, Group: "g", Key: []byte("k"), Version: 3}); err != nil || len(resp.GetUnreached()) != 1 {
		t.Fatalf("Invalidate: %v, %v", resp, err)
	}
	h.mu.Lock()
	got := slices.Clone(h.invalidated)
	h.mu.Unlock()
	if !slices.Equal(got, []string{"g/k"}) {
		t.Fatalf("invalidated = %v, want [g/k]", got)
	}

	// Handoff: one new key is stored, one older than what the receiver
	// holds is kept.
	hresp, err := c.Handoff(ctx, addr, []*peerpb.Entry{
		{Group: "g", Key: []byte("new"), Value: []byte("n"), Version: 1},
		{Group: "g", Key: []byte("k"), Value: []byte("old"), Version: 0},
	})
	if err != nil {
		t.Fatalf("Handoff: %v", err)
	}
	if hresp.GetAccepted() != 1 || hresp.GetKept() != 1 {
		t.Fatalf("Handoff = %v, want accepted 1 kept 1", hresp)
	}
	// A receiver that is leaving refuses the hand-off as such.
	_, err = c.Handoff(ctx, addr, []*peerpb.Entry{{Group: "g", Key: []byte("leaving")}})
	if !errors.Is(err, ErrLeaving) || IsUnreachable(err) {
		t.Fatalf("Handoff to a leaving node: %v, want ErrLeaving", err)
	}

	// WaitsFor carries what a fill waits on.
	wresp, err := c.WaitsFor(ctx, addr, &peerpb.WaitsForRequest{Header: hdr, Group: "g", Key: []byte("waiting")})
	if err != nil || len(wresp.GetWaits()) != 1 || string(wresp.GetWaits()[0].GetKey()) != "other" {
		t.Fatalf("WaitsFor = %v, %v", wresp, err)
	}

	// Reconcile carries writes both ways.
	rcresp, err := c.Reconcile(ctx, addr, &peerpb.ReconcileRequest{Header: hdr, Group: "g", Writes: []*peerpb.Write{{Key: []byte("w"), Version: 3}}})
	if err != nil || len(rcresp.GetWrites()) != 1 || rcresp.GetWrites()[0].GetVersion() != 7 {
		t.Fatalf("Reconcile = %v, %v", rcresp, err)
	}

	// Keys are bytes, not UTF-8 strings.
	bad := []byte("\xff\xfe\x80")
	resp, err = c.Get(ctx, addr, &peerpb.GetRequest{Header: hdr, Group: "g", Key: bad})
	if err != nil || !bytes.Equal(resp.GetEntry().GetKey(), bad) {
		t.Fatalf("Get of a non-UTF-8 key = %v, %v", resp, err)
	}
}

func TestSetWithoutEntryIsInvalid(t *testing.T) {
	addr, _ := serve(t, newFakeHandler(), ServerConfig{})
	c := newClient(t, ClientConfig{})
	_, err := c.Set(context.Background(), addr, &peerpb.SetRequest{})
	if !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("Set without entry: %v, want ErrInvalidArgument", err)
	}
}

func TestHandoff(t *testing.T) {
	h := newFakeHandler()
	addr, _ := serve(t, h, ServerConfig{})
	c := newClient(t, ClientConfig{})
	ctx := context.Background()

	// The receiver already holds keys 0..49 at version 10: entries 0..49
	// (version 5) are kept, 50..199 stored.
	const n = 200
	for i := range 50 {
		id := fmt.Sprintf("g/k%d", i)
		h.entries[id] = &peerpb.Entry{Group: "g", Key: []byte(fmt.Sprintf("k%d", i)), Version: 10}
	}
	entries := make([]*peerpb.Entry, n)
	for i := range entries {
		entries[i] = &peerpb.Entry{Group: "g", Key: []byte(fmt.Sprintf("k%d", i)), Value: []byte("x"), Version: 5}
	}
	resp, err := c.Handoff(ctx, addr, entries)
	if err != nil {
		t.Fatalf("Handoff: %v", err)
	}
	if resp.GetAccepted() != n-50 || resp.GetKept() != 50 {
		t.Fatalf("Handoff = accepted %d kept %d, want %d and 50", resp.GetAccepted(), resp.GetKept(), n-50)
	}
	h.mu.Lock()
	stored := len(h.entries)
	h.mu.Unlock()
	if stored != n {
		t.Fatalf("receiver holds %d entries, want %d", stored, n)
	}

	// A Handler error ends the stream and reaches the sender.
	_, err = c.Handoff(ctx, addr, []*peerpb.Entry{{Group: "g", Key: []byte("a")}, {Group: "g", Key: []byte("fail")}, {Group: "g", Key: []byte("b")}})
	var re *RemoteError
	if !errors.As(err, &re) || re.Code != "Internal" || re.Msg != "disk full" || IsUnreachable(err) {
		t.Fatalf("Handoff with failing entry: %v, want RemoteError Internal \"disk full\"", err)
	}

	// An empty handoff is an empty answer; a nil entry is refused locally.
	resp, err = c.Handoff(ctx, addr, nil)
	if err != nil || resp.GetAccepted() != 0 || resp.GetKept() != 0 {
		t.Fatalf("empty Handoff = %v, %v", resp, err)
	}
	if _, err := c.Handoff(ctx, addr, []*peerpb.Entry{nil}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("Handoff of nil entry: %v, want ErrInvalidArgument", err)
	}
}
