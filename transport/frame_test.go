package transport

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/protobuf/proto"

	"github.com/corralcache/corral/transport/peerpb"
)

// tapDialer dials TCP and records every connection's bytes.
type tapDialer struct {
	mu   sync.Mutex
	taps []*frameTap
}

func (d *tapDialer) dial(ctx context.Context, addr string) (net.Conn, error) {
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	tap := &frameTap{Conn: conn}
	d.mu.Lock()
	d.taps = append(d.taps, tap)
	d.mu.Unlock()
	return tap, nil
}

// sent returns what each connection sent so far, in the order they were made.
func (d *tapDialer) sent() [][]byte {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out [][]byte
	for _, t := range d.taps {
		t.mu.Lock()
		out = append(out, bytes.Clone(t.sent))
		t.mu.Unlock()
	}
	return out
}

// serveUnframed is serve for a Server that does not speak framed streams: an older corral's.
func serveUnframed(t *testing.T, h Handler) string { return serveUnframedWith(t, h, ServerConfig{}) }

// serveUnframedWith is serveUnframed with cfg.
func serveUnframedWith(t *testing.T, h Handler, cfg ServerConfig) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := NewServer(h, cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv.framing = false
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	t.Cleanup(func() {
		srv.Stop(context.Background())
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return lis.Addr().String()
}

// Plaintext Gets travel on one framed connection, and the unary calls on a gRPC connection
// to the same port.
func TestGetsTravelFramed(t *testing.T) {
	h := newHitHandler()
	addr, _ := serve(t, h, ServerConfig{})
	var d tapDialer
	// No silence pings: a slow run would add a ping's frame (id 0) to the Gets.
	c := newClient(t, ClientConfig{Dialer: d.dial, SilentPeerTimeout: -1})
	ctx := context.Background()
	if _, err := c.Set(ctx, addr, &peerpb.SetRequest{Entry: &peerpb.Entry{Group: "g", Key: []byte("k"), Value: []byte("v")}}); err != nil {
		t.Fatal(err)
	}
	const gets = 50
	for i := range gets {
		resp, err := getKey(c, ctx, addr, "k")
		if err != nil {
			t.Fatalf("Get %d: %v", i, err)
		}
		if string(resp.GetEntry().GetValue()) != "v" {
			t.Fatalf("Get %d: value %q, want v", i, resp.GetEntry().GetValue())
		}
	}
	sent := d.sent()
	if len(sent) != 2 {
		t.Fatalf("%d connections made, want 2 (gRPC for Set, framed for the Gets)", len(sent))
	}
	var framedConn, grpcConn []byte
	for _, b := range sent {
		switch {
		case bytes.HasPrefix(b, []byte(framePreface)):
			framedConn = b
		case bytes.HasPrefix(b, []byte(http2.ClientPreface)):
			grpcConn = b
		}
	}
	if framedConn == nil || grpcConn == nil {
		t.Fatalf("want one framed and one HTTP/2 connection; connections start with %q and %q", sent[0][:8], sent[1][:8])
	}
	// The framed connection carries exactly the Gets, as GetCalls with distinct ids.
	r := newFramed[*peerpb.GetReply](nil, bufio.NewReader(bytes.NewReader(framedConn[len(framePreface):])), DefaultMaxMessageSize, newGetCall)
	ids := map[uint64]bool{}
	for {
		call, err := r.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("the framed connection's bytes: %v", err)
		}
		if string(call.GetRequest().GetKey()) != "k" || ids[call.GetId()] {
			t.Fatalf("unexpected frame %v", call)
		}
		ids[call.GetId()] = true
	}
	if len(ids) != gets {
		t.Fatalf("%d Gets on the framed connection, want %d", len(ids), gets)
	}
	if h.hits.Load() != gets {
		t.Fatalf("%d Gets answered on the receive loop as hits, want %d", h.hits.Load(), gets)
	}
}

// A peer that answers the preface with gRPC's settings (an older corral) gets its Gets on
// its gRPC stream, and is not asked for a framed stream again.
func TestFramedFallsBackToGRPCStream(t *testing.T) {
	addr := serveUnframed(t, newHitHandler())
	var d tapDialer
	c := newClient(t, ClientConfig{Dialer: d.dial})
	for i := range 20 {
		if _, err := getKey(c, context.Background(), addr, "k"); err != nil {
			t.Fatalf("Get %d: %v", i, err)
		}
	}
	sent := d.sent()
	if len(sent) != 2 || !bytes.HasPrefix(sent[0], []byte(framePreface)) || !bytes.HasPrefix(sent[1], []byte(http2.ClientPreface)) {
		t.Fatalf("want one framed attempt, then one HTTP/2 connection; got %d connections", len(sent))
	}
	p, err := c.conn(addr)
	if err != nil {
		t.Fatal(err)
	}
	if !p.unframed.Load() || p.mux.Load().framed != nil {
		t.Fatal("the Gets did not move to the gRPC stream")
	}
}

// answerOnlyPreface listens, answers the preface of each connection and then reads and
// discards everything: a peer that stopped answering.
func answerOnlyPreface(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Go(func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() {
				io.ReadFull(c, make([]byte, len(framePreface)))
				io.WriteString(c, framePreface)
				io.Copy(io.Discard, c)
			})
		}
	})
	t.Cleanup(func() {
		lis.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return lis.Addr().String()
}

// A framed stream whose peer stops answering breaks at its keepalive, failing the calls on
// it as unreachable, as gRPC's keepalive closes a connection.
func TestFramedKeepaliveBreaksSilentStream(t *testing.T) {
	addr := answerOnlyPreface(t)
	c := newClient(t, ClientConfig{})
	c.keepaliveTime, c.keepaliveTimeout = 50*time.Millisecond, 50*time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := getKey(c, ctx, addr, "k")
	if !IsUnreachable(err) || ctx.Err() != nil || !strings.Contains(err.Error(), "keepalive") {
		t.Fatalf("Get from a silent peer: %v, want unreachable by keepalive before the deadline", err)
	}
}

// A framed stream's pings are answered: an idle stream stays open through many of them.
func TestFramedKeepalivePingsAnswered(t *testing.T) {
	addr, _ := serve(t, newHitHandler(), ServerConfig{})
	c := newClient(t, ClientConfig{})
	c.keepaliveTime, c.keepaliveTimeout = 10*time.Millisecond, time.Minute
	if _, err := getKey(c, context.Background(), addr, "k"); err != nil {
		t.Fatal(err)
	}
	p, _ := c.conn(addr)
	s := p.mux.Load()
	for s.reads.Load() < 6 { // the Get's reply, then a ping's answer for each ping
		if s.broken() {
			t.Fatalf("stream broke: %v", s.failure())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := getKey(c, context.Background(), addr, "k"); err != nil {
		t.Fatal(err)
	}
	if p.mux.Load() != s {
		t.Fatal("the stream was replaced")
	}
}

// rawFramed opens a framed connection to addr by hand.
func rawFramed(t *testing.T, addr string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	io.WriteString(conn, framePreface)
	got := make([]byte, len(framePreface))
	if _, err := io.ReadFull(conn, got); err != nil || string(got) != framePreface {
		t.Fatalf("preface answer %q, %v", got, err)
	}
	return conn
}

// frameOf is m's frame: its length, then its bytes.
func frameOf(m proto.Message) []byte {
	b, _ := proto.Marshal(m)
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(b))), b...)
}

