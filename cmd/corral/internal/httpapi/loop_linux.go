//go:build linux

package httpapi

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/corralcache/corral/cmd/corral/internal/limithits"
	"github.com/corralcache/corral/cmd/corral/internal/sockfd"
)

// An event loop serves the connections that are only reading hits, as nginx's workers serve
// every connection: one goroutine waits on an epoll instance of its own for any of its
// connections to have bytes, reads them, answers every whole request the front takes (see
// frontConn.parse) of a key this node holds fresh (as its owner, or a near copy), and
// writes the responses, all without a goroutine of the connection's own being woken through
// the netpoller. Under
// wrk at 64 connections on 2 cores, a goroutine per connection had a p99 1.5–1.7× nginx's
// with nothing of corral in it; a loop, nginx's (docs/performance.md).
//
// Anything else — a request the front does not take, one of a key not held here, a request
// not yet whole, a response the client does not read fast enough — hands the connection to
// a goroutine of its own (a frontConn), with the bytes not yet answered and the responses
// not yet written, which serves it exactly as a connection that never was on a loop. The
// loop answers only what the goroutine would have answered the same way: the API's
// middleware and getKey's headers write the response (atOnceHandler), which declines what
// it could not answer at once. Timeouts: a new connection that sends nothing within
// --read-header-timeout is closed and counted as a slowloris, a kept-alive one idle for
// idleTimeout is closed, as on the goroutine; a request's first bytes hand the connection to
// its goroutine unless the request is whole.

// Scratch sizes of a loop.
const (
	loopReadBytes  = 64 << 10 // one read takes a pipeline of requests whole
	loopWriteBytes = 64 << 10 // responses that add up to this are written before more are made
	loopOutKeep    = 1 << 20  // a response scratch grown past this is dropped after use
)

// loopConn is a connection on a loop: a bare file descriptor the loop owns.
type loopConn struct {
	fd     int
	remote string
	since  int64 // when it began to wait for a request: accepted, or its last answer (Unix nanoseconds)
	kept   bool  // it has been answered a request
}

type httpLoop struct {
	s  *Server
	ep *sockfd.Poller // woken when a connection was given, or the loop is to stop

	mu       sync.Mutex // guards given, stopping, broken and closed, and wakes ep
	given    []*loopConn
	stopping bool
	broken   bool // its epoll instance failed: connections stay on their goroutines
	closed   bool // ep is closed: the loop has ended

	// The loop goroutine's own.
	conns     map[int32]*loopConn // by file descriptor
	events    []unix.EpollEvent
	in        []byte
	out       outBuffer
	fc        *frontConn // the request, writer and scratch of the loop's answers
	ao        atOnce
	now       int64 // Unix nanoseconds at the loop's last wake
	nextSweep int64

	unread atomic.Uint64 // hand-offs with responses the client had yet to read, for tests
}

// outBuffer is a loop's response scratch, which its frontConn's writer flushes to.
type outBuffer struct{ b []byte }

func (o *outBuffer) Write(p []byte) (int, error) {
	o.b = append(o.b, p...)
	return len(p), nil
}

// startLoops starts n event loops for s (s.wg waits for them); none when n is 0 or the
// system refuses one (said in the log: the connections are served on goroutines then).
func startLoops(s *Server, n int) []*httpLoop {
	var loops []*httpLoop
	for range n {
		l, err := newLoop(s)
		if err != nil {
			s.api.cfg.Log.Warn("HTTP: no event loop; every connection is served on a goroutine of its own", "err", err)
			for _, l := range loops {
				l.stop()
			}
			return nil
		}
		loops = append(loops, l)
		s.wg.Add(1)
		go l.run()
	}
	return loops
}

func newLoop(s *Server) (*httpLoop, error) {
	ep, err := sockfd.NewPoller()
	if err != nil {
		return nil, err
	}
	l := &httpLoop{s: s, ep: ep, conns: map[int32]*loopConn{},
		events: make([]unix.EpollEvent, 256), in: make([]byte, loopReadBytes)}
	fc := &frontConn{s: s, trace: make([][]byte, len(s.api.fields))}
	fc.bw = bufio.NewWriterSize(&l.out, loopWriteBytes)
	ctx := context.WithValue(context.Background(), atOnceKey{}, &l.ao)
	fc.req = (&http.Request{Method: http.MethodGet, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{}, Body: http.NoBody, URL: &fc.url}).WithContext(ctx)
	fc.w.fc, fc.w.h = fc, http.Header{}
	l.fc = fc
	return l, nil
}

