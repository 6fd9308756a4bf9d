package transport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/corralcache/corral/transport/peerpb"
)

// hitHandler is a fakeHandler that answers held keys at once (HitHandler) and blocks the Get
// of "slow" until release is closed; it records the deadline and end of every "hang" Get.
type hitHandler struct {
	*fakeHandler
	release  chan struct{}
	slowIn   chan struct{} // (1) a Get of "slow" started
	hits     atomic.Int64
	hangDone chan error // (16) ctx.Err() of each "hang" Get, when it ends
	deadline chan time.Duration
}

var _ HitHandler = (*hitHandler)(nil)

func newHitHandler() *hitHandler {
	return &hitHandler{fakeHandler: newFakeHandler(), release: make(chan struct{}), slowIn: make(chan struct{}, 1),
		hangDone: make(chan error, 16), deadline: make(chan time.Duration, 16)}
}

func (h *hitHandler) GetHit(ctx context.Context, req *peerpb.GetRequest) (*peerpb.GetResponse, bool) {
	if req.GetPeek() {
		return nil, false
	}
	h.mu.Lock()
	e, ok := h.entries[req.GetGroup()+"/"+string(req.GetKey())]
	h.mu.Unlock()
	if !ok {
		return nil, false
	}
	h.hits.Add(1)
	return &peerpb.GetResponse{Entry: e, Source: peerpb.Source_HIT, Found: true}, true
}

