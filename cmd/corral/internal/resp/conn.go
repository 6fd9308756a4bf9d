package resp

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/corralcache/corral/cmd/corral/internal/clientlease"
	"github.com/corralcache/corral/cmd/corral/internal/limithits"
	"github.com/corralcache/corral/cmd/corral/internal/sockfd"
)

// conn is one connection and its state. Its fields are the serving goroutine's, but
// for early (see watch).
type conn struct {
	s  *Server
	nc net.Conn
	rd *reader
	w  *bufio.Writer

	proto  int // 2 or 3 (HELLO 3)
	authed bool
	name   string
	client string // the client's IP, for its bounds
	werr   error  // the first write that failed: the connection ends after its command
	// hungUp is set by a watch that saw the client close the connection: the connection
	// ends after the command.
	hungUp atomic.Bool

	// sets are the SETs of a pipeline read and not yet applied (pipeline.go), and setBytes
	// their keys' and values' bytes.
	sets     []pendingSet
	setBytes int

	mu    sync.Mutex // guards early
	early []byte     // bytes a watch (or the event loop) read ahead, which reads return first

	remote string // the client's address, for the log

	// A connection served by an event loop (loop_linux.go) is the loop's file descriptor fd
	// there, and on its goroutine nc, a duplicate of it; fd is -1 and loop nil for a
	// connection only ever served on its goroutine.
	fd   int
	loop *eventLoop
	// lastActive is when the client last sent bytes to the loop (Unix nanoseconds); the
	// loop's.
	lastActive int64
	// idleExpired says the loop handed the connection over for being idle: its goroutine's
	// first wait times out at once, and the client is told as any idle client is.
	idleExpired bool
	// pending are replies the loop could not write yet, which the goroutine writes first.
	pending []byte
	// streak counts the GETs in a row the goroutine answered as the loop would have
	// (handBackAfter).
	streak int
	ended  bool // end has run
}

// newConn makes the state of nc, to be served on loop when it is not nil: nc's socket is then
// taken from it (nc is closed), and the connection's buffers are made only when it goes to a
// goroutine of its own.
func (s *Server) newConn(nc net.Conn, loop *eventLoop) *conn {
	c := &conn{s: s, nc: nc, proto: 2, client: clientlease.ClientOf(nc.RemoteAddr().String()),
		remote: nc.RemoteAddr().String(), fd: -1}
	if loop != nil {
		if fd, err := sockfd.Take(nc); err == nil {
			c.nc, c.fd, c.loop = nil, fd, loop
			c.rd = newReader(nil, s.lim, s.budget)
			return c
		}
	}
	// A pipeline's commands arrive in one read when they fit: 16 SETs of 512 bytes are 9.1 KiB,
	// which an 8 KiB buffer read in two, applying and answering the pipeline in two halves
	// (strace -c of corral serve under redis-benchmark -P16 SET: 2.2 reads and 2.2 writes a
	// pipeline, now 1.2 and 1.1). Redis reads 16 KiB at a time too. An idle connection costs
	// what it did (about 18 KiB on a goroutine, as DefaultLimits says): the pages no read reached are not
	// resident.
	c.rd = newReader(bufio.NewReaderSize(c, 16<<10), s.lim, s.budget)
	// A pipeline's replies leave in one write when they fit: 16 GETs of 512 bytes are 8.3 KiB,
	// which a 4 KiB buffer sent in three (strace: 3.0 writes a pipeline, now 1.0). Redis keeps
	// 16 KiB a client for its replies too.
	c.w = bufio.NewWriterSize(connWriter{c}, 16<<10)
	return c
}

