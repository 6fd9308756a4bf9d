package resp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/corralcache/corral"
	"github.com/corralcache/corral/cmd/corral/internal/apitoken"
	"github.com/corralcache/corral/cmd/corral/internal/clientlease"
	"github.com/corralcache/corral/cmd/corral/internal/intern"
	"github.com/corralcache/corral/cmd/corral/internal/limithits"
	"github.com/corralcache/corral/cmd/corral/internal/objects"
	"github.com/corralcache/corral/cmd/corral/internal/origin"
)

// Config is what a Server serves and how.
type Config struct {
	// Group holds every key of the front (--resp-group). Required.
	Group *corral.Group[objects.Object]
	// Node purges tags cluster-wide (DELTAG). Required.
	Node *corral.Node
	// Leases grants FILLGET's leases, within the bounds both fronts share. Required.
	Leases *clientlease.Leases
	// Metrics are the front's own metrics (NewMetrics). Required.
	Metrics *Metrics
	// Hits counts the connections and commands turned away; nil = not counted.
	Hits *limithits.Counter
	// Token is the API token (--api-token-file): writes and FILLGET need AUTH with it first.
	// Nil = no token: every command is open, and AUTH answers as a Redis without a password.
	Token *apitoken.Token
	// TokenReads makes every command but AUTH, HELLO and QUIT need AUTH first
	// (--api-token-reads). Only with a Token.
	TokenReads bool
	// Origin is the node's origin, if it has one (--origin): a GET of a key it cannot be asked
	// for is refused, and so is FILLGET, since the origin fills. Nil = no origin.
	Origin *origin.Origin
	// MaxValueBytes is the largest value SET and FILLSET take, bytes (--max-value-bytes); a
	// command is bounded by it, two keys and 64 KiB more. Positive.
	MaxValueBytes int
	// Log is where the front says it serves, and what failed; nil = nowhere.
	Log *slog.Logger
	// Limits bound what a connection may cost.
	Limits Limits
	// Loops is how many event loops answer the GETs of values this node holds, as
	// redis-server answers every command (--resp-loops; loop_linux.go); 0 = none, a goroutine
	// per connection. Linux only: elsewhere it is 0 whatever it says.
	Loops int
}

// Server serves the Redis protocol on one listener, from Start until Close.
type Server struct {
	cfg    Config
	ln     net.Listener
	lim    requestLimits
	budget *pendingBudget
	keys   intern.Strings // GET's keys as strings
	loops  []*eventLoop   // none: every connection on a goroutine of its own
	next   int            // the loop the next connection goes to; the accept loop's

	ctx    context.Context // ends the commands still blocked when the server stops
	cancel context.CancelFunc
	wg     sync.WaitGroup // the accept loop, connections and lingering closes
	linger chan struct{}  // bounds the closes that wait for a refused client to read why

	mu sync.Mutex // guards conns and stopped
	// conns holds the connections being served, to close them at stop.
	conns   map[*conn]struct{}
	stopped bool
	once    sync.Once
}

