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
	early []byte     // bytes a watch read ahead, which reads return first
}

func (s *Server) newConn(nc net.Conn) *conn {
	c := &conn{s: s, nc: nc, proto: 2, client: clientlease.ClientOf(nc.RemoteAddr().String())}
	// A pipeline's commands arrive in one read when they fit: 16 SETs of 512 bytes are 9.1 KiB,
	// which an 8 KiB buffer read in two, applying and answering the pipeline in two halves
	// (strace -c of corral serve under redis-benchmark -P16 SET: 2.2 reads and 2.2 writes a
	// pipeline, now 1.2 and 1.1). Redis reads 16 KiB at a time too. An idle connection costs
	// what it did (22.4 KiB, measured as in DefaultLimits): the pages no read reached are not
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
	now := time.Now()
	deadline := now.Add(c.s.cfg.Limits.IdleTimeout)
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
	defer func() {
		c.rd.done()
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		s.cfg.Metrics.conns.Dec()
		s.wg.Done()
	}()
	defer func() {
		if p := recover(); p != nil {
			c.panicked(p)
			c.tellPanicked()
			c.nc.Close()
		}
	}()
	for {
		args, err := c.rd.command()
		quit := false
		if err == nil && s.batches(c, args) {
			c.queueSet(args)
		} else if c.applySets(); err == nil {
			quit = s.serveCommand(c, args)
		} else if ae, ok := err.(*argsError); ok {
			s.refuseArgs(c, ae)
		} else {
			c.readFailed(err)
			return
		}
		c.rd.done()
		if quit || c.werr != nil || c.hungUp.Load() {
			c.applySets()
			c.w.Flush()
			c.nc.Close()
			return
		}
	}
}

// panicked logs and counts a recovered panic.
func (c *conn) panicked(p any) {
	c.s.cfg.Metrics.panics.Inc()
	c.s.cfg.Log.Error("Redis protocol: connection panicked; it is closed", "panic", fmt.Sprint(p),
		"client", c.nc.RemoteAddr().String(), "stack", string(debug.Stack()))
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
