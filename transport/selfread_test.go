package transport

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"testing"
	"testing/synctest"
	"time"

	"github.com/corralcache/corral/memnet"
	"github.com/corralcache/corral/transport/peerpb"
)

// streamOf is the Client's open stream to addr.
func streamOf(t *testing.T, c *Client, addr string) *muxStream {
	t.Helper()
	p, err := c.conn(addr)
	if err != nil {
		t.Fatal(err)
	}
	s := p.mux.Load()
	if s == nil {
		t.Fatal("no stream")
	}
	return s
}

// A Get alone on a framed stream reads its reply itself: the stream's reader, whose hand-off
// to the caller was half a remote hit's time at one caller, never reads.
func TestCallerReadsItsOwnReply(t *testing.T) {
	addr, _ := serve(t, newHitHandler(), ServerConfig{})
	// No silence pings: a slow run would read a ping's answer besides the replies.
	c := newClient(t, ClientConfig{SilentPeerTimeout: -1})
	ctx := context.Background()
	const n = 50
	for i := range n {
		resp, err := getKey(c, ctx, addr, fmt.Sprint("k", i%5))
		if err != nil || !resp.GetFound() {
			t.Fatalf("Get %d: %v, %v", i, resp, err)
		}
	}
	s := streamOf(t, c, addr)
	if s.framed == nil {
		t.Fatal("not a framed stream")
	}
	if got := s.reads.Load(); got != n {
		t.Fatalf("%d frames read, want %d", got, n)
	}
	if got := s.readerReads.Load(); got != 0 {
		t.Fatalf("the reader read %d of %d replies, want none", got, n)
	}
}

// A caller reading for the stream hands the others their replies, and when its own ctx
// ends it leaves without breaking the stream: the others' replies still come.
func TestReadingCallerLeaves(t *testing.T) {
	h := newHitHandler()
	addr, _ := serve(t, h, ServerConfig{})
	c := newClient(t, ClientConfig{SilentPeerTimeout: -1})
	if _, err := getKey(c, context.Background(), addr, "warm"); err != nil {
		t.Fatal(err)
	}
	s := streamOf(t, c, addr)

	hangCtx, cancel := context.WithCancel(context.Background())
	hung := make(chan error, 1)
	go func() {
		_, err := getKey(c, hangCtx, addr, "hang")
		hung <- err
	}()
	<-h.entered // its call is in; its caller reads the stream (or waits for it to be read)
	// A slow Get waits while the hung one reads; the hung one leaves; the slow one's reply
	// must still be read, by the reader.
	slow := make(chan error, 1)
	go func() {
		_, err := getKey(c, context.Background(), addr, "slow")
		slow <- err
	}()
	<-h.slowIn
	for range 20 { // hits read by whoever reads, while both wait
		if _, err := getKey(c, context.Background(), addr, "warm"); err != nil {
			t.Fatalf("Get beside a reading caller: %v", err)
		}
	}
	cancel()
	if err := <-hung; err != context.Canceled {
		t.Fatalf("the hung Get: %v, want exactly context.Canceled", err)
	}
	close(h.release)
	if err := <-slow; err != nil {
		t.Fatalf("the slow Get, after the reading caller left: %v", err)
	}
	if _, err := getKey(c, context.Background(), addr, "warm"); err != nil {
		t.Fatal(err)
	}
	if s.broken() || streamOf(t, c, addr) != s {
		t.Fatal("the stream broke or was replaced")
	}
}

// A framed Recv that a read deadline ends part-way through a frame goes on from there.
func TestFramedRecvResumes(t *testing.T) {
	a, b := tcpPair(t)
	f := newFramed[*peerpb.GetCall](a, newFrameReader(a), 1<<20, newGetReply)
	// On TCP a write returns once the kernel holds the bytes: each part below is there to
	// read before Recv's deadline starts.
	resumes := func(name string, frame []byte, cut int, id uint64) {
		t.Helper()
		if _, err := b.Write(frame[:cut]); err != nil {
			t.Fatal(err)
		}
		a.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		if _, err := f.Recv(); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("%s, cut at %d: Recv = %v, want the deadline", name, cut, err)
		}
		a.SetReadDeadline(time.Time{})
		if _, err := b.Write(frame[cut:]); err != nil {
			t.Fatal(err)
		}
		got, err := f.Recv()
		if err != nil || got.GetId() != id {
			t.Fatalf("%s, cut at %d: resumed Recv = %v, %v", name, cut, got, err)
		}
	}
	small := frameOf(&peerpb.GetReply{Id: 7, Response: &peerpb.GetResponse{Found: true, Entry: &peerpb.Entry{Value: make([]byte, 300)}}})
	for _, cut := range []int{0, 2, 4, 5, len(small) - 1} {
		resumes("small", small, cut, 7)
	}
	large := frameOf(&peerpb.GetReply{Id: 8, Response: &peerpb.GetResponse{Entry: &peerpb.Entry{Value: make([]byte, 100<<10)}}})
	resumes("large", large, 50<<10, 8)
	b.Close()
	if _, err := f.Recv(); err != io.EOF {
		t.Fatalf("Recv after close: %v, want io.EOF", err)
	}
}