// Start serves the Redis protocol on ln until Close; ln is the Server's from then on. It
// refuses a Config that lacks what it requires, or whose Limits are out of range, and then
// closes ln.
func Start(ln net.Listener, cfg Config) (*Server, error) {
	var err error
	switch {
	case cfg.Group == nil || cfg.Node == nil || cfg.Leases == nil || cfg.Metrics == nil:
		err = errors.New("resp: Config needs a Group, a Node, Leases and Metrics")
	case cfg.MaxValueBytes <= 0:
		err = fmt.Errorf("resp: MaxValueBytes %d: want at least 1", cfg.MaxValueBytes)
	case cfg.Loops < 0:
		err = fmt.Errorf("--resp-loops %d: want 0 or more", cfg.Loops)
	default:
		err = cfg.Limits.Validate()
	}
	if err != nil {
		ln.Close()
		return nil, err
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	command := commandBytes(cfg.MaxValueBytes)
	s := &Server{cfg: cfg, ln: ln,
		lim:    requestLimits{command: command, args: maxArgs, inline: maxInlineBytes, step: bulkStep},
		budget: &pendingBudget{max: max(cfg.Limits.MaxPendingBytes, int64(command))},
		linger: make(chan struct{}, 64),
		conns:  map[*conn]struct{}{},
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.loops = startLoops(s, cfg.Loops)
	s.wg.Add(1)
	go s.acceptLoop()
	cfg.Log.Info("serving the Redis protocol", "addr", ln.Addr().String(), "group", cfg.Group.Name(),
		"max_conns", cfg.Limits.MaxConns, "idle_timeout", cfg.Limits.IdleTimeout.String(), "event_loops", len(s.loops))
	return s, nil
}

// Close stops the server: no new connections, blocked commands end, every connection
// closes. It waits for them until ctx ends, and says so if they are not all gone by then.
// Safe to call twice: the second call does nothing.
func (s *Server) Close(ctx context.Context) error {
	var err error
	s.once.Do(func() {
		s.cancel()
		s.ln.Close()
		s.mu.Lock()
		s.stopped = true
		for c := range s.conns {
			if c.nc != nil { // on a goroutine; a loop closes its own
				c.nc.Close()
			}
		}
		s.mu.Unlock()
		for _, l := range s.loops {
			l.stop()
		}
		done := make(chan struct{})
		go func() { s.wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-ctx.Done():
			err = fmt.Errorf("Redis protocol: connections still open: %w", ctx.Err())
		}
	})
	return err
}

// acceptLoop accepts connections until the listener closes.
func (s *Server) acceptLoop() {
	defer s.wg.Done()
	var backoff time.Duration
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			if s.ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of file descriptors, say: wait a little rather than spin, as net/http does.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			s.cfg.Log.Warn("Redis protocol: accept failed", "err", err, "retry_in", backoff.String())
			select {
			case <-time.After(backoff):
			case <-s.ctx.Done():
				return
			}
			continue
		}
		backoff = 0
		s.mu.Lock()
		switch {
		case s.stopped:
			s.mu.Unlock()
			nc.Close()
			return
		case len(s.conns) >= s.cfg.Limits.MaxConns:
			s.mu.Unlock()
			s.cfg.Hits.Hit(limithits.RESPConnections)
			s.refuse(nc, fmt.Sprintf("-ERR max number of clients reached (%d, --resp-max-conns)\r\n", s.cfg.Limits.MaxConns))
			continue
		}
		var loop *eventLoop
		if len(s.loops) > 0 {
			loop = s.loops[s.next%len(s.loops)]
			s.next++
		}
		c := s.newConn(nc, loop) // its buffers only for a connection that is served
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		s.cfg.Metrics.conns.Inc()
		if c.loop == nil {
			go c.serve()
		} else if !c.loop.give(c) {
			c.end() // the server is stopping
		}
	}
}

// refuse tells a connection the server will not serve it, and closes it. The close waits
// a moment for the client to read why (a close with unread bytes from the client would
// reset the connection and lose the reply), for at most 64 connections at once.
func (s *Server) refuse(nc net.Conn, reply string) {
	nc.SetWriteDeadline(time.Now().Add(time.Second))
	io.WriteString(nc, reply)
	select {
	case s.linger <- struct{}{}:
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer func() { <-s.linger }()
			lingerClose(nc)
		}()
	default:
		nc.Close()
	}
}

// lingerClose ends the writing half of nc, reads what the client still sends for up to a
// second (at most 1 MiB), and closes nc.
func lingerClose(nc net.Conn) {
	if cw, ok := nc.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	}
	nc.SetReadDeadline(time.Now().Add(time.Second))
	io.Copy(io.Discard, io.LimitReader(nc, 1<<20))
	nc.Close()
}