// closedByServer waits until the server closes conn (reads until EOF or reset).
func closedByServer(t *testing.T, conn net.Conn) {
	t.Helper()
	_, err := io.Copy(io.Discard, conn)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("the server kept the connection open")
	}
}

// Hostile framed input ends that connection and nothing else: a frame over MaxMessageSize, a
// frame that is not a GetCall, a preface cut short. A ping is answered.
func TestFramedHostileInput(t *testing.T) {
	var limits limitCounter
	h := newHitHandler()
	addr, _ := serve(t, h, ServerConfig{MaxMessageSize: 1 << 10, HandshakeTimeout: 200 * time.Millisecond, OnLimit: limits.hit})
	c := newClient(t, ClientConfig{})
	good := func(what string) {
		t.Helper()
		if _, err := getKey(c, context.Background(), addr, "k"); err != nil {
			t.Fatalf("a good peer after %s: %v", what, err)
		}
	}

	ping := rawFramed(t, addr)
	ping.Write(frameOf(&peerpb.GetCall{}))
	r := newFramed[*peerpb.GetCall](ping, bufio.NewReader(ping), 1<<10, newGetReply)
	if reply, err := r.Recv(); err != nil || reply.GetId() != 0 || reply.GetResponse() != nil || reply.GetFailure() != nil {
		t.Fatalf("ping answered with %v, %v; want an empty GetReply", reply, err)
	}

	big := rawFramed(t, addr)
	big.Write(binary.BigEndian.AppendUint32(nil, 1<<20))
	closedByServer(t, big)
	good("a frame over MaxMessageSize")

	bad := rawFramed(t, addr)
	bad.Write(append(binary.BigEndian.AppendUint32(nil, 3), 0xff, 0xff, 0xff))
	closedByServer(t, bad)
	good("a frame that is not a GetCall")

	half, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer half.Close()
	half.SetDeadline(time.Now().Add(30 * time.Second))
	io.WriteString(half, framePreface[:4])
	closedByServer(t, half)
	for deadline := time.Now().Add(10 * time.Second); limits.count("peer_handshake") == 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if got := limits.count("peer_handshake"); got != 1 {
		t.Fatalf("peer_handshake counted %d times, want 1", got)
	}
	good("a preface cut short")
}

