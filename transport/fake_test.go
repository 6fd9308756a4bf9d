package transport

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/corralcache/corral/transport/peerpb"
)

// fakeHandler is a map-backed Handler: enough of an owner to exercise the
// real transport. Get fills a missing key with "v:"+key; a few keys behave
// specially (see Get).
type fakeHandler struct {
	// errs maps a key to the error Get returns for it. Written before the
	// server starts, read-only after.
	errs map[string]error

	// entered receives once each time a Get for "hang" starts, so a test
	// knows the request reached the server. Buffered by one so that the
	// handler never blocks on a test that does not read it.
	entered chan struct{}

	mu sync.Mutex // guards the fields below
	// entries maps "group/key" to its entry.
	entries map[string]*peerpb.Entry
	// version is the last version handed out.
	version uint64
	// invalidated lists the "group/key" of every Invalidate, in order.
	invalidated []string
	// fills counts Gets that filled.
	fills int
}

var _ Handler = (*fakeHandler)(nil)

func newFakeHandler() *fakeHandler {
	return &fakeHandler{
		errs:    map[string]error{},
		entered: make(chan struct{}, 1),
		entries: map[string]*peerpb.Entry{},
	}
}

func (h *fakeHandler) Get(ctx context.Context, req *peerpb.GetRequest) (*peerpb.GetResponse, error) {
	switch string(req.GetKey()) {
	case "hang": // answer only when the caller gives up
		select {
		case h.entered <- struct{}{}:
		default:
		}
		<-ctx.Done()
		return nil, ctx.Err()
	case "panic":
		panic("boom")
	case "nil": // a nil response with no error
		return nil, nil
	}
	if err, ok := h.errs[string(req.GetKey())]; ok {
		return nil, err
	}
	id := req.GetGroup() + "/" + string(req.GetKey())
	h.mu.Lock()
	defer h.mu.Unlock()
	if e, ok := h.entries[id]; ok {
		return &peerpb.GetResponse{Entry: e, Source: peerpb.Source_HIT, Found: true}, nil
	}
	if req.GetPeek() {
		return &peerpb.GetResponse{}, nil
	}
	h.version++
	h.fills++
	e := &peerpb.Entry{
		Group: req.GetGroup(), Key: req.GetKey(), Value: []byte("v:" + string(req.GetKey())),
		FreshForNanos: int64(time.Minute), Version: h.version, FillNanos: 1000,
	}
	h.entries[id] = e
	return &peerpb.GetResponse{Entry: e, Source: peerpb.Source_FILL, Found: true}, nil
}