// give hands the connection fd, accepted (kept false) or handed back by its goroutine, to
// the loop. It reports false when the loop is stopping: fd is the caller's still.
func (l *httpLoop) give(fd int, remote string, kept bool) bool {
	c := &loopConn{fd: fd, remote: remote, since: time.Now().UnixNano(), kept: kept}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopping {
		return false
	}
	l.given = append(l.given, c)
	l.poke()
	return true
}

// isBroken reports whether the loop's epoll instance failed.
func (l *httpLoop) isBroken() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.broken
}

// stop makes the loop close its connections and end.
func (l *httpLoop) stop() {
	l.mu.Lock()
	l.stopping = true
	l.poke()
	l.mu.Unlock()
}

// poke wakes the loop, if it has not ended; l.mu is held.
func (l *httpLoop) poke() {
	if !l.closed {
		l.ep.Wake()
	}
}

func (l *httpLoop) run() {
	defer l.s.wg.Done()
	defer func() {
		for _, c := range l.conns {
			l.end(c)
		}
		l.mu.Lock()
		l.closed, l.stopping = true, true
		given := l.given
		l.given = nil
		l.ep.Close()
		l.mu.Unlock()
		for _, c := range given {
			sockfd.Close(c.fd)
		}
	}()
	for {
		timeout := -1
		if len(l.conns) > 0 {
			timeout = int(max((l.nextSweep-time.Now().UnixNano())/int64(time.Millisecond), 1))
		}
		n, err := l.ep.Wait(l.events, timeout)
		if err != nil && err != unix.EINTR {
			// Only a broken epoll instance fails so: its connections go to goroutines of
			// their own, and so do those accepted from now on (give refuses them).
			l.s.api.cfg.Log.Error("HTTP: event loop failed; its connections are served on goroutines", "err", err)
			l.mu.Lock()
			l.stopping, l.broken = true, true
			l.mu.Unlock()
			for _, c := range l.conns {
				l.handOff(c, nil)
			}
			return
		}
		l.now = time.Now().UnixNano()
		for _, ev := range l.events[:max(n, 0)] {
			if l.ep.Woken(ev) {
				if l.takeGiven() {
					return
				}
				continue
			}
			if c := l.conns[ev.Fd]; c != nil {
				l.serveReady(c)
			}
		}
		if len(l.conns) > 0 && l.now >= l.nextSweep {
			l.sweep()
		}
	}
}

// takeGiven watches the connections given to the loop, and reports whether it is to stop.
func (l *httpLoop) takeGiven() (stopping bool) {
	l.ep.Drain()
	l.mu.Lock()
	given, stopping := l.given, l.stopping
	l.given = nil
	l.mu.Unlock()
	for _, c := range given {
		if stopping {
			sockfd.Close(c.fd)
			continue
		}
		if err := l.ep.Add(c.fd); err != nil {
			l.s.api.cfg.Log.Warn("HTTP: epoll_ctl failed; the connection is closed", "err", err, "client", c.remote)
			sockfd.Close(c.fd)
			continue
		}
		if len(l.conns) == 0 {
			l.nextSweep = l.now + int64(l.sweepEvery())
		}
		l.conns[int32(c.fd)] = c
	}
	return stopping
}

// end closes c, on the loop.
func (l *httpLoop) end(c *loopConn) {
	l.unwatch(c)
	sockfd.Close(c.fd)
}

// unwatch stops reading c on the loop: c is the caller's from here.
func (l *httpLoop) unwatch(c *loopConn) {
	l.ep.Del(c.fd)
	delete(l.conns, int32(c.fd))
}

// sweepEvery is how often the loop looks for connections past their timeouts: a tenth of
// --read-header-timeout, within [1 ms, 1 s].
func (l *httpLoop) sweepEvery() time.Duration {
	return min(max(l.s.api.cfg.Limits.ReadHeaderTimeout/10, time.Millisecond), time.Second)
}

// sweep closes the connections that waited too long for a request: a new one past
// --read-header-timeout (a slowloris, counted, as the front counts it), a kept-alive one
// past idleTimeout.
func (l *httpLoop) sweep() {
	l.nextSweep = l.now + int64(l.sweepEvery())
	header := int64(l.s.api.cfg.Limits.ReadHeaderTimeout)
	for _, c := range l.conns {
		switch {
		case !c.kept && l.now-c.since >= header:
			l.s.api.limits.hits.Hit(limithits.ReadHeaderTimeout)
			l.end(c)
		case c.kept && l.now-c.since >= int64(idleTimeout):
			l.end(c)
		}
	}
}