func (h *hitHandler) Get(ctx context.Context, req *peerpb.GetRequest) (*peerpb.GetResponse, error) {
	switch string(req.GetKey()) {
	case "slow":
		select {
		case h.slowIn <- struct{}{}:
		default:
		}
		select {
		case <-h.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	case "hang":
		if d, ok := ctx.Deadline(); ok {
			h.deadline <- time.Until(d)
		} else {
			h.deadline <- 0
		}
		select {
		case h.entered <- struct{}{}:
		default:
		}
		<-ctx.Done()
		h.hangDone <- ctx.Err()
		return nil, ctx.Err()
	}
	return h.fakeHandler.Get(ctx, req)
}

func getKey(c *Client, ctx context.Context, addr, key string) (*peerpb.GetResponse, error) {
	return c.Get(ctx, addr, &peerpb.GetRequest{Group: "g", Key: []byte(key)})
}

// The Gets of many callers share one stream and each gets its own answer.
func TestStreamCarriesConcurrentGets(t *testing.T) {
	h := newHitHandler()
	addr, _ := serve(t, h, ServerConfig{})
	c := newClient(t, ClientConfig{})
	ctx := context.Background()
	const callers, each = 32, 50
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for i := range callers {
		wg.Go(func() {
			for j := range each {
				key := fmt.Sprint("k", (i*each+j)%200)
				resp, err := getKey(c, ctx, addr, key)
				if err != nil {
					errs <- err
					return
				}
				if got := string(resp.GetEntry().GetValue()); got != "v:"+key {
					errs <- fmt.Errorf("Get(%s) = %q", key, got)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	p, _ := c.conns.Load(addr)
	if s := p.(*peerConn).mux.Load(); s == nil || s.broken() || s.nextID.Load() != callers*each {
		t.Fatalf("stream %v: want one open stream that carried all %d Gets", s, callers*each)
	}
	if h.hits.Load() == 0 {
		t.Fatal("no Get was answered as a hit on the receive loop")
	}
}

// A slow fill runs off the receive loop: the hits queued behind it on the stream are answered
// while it waits.
func TestStreamSlowFillDoesNotDelayHits(t *testing.T) {
	h := newHitHandler()
	addr, _ := serve(t, h, ServerConfig{})
	c := newClient(t, ClientConfig{})
	ctx := context.Background()
	if _, err := getKey(c, ctx, addr, "held"); err != nil { // fill it once
		t.Fatal(err)
	}
	slow := make(chan error, 1)
	go func() {
		_, err := getKey(c, ctx, addr, "slow")
		slow <- err
	}()
	<-h.slowIn
	for i := range 100 {
		if _, err := getKey(c, ctx, addr, "held"); err != nil {
			t.Fatalf("hit %d behind a slow fill: %v", i, err)
		}
	}
	select {
	case err := <-slow:
		t.Fatalf("the slow Get ended before it was released: %v", err)
	default:
	}
	close(h.release)
	if err := <-slow; err != nil {
		t.Fatal(err)
	}
}

// A caller that leaves sends a cancel: the receiver's work for it ends, the caller gets its
// own ctx.Err(), and the stream goes on.
func TestStreamCancelReachesTheReceiver(t *testing.T) {
	h := newHitHandler()
	addr, _ := serve(t, h, ServerConfig{})
	c := newClient(t, ClientConfig{})
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-h.entered
		cancel()
	}()
	if _, err := getKey(c, ctx, addr, "hang"); err != context.Canceled {
		t.Fatalf("got %v, want exactly context.Canceled", err)
	}
	if err := <-h.hangDone; !errors.Is(err, context.Canceled) {
		t.Fatalf("the receiver's Get ended with %v, want context.Canceled", err)
	}
	if _, err := getKey(c, context.Background(), addr, "after"); err != nil {
		t.Fatalf("Get after a cancelled one: %v", err)
	}
}

// A call's deadline travels with it: the receiver's Get runs under it.
func TestStreamDeadlineTravels(t *testing.T) {
	h := newHitHandler()
	addr, _ := serve(t, h, ServerConfig{})
	c := newClient(t, ClientConfig{CallTimeout: time.Minute, SilentPeerTimeout: -1})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := getKey(c, ctx, addr, "hang")
		done <- err
	}()
	d := <-h.deadline
	if d <= 0 || d > 2*time.Second {
		t.Fatalf("receiver's deadline in %v, want within the caller's 2s", d)
	}
	if err := <-done; err != context.DeadlineExceeded {
		t.Fatalf("got %v, want exactly context.DeadlineExceeded", err)
	}
	// It ends at its own deadline, or a moment before at the cancel the caller sends when
	// its deadline passes, whichever reaches it first.
	if err := <-h.hangDone; !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
		t.Fatalf("receiver's Get ended with %v, want its deadline", err)
	}
}

// When the stream breaks, every call waiting on it fails at once as unreachable (so that
// failover starts now, not at each call's deadline), and the next Get opens a new stream.
func TestStreamBreakFailsEveryCallAtOnce(t *testing.T) {
	h := newHitHandler()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	srv := serveOn(t, h, ServerConfig{}, lis)
	c := newClient(t, ClientConfig{CallTimeout: time.Minute})
	const waiting = 10
	errs := make(chan error, waiting)
	for range waiting {
		go func() {
			_, err := getKey(c, context.Background(), addr, "hang")
			errs <- err
		}()
	}
	for range waiting {
		<-h.deadline // every call reached the receiver
	}
	start := time.Now()
	stopCtx, cancel := context.WithCancel(context.Background())
	cancel() // hard: the connection is closed under the calls
	srv.Stop(stopCtx)
	for range waiting {
		if err := <-errs; !IsUnreachable(err) {
			t.Fatalf("call on a broken stream: %v, want unreachable", err)
		}
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("calls failed %v after the break, want at once", took)
	}

	// A new server at the same address: the next Get opens a new stream.
	lis2, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("address taken again: %v", err)
	}
	serveOn(t, newHitHandler(), ServerConfig{}, lis2)
	var resp *peerpb.GetResponse
	for deadline := time.Now().Add(30 * time.Second); ; {
		if resp, err = getKey(c, context.Background(), addr, "again"); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond) // the connection's reconnect backoff
	}
	if err != nil || string(resp.GetEntry().GetValue()) != "v:again" {
		t.Fatalf("Get after the peer came back: %v %v", resp, err)
	}
}

// Forget closes the stream: calls waiting on it fail as unreachable at once.
func TestStreamForgetFailsWaitingCalls(t *testing.T) {
	h := newHitHandler()
	addr, _ := serve(t, h, ServerConfig{})
	c := newClient(t, ClientConfig{CallTimeout: time.Minute})
	done := make(chan error, 1)
	go func() {
		_, err := getKey(c, context.Background(), addr, "hang")
		done <- err
	}()
	<-h.entered
	c.Forget(addr)
	if err := <-done; !IsUnreachable(err) {
		t.Fatalf("call after Forget: %v, want unreachable", err)
	}
	if err := <-h.hangDone; !errors.Is(err, context.Canceled) {
		t.Fatalf("receiver's Get ended with %v, want it cancelled with the stream", err)
	}
}

// Past the receiver's bound of calls in flight, a call is answered with ErrStreamFull; it is
// an answer (not unreachable), and the calls in flight are untouched.
func TestStreamFull(t *testing.T) {
	h := newHitHandler()
	addr, _ := serve(t, h, ServerConfig{MaxStreamCalls: 2})
	c := newClient(t, ClientConfig{MaxStreamCalls: 10, CallTimeout: time.Minute, SilentPeerTimeout: -1})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	held := make(chan error, 2)
	for range 2 {
		go func() {
			_, err := getKey(c, ctx, addr, "hang")
			held <- err
		}()
		<-h.deadline
	}
	_, err := getKey(c, context.Background(), addr, "third")
	if !errors.Is(err, ErrStreamFull) || IsUnreachable(err) {
		t.Fatalf("third call: %v, want ErrStreamFull", err)
	}
	t.Log(err)
	cancel()
	for range 2 {
		if err := <-held; err != context.Canceled {
			t.Fatalf("held call: %v", err)
		}
	}
	// The slots come free with the cancels.
	for deadline := time.Now().Add(10 * time.Second); ; {
		if _, err = getKey(c, context.Background(), addr, "fourth"); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Fatalf("call after the held ones left: %v", err)
	}
}

// A Client waits for one of its own slots: with one slot taken, a second call waits, and
// leaves at its deadline.
func TestStreamClientWaitsForASlot(t *testing.T) {
	h := newHitHandler()
	addr, _ := serve(t, h, ServerConfig{})
	c := newClient(t, ClientConfig{MaxStreamCalls: 1, CallTimeout: time.Minute})
	ctx, cancel := context.WithCancel(context.Background())
	held := make(chan error, 1)
	go func() {
		_, err := getKey(c, ctx, addr, "hang")
		held <- err
	}()
	<-h.deadline
	short, cancelShort := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancelShort()
	if _, err := getKey(c, short, addr, "waits"); err != context.DeadlineExceeded {
		t.Fatalf("second call: %v, want its own deadline while the slot is taken", err)
	}
	cancel()
	<-held
	if _, err := getKey(c, context.Background(), addr, "now"); err != nil {
		t.Fatalf("call with the slot free: %v", err)
	}
}

// unaryOnly serves the peer protocol as a corral without GetStream did.
type unaryOnly struct {
	peerpb.UnimplementedPeerServer
	h *fakeHandler
}

func (u unaryOnly) Get(ctx context.Context, req *peerpb.GetRequest) (*peerpb.GetResponse, error) {
	return u.h.Get(ctx, req)
}

// A peer without GetStream (an older corral, during a rolling upgrade) is asked with unary
// calls.
func TestStreamFallsBackToUnary(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	peerpb.RegisterPeerServer(gs, unaryOnly{h: newFakeHandler()})
	go gs.Serve(lis)
	defer gs.Stop()
	c := newClient(t, ClientConfig{})
	for i := range 3 {
		resp, err := getKey(c, context.Background(), lis.Addr().String(), "old")
		if err != nil || string(resp.GetEntry().GetValue()) != "v:old" {
			t.Fatalf("Get %d from a unary-only peer: %v %v", i, resp, err)
		}
	}
	p, _ := c.conns.Load(lis.Addr().String())
	if !p.(*peerConn).unaryGets.Load() {
		t.Fatal("the client did not switch to unary Gets")
	}
}

// A graceful Stop finishes the Gets running on streams, then ends them.
func TestStreamGracefulStopFinishesCalls(t *testing.T) {
	h := newHitHandler()
	addr, srv := serve(t, h, ServerConfig{})
	c := newClient(t, ClientConfig{})
	done := make(chan error, 1)
	go func() {
		_, err := getKey(c, context.Background(), addr, "slow")
		done <- err
	}()
	<-h.slowIn
	stopped := make(chan struct{})
	go func() {
		srv.Stop(context.Background())
		close(stopped)
	}()
	select {
	case <-stopped:
		t.Fatal("Stop returned while a Get ran")
	case <-time.After(50 * time.Millisecond):
	}
	close(h.release)
	if err := <-done; err != nil {
		t.Fatalf("the running Get: %v, want its answer", err)
	}
	<-stopped
	if _, err := getKey(c, context.Background(), addr, "later"); !IsUnreachable(err) {
		t.Fatalf("Get after Stop: %v, want unreachable", err)
	}
}

// A value held by the peer that is larger than it sends on the stream arrives whole through
// a unary call, and the stream goes on carrying the small ones.
func TestStreamLargeHeldValueAsksUnary(t *testing.T) {
	h := newHitHandler()
	addr, _ := serve(t, h, ServerConfig{MaxStreamAnswer: 1000})
	c := newClient(t, ClientConfig{})
	ctx := context.Background()
	big := make([]byte, 5000)
	for i := range big {
		big[i] = byte(i)
	}
	if _, err := c.Set(ctx, addr, &peerpb.SetRequest{Entry: &peerpb.Entry{Group: "g", Key: []byte("big"), Value: big}}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		resp, err := getKey(c, ctx, addr, "big")
		if err != nil || !bytes.Equal(resp.GetEntry().GetValue(), big) {
			t.Fatalf("Get of a large held value: %d bytes, %v", len(resp.GetEntry().GetValue()), err)
		}
		if resp, err := getKey(c, ctx, addr, "small"); err != nil || string(resp.GetEntry().GetValue()) != "v:small" {
			t.Fatalf("small Get beside it: %v %v", resp, err)
		}
	}
}

// pausableProxy forwards TCP connections to target; while paused it reads nothing from the
// client, so the client's frames pile up in its HTTP/2 window and its socket, as before a
// paused (SIGSTOPped) peer.
type pausableProxy struct {
	lis    net.Listener
	mu     sync.Mutex
	paused bool
	resume chan struct{}
	conns  []net.Conn
}

func newPausableProxy(t *testing.T, target string) *pausableProxy {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &pausableProxy{lis: lis, resume: make(chan struct{})}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		p.unpause()
		lis.Close()
		p.mu.Lock()
		for _, c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			in, err := lis.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				in.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, in, out)
			p.mu.Unlock()
			wg.Go(func() { // client → server, held while paused
				buf := make([]byte, 32<<10)
				for {
					p.mu.Lock()
					resume := p.resume
					paused := p.paused
					p.mu.Unlock()
					if paused {
						<-resume
					}
					n, err := in.Read(buf)
					if n > 0 {
						out.Write(buf[:n])
					}
					if err != nil {
						out.Close()
						return
					}
				}
			})
			wg.Go(func() { // server → client
				buf := make([]byte, 32<<10)
				for {
					n, err := out.Read(buf)
					if n > 0 {
						in.Write(buf[:n])
					}
					if err != nil {
						in.Close()
						return
					}
				}
			})
		}
	})
	return p
}

