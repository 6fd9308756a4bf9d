package httpapi

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/corralcache/corral/cmd/corral/internal/sockfd"
)

// Server is the API served on a listener: net/http, with a front of the API's own before it
// for the hit path (front.go). Every connection is the front's first: it answers the plain
// GETs of keys it can parse whole, and hands the connection to net/http — with the bytes it
// has read — at the first request it does not take, for good. Measured on 2 cores under wrk at
// 64 connections, net/http spent about 13 µs of CPU a hit beyond what a plain Go server spends
// (its per-request goroutine and read that watch for a client that hangs up, header maps,
// contexts): with it, a node answered 0.6–0.7× nginx's hits a second; a plain Go server
// answering the same bytes, 1.2× (docs/performance.md).
type Server struct {
	api   *API
	http  *http.Server
	hand  *handoff
	serve http.Handler // the API as net/http serves it, for the front's requests too
	// atOnce is the handler of the event loops' requests (API.atOnceHandler).
	atOnce http.Handler

	nloops int         // the event loops Serve starts (Config.Loops)
	loops  []*httpLoop // event loops (loop.go); none: every connection on a goroutine of its own
	next   int         // the loop the next connection goes to; Serve's

	mu     sync.Mutex // guards lis, loops, conns and closed
	lis    net.Listener
	conns  map[*frontConn]bool // the front's connections; true while one waits for a request
	closed bool
	wg     sync.WaitGroup // the front's connections' goroutines
}

func newServer(a *API, srv *http.Server) *Server {
	return &Server{api: a, http: srv, serve: srv.Handler, atOnce: a.atOnceHandler(), nloops: a.cfg.Loops, conns: map[*frontConn]bool{}}
}

// Serve accepts connections on lis until Shutdown or Close, and returns http.ErrServerClosed
// then, or the listener's error.
func (s *Server) Serve(lis net.Listener) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		lis.Close()
		return http.ErrServerClosed
	}
	s.lis = lis
	s.hand = &handoff{addr: lis.Addr(), ch: make(chan net.Conn), done: make(chan struct{})}
	if n := s.nloops; n > 0 && s.api.cfg.Token == nil && s.api.tracer == nil {
		s.loops = startLoops(s, n)
	}
	loops := s.loops
	s.mu.Unlock()
	served := make(chan error, 1)
	go func() { served <- s.http.Serve(s.hand) }()
	var backoff time.Duration
	for {
		c, err := lis.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() && !s.isClosed() {
				// Out of file descriptors, say: wait a little rather than spin, as net/http does.
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				time.Sleep(backoff)
				continue
			}
			s.hand.Close()
			<-served
			if s.isClosed() {
				return http.ErrServerClosed
			}
			return err
		}
		backoff = 0
		if len(loops) > 0 {
			l := loops[s.next%len(loops)]
			s.next++
			remote := c.RemoteAddr().String()
			if fd, err := sockfd.Take(c); err == nil {
				if l.give(fd, remote, false) {
					continue
				}
				// The loop is stopping, or broke: a goroutine serves the connection.
				c, err = sockfd.Conn(fd)
				sockfd.Close(fd)
				if err != nil {
					continue
				}
			}
		}
		s.goServe(newFrontConn(s, c))
	}
}

// goServe serves fc on a goroutine of its own, unless the server is closing (fc's
// connection is closed then).
func (s *Server) goServe(fc *frontConn) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		fc.cancel()
		fc.c.Close()
		return
	}
	s.conns[fc] = true
	s.wg.Add(1)
	s.mu.Unlock()
	go fc.serve()
}

func (s *Server) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// Shutdown stops the server gracefully, as http.Server's Shutdown does: no new connections,
// idle ones closed, and it waits for the requests being served until ctx ends.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	lis := s.lis
	for fc, idle := range s.conns {
		if idle {
			fc.c.Close()
		}
	}
	for _, l := range s.loops {
		l.stop() // a loop's connections are idle between its reads: it closes them
	}
	s.mu.Unlock()
	if lis != nil {
		lis.Close()
	}
	err := s.http.Shutdown(ctx)
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close stops the server at once: every connection is closed, as http.Server's Close does.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	lis := s.lis
	for fc := range s.conns {
		fc.c.Close()
	}
	for _, l := range s.loops {
		l.stop()
	}
	s.mu.Unlock()
	if lis != nil {
		lis.Close()
	}
	return s.http.Close()
}

// setIdle records whether fc waits for a request. It reports false once the server is
// closing: fc ends rather than wait.
func (s *Server) setIdle(fc *frontConn, idle bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.conns[fc] = idle
	return true
}

func (s *Server) forget(fc *frontConn) {
	s.mu.Lock()
	delete(s.conns, fc)
	s.mu.Unlock()
}

// handoff is the listener net/http serves: the connections the front handed over.
type handoff struct {
	addr net.Addr
	ch   chan net.Conn // unbuffered: give waits for net/http's accept loop
	done chan struct{}
	once sync.Once
}

var _ net.Listener = (*handoff)(nil)

func (h *handoff) Accept() (net.Conn, error) {
	select {
	case c := <-h.ch:
		return c, nil
	case <-h.done:
		return nil, net.ErrClosed
	}
}

func (h *handoff) Close() error {
	h.once.Do(func() { close(h.done) })
	return nil
}

func (h *handoff) Addr() net.Addr { return h.addr }

// give hands c to net/http. It reports false when net/http no longer accepts.
func (h *handoff) give(c net.Conn) bool {
	select {
	case h.ch <- c:
		return true
	case <-h.done:
		return false
	}
}