// tcpPair returns the two ends of a loopback TCP connection, closed when the test ends.
func tcpPair(t *testing.T) (net.Conn, net.Conn) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	a, err := net.Dial("tcp", lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	b, err := lis.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return a, b
}

// Nobody reads an idle framed stream, so a peer that closed it — restarting at the same
// address — goes unseen until the next Get, which is sent again on a new stream instead of
// failing (and failing its key over to another member).
func TestStaleIdleStreamGetsSentAgain(t *testing.T) {
	h := newHitHandler()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	srv := serveOn(t, h, ServerConfig{}, lis)
	c := newClient(t, ClientConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := getKey(c, ctx, addr, "k"); err != nil {
		t.Fatal(err)
	}
	old := streamOf(t, c, addr)
	srv.Stop(ctx)
	lis2, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	serveOn(t, h, ServerConfig{}, lis2)
	if old.broken() {
		t.Fatal("the idle stream was read") // the test would prove nothing
	}
	if _, err := getKey(c, ctx, addr, "k"); err != nil {
		t.Fatalf("Get after the peer restarted: %v", err)
	}
	if !old.broken() || streamOf(t, c, addr) == old {
		t.Fatal("the Get did not go on a new stream")
	}
}

// A Get waiting on a peer that goes silent (paused) as it arrives fails as unreachable once the
// peer has answered nothing for the silence bound: SilentPeerTimeout after it was sent, on a
// node whose timers run on time (as they do in virtual time), and at most a quarter of it more
// for a peer that goes silent later. A peer that answers its pings is filling slowly, and a Get
// on it waits on, far past that. Virtual time, on an in-memory network.
func TestStreamSilentPeer(t *testing.T) {
	for _, path := range streamPaths {
		t.Run(path.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { testStreamSilentPeer(t, path) })
		})
	}
}

// streamPath is a kind of Get stream: framed or gRPC, plaintext or TLS.
type streamPath struct {
	name         string
	framing, tls bool
}

// streamPaths are the Get streams a Client opens: framed (with or without TLS), and gRPC's
// (to a peer that does not speak framing).
var streamPaths = []streamPath{{"framed", true, false}, {"grpc", false, false}, {"framed+tls", true, true}}

// serveOnMemnet serves h on a memnet host and returns a Client (cfg, with the host's dialer)
// on another, on path, the Server's address and its host. With TLS the client does not
// check the server's certificate: in a synctest bubble the clock says 2000.
func serveOnMemnet(t *testing.T, h Handler, cfg ClientConfig, path streamPath) (*Client, string, *memnet.Host) {
	t.Helper()
	return serveOnMemnetWith(t, h, ServerConfig{}, cfg, path)
}

// serveOnMemnetWith is serveOnMemnet with the Server's config scfg.
func serveOnMemnetWith(t *testing.T, h Handler, scfg ServerConfig, cfg ClientConfig, path streamPath) (*Client, string, *memnet.Host) {
	t.Helper()
	nw, err := memnet.New(memnet.Config{})
	if err != nil {
		t.Fatal(err)
	}
	a, b := nw.NewHost(), nw.NewHost()
	lis, err := b.Listen(7000)
	if err != nil {
		t.Fatal(err)
	}
	if path.tls {
		scfg.TLS = &tls.Config{Certificates: []tls.Certificate{newTestCA(t).issue(t, "server")}}
		cfg.TLS = &tls.Config{InsecureSkipVerify: true}
	}
	serveOn(t, h, scfg, lis)
	cfg.Dialer = a.DialContext
	c := newClient(t, cfg)
	c.framing = path.framing
	return c, b.Addr(7000), b
}

func testStreamSilentPeer(t *testing.T, path streamPath) {
	const silent = 200 * time.Millisecond
	h := newHitHandler()
	c, addr, b := serveOnMemnet(t, h, ClientConfig{SilentPeerTimeout: silent}, path)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// Slow, not silent: released after 5 s, answering pings all along.
	go func() {
		<-h.slowIn
		time.Sleep(5 * time.Second)
		close(h.release)
	}()
	start := time.Now()
	if _, err := getKey(c, ctx, addr, "slow"); err != nil {
		t.Fatalf("a Get on a slow fill: %v", err)
	}
	if took := time.Since(start); took < 5*time.Second {
		t.Fatalf("the slow Get took %v", took)
	}
	s := streamOf(t, c, addr)

	// Silent: paused as the Get arrives.
	go func() {
		<-h.entered
		b.Pause()
	}()
	start = time.Now()
	_, err := getKey(c, ctx, addr, "hang")
	took := time.Since(start)
	if !IsUnreachable(err) {
		t.Fatalf("a Get on a silent peer: %v, want unreachable", err)
	}
	if took < silent || took > silent*5/4 {
		t.Fatalf("a Get on a silent peer failed after %v, want within [%v, %v]", took, silent, silent*5/4)
	}
	if !s.broken() {
		t.Fatal("the stream did not break")
	}
	b.Resume()
}