func (h *fakeHandler) Set(ctx context.Context, req *peerpb.SetRequest) (*peerpb.SetResponse, error) {
	e := req.GetEntry()
	if len(string(e.GetKey())) > 4096 {
		return nil, errors.Join(ErrInvalidArgument, errors.New("key too long"))
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.version++
	stored := &peerpb.Entry{
		Group: e.GetGroup(), Key: e.GetKey(), Value: e.GetValue(),
		FreshForNanos: e.GetFreshForNanos(), StaleForNanos: e.GetStaleForNanos(), Version: h.version,
	}
	h.entries[e.GetGroup()+"/"+string(e.GetKey())] = stored
	return &peerpb.SetResponse{Version: h.version}, nil
}

func (h *fakeHandler) Remove(ctx context.Context, req *peerpb.RemoveRequest) (*peerpb.RemoveResponse, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.version++
	delete(h.entries, req.GetGroup()+"/"+string(req.GetKey()))
	return &peerpb.RemoveResponse{Version: h.version}, nil
}

func (h *fakeHandler) Invalidate(ctx context.Context, req *peerpb.InvalidateRequest) (*peerpb.InvalidateResponse, error) {
	if req.GetGroup() == "unknown" {
		return nil, errors.Join(ErrUnknownGroup, errors.New(`group "unknown"`))
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.invalidated = append(h.invalidated, req.GetGroup()+"/"+string(req.GetKey()))
	// Members listed in told get nothing; "unreached" stands for one that could not be told.
	return &peerpb.InvalidateResponse{Unreached: []string{"unreached"}}, nil
}

// Reconcile answers with one write of "remembered", whatever it is sent.
func (h *fakeHandler) Reconcile(ctx context.Context, req *peerpb.ReconcileRequest) (*peerpb.ReconcileResponse, error) {
	return &peerpb.ReconcileResponse{Writes: []*peerpb.Write{{Key: []byte("remembered"), Version: 7}}}, nil
}

// WaitsFor answers that the fill of "waiting" waits on g/"other" at 10.0.0.1:7947.
func (h *fakeHandler) WaitsFor(ctx context.Context, req *peerpb.WaitsForRequest) (*peerpb.WaitsForResponse, error) {
	if string(req.GetKey()) != "waiting" {
		return nil, nil
	}
	return &peerpb.WaitsForResponse{Waits: []*peerpb.Wait{{Group: "g", Key: []byte("other"), Addr: "10.0.0.1:7947"}}}, nil
}

// Handoff stores an entry newer than the one held and keeps the held one
// otherwise; a key "fail" ends the stream with an error.
func (h *fakeHandler) Handoff(ctx context.Context, e *peerpb.Entry) (bool, error) {
	switch string(e.GetKey()) {
	case "fail":
		return false, errors.New("disk full")
	case "leaving":
		return false, ErrLeaving
	}
	id := e.GetGroup() + "/" + string(e.GetKey())
	h.mu.Lock()
	defer h.mu.Unlock()
	if old, ok := h.entries[id]; ok && old.GetVersion() >= e.GetVersion() {
		return false, nil
	}
	h.entries[id] = e
	return true, nil
}

// serve serves h on a fresh 127.0.0.1 port until the test ends (or the
// test stops the server earlier) and returns the address and the server.
func serve(tb testing.TB, h Handler, cfg ServerConfig) (string, *Server) {
	tb.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	return lis.Addr().String(), serveOn(tb, h, cfg, lis)
}

// serveOn serves h on lis until the test ends (or the test stops the
// server earlier); the cleanup stops it and waits for Serve to return.
func serveOn(tb testing.TB, h Handler, cfg ServerConfig, lis net.Listener) *Server {
	tb.Helper()
	srv, err := NewServer(h, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Stop(ctx)
		if err := <-served; err != nil {
			tb.Errorf("Serve: %v", err)
		}
	})
	return srv
}

func newClient(tb testing.TB, cfg ClientConfig) *Client {
	tb.Helper()
	if cfg.SilentPeerTimeout == 0 {
		// A test of something else must not read a stall of the busy machine running it —
		// 300 ms without a turn of the peer's goroutines, under -race — as a silent peer; the
		// tests of silence set the timeout they test.
		cfg.SilentPeerTimeout = time.Minute
	}
	c, err := NewClient(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := c.Close(); err != nil {
			tb.Errorf("Client.Close: %v", err)
		}
	})
	return c
}

// countingListener counts accepted connections and reports each one closed.
type countingListener struct {
	net.Listener
	mu       sync.Mutex // guards accepted
	accepted int
	// closed receives once per closed connection. Buffered so that the
	// server's closing never waits on the test; tests make far fewer than
	// 64 connections.
	closed chan struct{}
}

func newCountingListener(tb testing.TB) *countingListener {
	tb.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	return &countingListener{Listener: lis, closed: make(chan struct{}, 64)}
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	l.accepted++
	l.mu.Unlock()
	return &trackedConn{Conn: c, closed: l.closed}, nil
}

func (l *countingListener) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.accepted
}

type trackedConn struct {
	net.Conn
	once   sync.Once
	closed chan<- struct{}
}

func (c *trackedConn) Close() error {
	c.once.Do(func() { c.closed <- struct{}{} })
	return c.Conn.Close()
}

// waitClosed waits until l has seen n connections closed.
func waitClosed(tb testing.TB, l *countingListener, n int) {
	tb.Helper()
	deadline := time.After(5 * time.Second)
	for range n {
		select {
		case <-l.closed:
		case <-deadline:
			tb.Fatalf("connection not closed within 5s")
		}
	}
}

// silentListener accepts connections and never says a word on them: a peer
// that hangs before the first byte of HTTP/2.
type silentListener struct {
	lis  net.Listener
	done chan struct{}
}

func newSilentListener(tb testing.TB) string {
	tb.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	s := &silentListener{lis: lis, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		var conns []net.Conn
		for {
			c, err := lis.Accept()
			if err != nil {
				for _, c := range conns {
					c.Close()
				}
				return
			}
			conns = append(conns, c)
		}
	}()
	tb.Cleanup(func() {
		lis.Close()
		<-s.done
	})
	return lis.Addr().String()
}

// closedAddr returns an address on which nothing listens.
func closedAddr(tb testing.TB) string {
	tb.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	return addr
}