// Any bytes read as frames give frames within the limit or an error, never a panic.
func FuzzFramedRecv(f *testing.F) {
	f.Add(frameOf(&peerpb.GetReply{Id: 1}))
	f.Add(frameOf(&peerpb.GetReply{Id: 7, Response: &peerpb.GetResponse{Found: true}}))
	f.Add([]byte{0, 0, 0, 3, 0xff, 0xff, 0xff})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, in []byte) {
		const limit = 1 << 10
		r := newFramed[*peerpb.GetCall](nil, bufio.NewReader(bytes.NewReader(in)), limit, newGetReply)
		for range 1000 {
			m, err := r.Recv()
			if err != nil {
				return
			}
			if proto.Size(m) > 2*limit {
				t.Fatalf("a frame of %d bytes read past the limit %d", proto.Size(m), limit)
			}
		}
	})
}

// An error whose message is not valid UTF-8 (a loader's error naming a binary key, say) reaches
// its caller, and the stream goes on serving the calls after it: proto3 refuses to marshal such
// a string, and a frame that cannot be written used to end the stream for every call on it.
func TestStreamErrorNotUTF8(t *testing.T) {
	for _, framing := range []bool{true, false} {
		t.Run(fmt.Sprint("framing=", framing), func(t *testing.T) {
			h := newHitHandler()
			h.errs["bad"] = &FillFailedError{Msg: "loader failed for key \xff\xfe"}
			addr, _ := serve(t, h, ServerConfig{})
			c := newClient(t, ClientConfig{})
			c.framing = framing
			ctx := context.Background()
			for i := range 3 {
				_, err := getKey(c, ctx, addr, "bad")
				var ffe *FillFailedError
				if !errors.As(err, &ffe) || !strings.HasPrefix(ffe.Msg, "loader failed for key") {
					t.Fatalf("Get %d of a key whose error is not UTF-8: %v, want its FillFailedError", i, err)
				}
				if _, err := getKey(c, ctx, addr, "k"); err != nil {
					t.Fatalf("Get after it: %v", err)
				}
			}
		})
	}
}

// A frame announced large is read as its bytes come: a peer that announces MaxMessageSize
// and sends a few bytes does not make the reader hold MaxMessageSize.
func TestFramedRecvGrowsWithTheBytes(t *testing.T) {
	in := append(binary.BigEndian.AppendUint32(nil, 8<<20), 1, 2, 3)
	r := newFramed[*peerpb.GetCall](nil, bufio.NewReader(bytes.NewReader(in)), 16<<20, newGetReply)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if _, err := r.Recv(); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("Recv of a cut frame: %v, want io.ErrUnexpectedEOF", err)
	}
	runtime.ReadMemStats(&after)
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 1<<20 {
		t.Fatalf("reading 3 bytes of a frame announced at 8 MiB allocated %d bytes", grew)
	}
}