func (p *pausableProxy) pause() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.paused {
		p.paused, p.resume = true, make(chan struct{})
	}
}

func (p *pausableProxy) unpause() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.paused {
		p.paused = false
		close(p.resume)
	}
}

// Callers of a peer that reads nothing leave at their deadlines, however much they send: a
// caller sends its own frame only while few small ones are in flight; the rest go through the
// writer, whose Send is the one that waits for the peer to read. 1000 callers with 60 KiB
// keys send 60 MB to a paused peer — past its HTTP/2 window, grpc-go's write quota and the
// sockets' buffers. (Sent by the callers themselves, the last of them waited 25 s.)
func TestStreamCallersLeaveAPeerThatReadsNothing(t *testing.T) {
	h := newHitHandler()
	addr, _ := serve(t, h, ServerConfig{})
	proxy := newPausableProxy(t, addr)
	c := newClient(t, ClientConfig{CallTimeout: time.Minute})
	paddr := proxy.lis.Addr().String()
	if _, err := getKey(c, context.Background(), paddr, "open"); err != nil {
		t.Fatal(err) // the stream is open
	}
	proxy.pause()
	const callers = 1000
	const deadline = 300 * time.Millisecond
	done := make(chan time.Duration, callers)
	key := bytes.Repeat([]byte("k"), 60<<10)
	for range callers {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), deadline)
			defer cancel()
			start := time.Now()
			_, err := c.Get(ctx, paddr, &peerpb.GetRequest{Group: "g", Key: key})
			if err != nil && !IsUnreachable(err) && ctx.Err() == nil {
				t.Errorf("Get: %v", err)
			}
			done <- time.Since(start)
		}()
	}
	var slowest time.Duration
	timeout := time.After(30 * time.Second)
	for i := range callers {
		select {
		case d := <-done:
			slowest = max(slowest, d)
		case <-timeout:
			proxy.unpause() // let the stuck callers go, so the test ends
			t.Fatalf("%d of %d callers still waiting 30 s after their %v deadline: stuck in a Send to a peer that reads nothing", callers-i, callers, deadline)
		}
	}
	// Generous for a busy machine: a stuck caller waits until the proxy resumes.
	if slowest > deadline+5*time.Second {
		t.Fatalf("slowest caller took %v, deadline %v", slowest, deadline)
	}
}