// Read is the connection as the request reader sees it: first the bytes a watch read
// ahead; before it waits for the client, the SETs read so far are applied and the replies
// written so far leave; and each wait
// has its deadline: --resp-idle-timeout between commands, --resp-command-timeout from a
// command's first byte.
func (c *conn) Read(p []byte) (int, error) {
	c.mu.Lock()
	if len(c.early) > 0 {
		n := copy(p, c.early)
		c.early = c.early[n:]
		c.mu.Unlock()
		return n, nil
	}
	c.mu.Unlock()
	c.applySets() // the SETs of the pipeline so far, before waiting for more
	if c.w.Buffered() > 0 {
		if err := c.w.Flush(); err != nil {
			return 0, err
		}
	}
	if c.loop != nil && c.streak >= handBackAfter && !c.rd.reading && c.rd.r.Buffered() == 0 {
		return 0, errHandBack // between commands, nothing held: the loop waits for the next
	}
	now := time.Now()
	deadline := now.Add(c.s.cfg.Limits.IdleTimeout)
	if c.idleExpired {
		c.idleExpired = false
		deadline = now // idle on the loop already
	}
	if c.rd.reading {
		// A command's time runs from its first wait for bytes: its first bytes arrived a
		// moment before (or, pipelined behind a command that blocked, while that one ran).
		if c.rd.began.IsZero() {
			c.rd.began = now
		}
		deadline = c.rd.began.Add(c.s.cfg.Limits.CommandTimeout)
	}
	c.nc.SetReadDeadline(deadline)
	return c.nc.Read(p)
}

// connWriter writes replies to the connection, each write bounded by
// --resp-command-timeout: a client that reads nothing is let go.
type connWriter struct{ c *conn }

func (w connWriter) Write(p []byte) (int, error) {
	w.c.nc.SetWriteDeadline(time.Now().Add(w.c.s.cfg.Limits.CommandTimeout))
	n, err := w.c.nc.Write(p)
	if err != nil && w.c.werr == nil {
		w.c.werr = err
	}
	return n, err
}

// serve reads and answers commands until the client leaves, breaks the protocol or a
// bound, or the server stops.
func (c *conn) serve() {
	s := c.s
	handedBack := false
	defer func() {
		if !handedBack { // else c is its loop's already
			c.rd.done()
			c.end()
		}
	}()
	defer func() {
		if p := recover(); p != nil {
			c.panicked(p)
			c.tellPanicked()
			c.nc.Close()
		}
	}()
	if len(c.pending) > 0 { // replies the loop could not write: they go first
		c.w.Write(c.pending)
		c.pending = nil
	}
	for {
		streak := c.streak
		args, err := c.rd.command()
		quit := false
		if err == nil && s.batches(c, args) {
			c.queueSet(args)
		} else if c.applySets(); err == nil {
			quit = s.serveCommand(c, args)
		} else if ae, ok := err.(*argsError); ok {
			s.refuseArgs(c, ae)
		} else if err == errHandBack {
			c.rd.done()
			handedBack = c.handBack()
			return
		} else {
			c.readFailed(err)
			return
		}
		c.rd.done()
		if c.streak == streak {
			c.streak = 0 // not a GET the loop would have answered
		}
		if quit || c.werr != nil || c.hungUp.Load() {
			c.applySets()
			c.w.Flush()
			c.nc.Close()
			return
		}
	}
}

// errHandBack is conn.Read's word that the connection goes back to its event loop.
var errHandBack = errors.New("resp: the connection goes back to its event loop")

// Buffers of connections that move between a loop and a goroutine: a connection on a loop
// holds none.
var (
	readers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 16<<10) }}
	writers = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 16<<10) }}
)

// goServe serves c, until now on its loop, on a goroutine of its own, through nc.
func (c *conn) goServe(nc net.Conn) {
	s := c.s
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		nc.Close()
		c.end()
		return
	}
	c.nc = nc
	s.mu.Unlock()
	c.rd.r = readers.Get().(*bufio.Reader)
	c.rd.r.Reset(c)
	c.w = writers.Get().(*bufio.Writer)
	c.w.Reset(connWriter{c})
	c.streak = 0
	go c.serve()
}

// handBack gives c back to its loop from its goroutine, between commands, with nothing
// buffered. It reports false when the server is stopping: c is to be ended.
func (c *conn) handBack() bool {
	s := c.s
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return false
	}
	nc := c.nc
	c.nc = nil
	s.mu.Unlock()
	nc.Close() // the duplicate: the loop's descriptor keeps the socket open
	c.rd.r.Reset(nil)
	readers.Put(c.rd.r)
	c.rd.r = nil
	c.w.Reset(nil)
	writers.Put(c.w)
	c.w = nil
	if !c.loop.give(c) {
		return false
	}
	if c.loop != nil { // else its loop broke, and c went on to another goroutine
		s.cfg.Metrics.toLoop.Inc()
	}
	return true
}