// serveReady reads what c's client sent, answers the requests it can at once, and hands c
// to its goroutine at the first it cannot.
func (l *httpLoop) serveReady(c *loopConn) {
	fc := l.fc
	defer func() {
		if p := recover(); p != nil {
			// As net/http does: the request's panic is logged, and its connection closed.
			l.s.api.cfg.Log.Error("http: panic serving "+c.remote, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			fc.resetWriter()
			fc.bw.Reset(&l.out)
			l.out.b = l.out.b[:0]
			l.end(c)
		}
	}()
	n, err := sockfd.Read(c.fd, l.in)
	switch {
	case err == unix.EAGAIN:
		return
	case err != nil || n == 0: // the client left (or reset the connection)
		l.end(c)
		return
	}
	data, done := l.in[:n], 0
	limit := l.s.headerBound()
	l.out.b = l.out.b[:0]
	fc.req.RemoteAddr = c.remote
	for {
		stuck := false
		for done < len(data) && len(l.out.b)+fc.bw.Buffered() < loopWriteBytes {
			end := bytes.Index(data[done:min(len(data), done+limit)], []byte("\r\n\r\n"))
			if end < 0 || !fc.parse(data[done:done+end+2]) || !l.answer() {
				stuck = true // not whole, not the front's, or not held here: the goroutine's
				break
			}
			done += end + 4
			c.kept = true
		}
		fc.bw.Flush()
		out := l.out.b
		written, err := sockfd.Write(c.fd, out)
		if cap(out) > loopOutKeep {
			l.out.b = nil
		}
		switch {
		case err != nil && err != unix.EAGAIN:
			l.end(c)
			return
		case written < len(out) || stuck:
			if written < len(out) {
				l.unread.Add(1)
			}
			l.handOff(c, &handed{rest: data[done:], pending: out[written:]})
			return
		case done == len(data):
			c.since = l.now
			return
		}
		l.out.b = l.out.b[:0]
	}
}

// answer serves the request fc holds through the API's handler, into the loop's writer, and
// reports whether it was answered (not declined: see atOnce).
func (l *httpLoop) answer() bool {
	fc := l.fc
	l.ao.declined = false
	l.s.atOnce.ServeHTTP(&fc.w, fc.req)
	if l.ao.declined {
		fc.resetWriter()
		return false
	}
	fc.respond()
	l.s.api.cfg.Metrics.loopHits.Inc()
	return true
}

// handed is what a loop hands a goroutine with a connection: the bytes it did not answer,
// and the responses the client has yet to read.
type handed struct{ rest, pending []byte }

// handOff gives c to a goroutine of its own, which serves h.rest as the first bytes the
// client sent, after it has written h.pending (h nil: nothing).
func (l *httpLoop) handOff(c *loopConn, h *handed) {
	l.unwatch(c)
	nc, err := sockfd.Conn(c.fd)
	sockfd.Close(c.fd)
	if err != nil {
		l.s.api.cfg.Log.Warn("HTTP: could not hand a connection to a goroutine; it is closed", "err", err, "client", c.remote)
		return
	}
	ec := &earlyConn{Conn: nc}
	fc := newFrontConn(l.s, ec)
	fc.loop, fc.kept = l, c.kept
	if !c.kept {
		fc.born = time.Unix(0, c.since)
	}
	if h != nil {
		ec.early = bytes.Clone(h.rest)
		fc.pending = bytes.Clone(h.pending)
	}
	l.s.api.cfg.Metrics.toConn.Inc()
	l.s.goServe(fc)
}

// handBack gives fc's connection back to its loop, between requests, with nothing
// buffered. It reports false when it cannot: fc serves on.
func (fc *frontConn) handBack() bool {
	if fc.bw.Buffered() > 0 && fc.bw.Flush() != nil {
		return false
	}
	nc := fc.c
	if ec, ok := nc.(*earlyConn); ok {
		if len(ec.early) > 0 {
			return false
		}
		nc = ec.Conn
	}
	if fc.loop.isBroken() {
		return false
	}
	remote := nc.RemoteAddr().String()
	fd, err := sockfd.Take(nc)
	if err != nil {
		return false
	}
	fc.s.forget(fc)
	if !fc.loop.give(fd, remote, true) {
		sockfd.Close(fd) // the loop is stopping, or broke
		return true
	}
	fc.s.api.cfg.Metrics.toLoop.Inc()
	return true
}
