package transport

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/corralcache/corral/transport/peerpb"
)

// A peer that sends Gets and reads none of the answers does not grow the server's queue of
// answers past its bound: the receive loop stops reading, and the transport's flow control
// holds the peer back. When the peer reads, every call is answered, once, and the stream
// goes on — on both kinds of stream.
func TestStreamHoldsBackAPeerThatReadsNoAnswers(t *testing.T) {
	for _, framing := range []bool{true, false} {
		t.Run(fmt.Sprintf("framing=%v", framing), func(t *testing.T) { testHeldBack(t, framing) })
	}
}

// heldBackPeer is the raw sending and receiving side of one GetStream.
type heldBackPeer struct {
	send func(*peerpb.GetCall) error
	recv func() (*peerpb.GetReply, error)
}

func testHeldBack(t *testing.T, framing bool) {
	const valueSize = 32 << 10
	// Four times the queue's bound: a server that reads them all queues 16 MiB.
	const calls = 4 * maxQueuedAnswers / valueSize
	h := newHitHandler()
	value := bytes.Repeat([]byte{'v'}, valueSize)
	h.entries["g/big"] = &peerpb.Entry{Group: "g", Key: []byte("big"), Value: value}
	heldBack := make(chan struct{}, 1)
	testHookHeldBack = func() {
		select {
		case heldBack <- struct{}{}:
		default:
		}
	}
	t.Cleanup(func() { testHookHeldBack = nil })
	addr, _ := serve(t, h, ServerConfig{})

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var p heldBackPeer
	if framing {
		conn := rawFramed(t, addr)
		conn.SetDeadline(time.Now().Add(time.Minute))
		f := newFramed[*peerpb.GetCall](conn, bufio.NewReader(conn), DefaultMaxMessageSize, newGetReply)
		p = heldBackPeer{send: func(c *peerpb.GetCall) error { return f.Send(c) }, recv: f.Recv}
	} else {
		cc, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Close()
		s, err := peerpb.NewPeerClient(cc).GetStream(ctx)
		if err != nil {
			t.Fatal(err)
		}
		p = heldBackPeer{send: s.Send, recv: s.Recv}
	}

	sent := make(chan error, 1)
	go func() {
		for id := uint64(1); id <= calls; id++ {
			if err := p.send(&peerpb.GetCall{Id: id, Request: &peerpb.GetRequest{Group: "g", Key: []byte("big")}}); err != nil {
				sent <- err
				return
			}
		}
		sent <- nil
	}()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
wait:
	for {
		select {
		case <-heldBack:
			break wait
		case <-tick.C:
			if n := h.hits.Load(); n >= calls {
				t.Fatalf("the receive loop was never held back: it read all %d calls, none of whose answers were read", n)
			}
		case <-ctx.Done():
			t.Fatalf("the receive loop was never held back, nor read all calls (%d of %d)", h.hits.Load(), calls)
		}
	}
	if n := h.hits.Load(); n >= calls {
		t.Fatalf("held back after answering %d of %d calls", n, calls)
	}
	t.Logf("held back after answering %d of %d calls", h.hits.Load(), calls)

	seen := make(map[uint64]bool, calls)
	for len(seen) < calls {
		r, err := p.recv()
		if err != nil {
			t.Fatalf("after %d answers: %v", len(seen), err)
		}
		if id := r.GetId(); id == 0 || id > calls || seen[id] || !bytes.Equal(r.GetResponse().GetEntry().GetValue(), value) {
			t.Fatalf("answer %d: id %d (seen %v), %d bytes of value", len(seen)+1, id, seen[id], len(r.GetResponse().GetEntry().GetValue()))
		}
		seen[r.GetId()] = true
	}
	if err := <-sent; err != nil {
		t.Fatalf("send: %v", err)
	}
	// The stream goes on.
	if err := p.send(&peerpb.GetCall{Id: calls + 1, Request: &peerpb.GetRequest{Group: "g", Key: []byte("big")}}); err != nil {
		t.Fatal(err)
	}
	if r, err := p.recv(); err != nil || r.GetId() != calls+1 {
		t.Fatalf("a Get after: %v, %v", r, err)
	}
}