// end ends c, on whichever side holds it: its socket closes, and it is no longer counted.
// It does nothing the second time.
func (c *conn) end() {
	if c.ended {
		return
	}
	c.ended = true
	s := c.s
	s.mu.Lock()
	if c.nc != nil {
		c.nc.Close()
	}
	delete(s.conns, c)
	s.mu.Unlock()
	if c.fd >= 0 {
		sockfd.Close(c.fd)
		c.fd = -1
	}
	s.cfg.Metrics.conns.Dec()
	s.wg.Done()
}

// panicked logs and counts a recovered panic.
func (c *conn) panicked(p any) {
	c.s.cfg.Metrics.panics.Inc()
	c.s.cfg.Log.Error("Redis protocol: connection panicked; it is closed", "panic", fmt.Sprint(p),
		"client", c.remote, "stack", string(debug.Stack()))
}

// tellPanicked tells the client its connection ends for an internal error, if it can be
// told within a second. Only the serving goroutine writes.
func (c *conn) tellPanicked() {
	c.nc.SetWriteDeadline(time.Now().Add(time.Second))
	c.w.WriteString("-ERR internal error\r\n")
	c.w.Flush()
}

// readFailed ends the connection after a read that failed: a client that broke the
// protocol or a bound is told why (and it is counted); one that left is not.
func (c *conn) readFailed(err error) {
	var pe *protoError
	var ne net.Error
	reply := ""
	switch {
	case errors.As(err, &pe):
		c.s.cfg.Hits.Hit(pe.limit)
		reply = pe.Error()
	case errors.As(err, &ne) && ne.Timeout() && c.s.ctx.Err() == nil:
		if c.rd.reading {
			c.s.cfg.Hits.Hit(limithits.RESPCommandTimeout)
			reply = fmt.Sprintf("Protocol error: the command did not arrive whole within %v (--resp-command-timeout)", c.s.cfg.Limits.CommandTimeout)
		} else {
			c.s.cfg.Hits.Hit(limithits.RESPIdleTimeout)
			reply = fmt.Sprintf("idle for %v (--resp-idle-timeout): closing the connection", c.s.cfg.Limits.IdleTimeout)
		}
	}
	if reply == "" || c.werr != nil {
		c.nc.Close()
		return
	}
	c.writeError("ERR " + reply)
	c.w.Flush()
	lingerClose(c.nc)
}

// maxEarly bounds the bytes a watch reads ahead.
const maxEarly = 64 << 10

// watch calls gone if the client closes the connection while a command blocks (nothing
// reads the connection while a command runs, so nothing else would notice). The returned
// stop ends the watch and waits for it; bytes it read ahead — a pipelined command — are kept
// for the next read. Only one goroutine reads the connection at a time: the serving one,
// which does not read while its command runs, or the watch.
func (c *conn) watch(gone func()) (stop func()) {
	done := make(chan struct{})
	c.nc.SetReadDeadline(time.Time{}) // before the goroutine: stop's deadline must come after
	go func() {
		defer close(done)
		defer func() {
			if p := recover(); p != nil {
				c.panicked(p)
				c.nc.Close()
			}
		}()
		// It reads on past pipelined commands, up to maxEarly of them: a client that sent a
		// pipeline and hung up is seen gone at the end of its bytes.
		buf := make([]byte, 4096)
		for {
			n, err := c.nc.Read(buf)
			c.mu.Lock()
			c.early = append(c.early, buf[:n]...)
			full := len(c.early) >= maxEarly
			c.mu.Unlock()
			var ne net.Error
			if err != nil && !(errors.As(err, &ne) && ne.Timeout()) {
				gone() // closed or reset: the next read sees the same end
			}
			if err != nil || full {
				return
			}
		}
	}()
	return func() {
		c.nc.SetReadDeadline(time.Now()) // ends the watch's read
		<-done
	}
}
