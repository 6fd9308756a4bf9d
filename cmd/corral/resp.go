package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/corralcache/corral"
	"github.com/corralcache/corral/cmd/corral/internal/apitoken"
	"github.com/corralcache/corral/cmd/corral/internal/clientlease"
	"github.com/corralcache/corral/cmd/corral/internal/clip"
	"github.com/corralcache/corral/cmd/corral/internal/limithits"
	"github.com/corralcache/corral/cmd/corral/internal/objects"
	"github.com/corralcache/corral/fill"
)

// The Redis protocol front (--resp-port): every key lives in the group --resp-group.
//
//	PING [msg]                              PONG
//	HELLO [2|3 [AUTH user pass] [SETNAME n]] the server's map; switches to RESP3 with 3
//	AUTH [user] token                       OK, or WRONGPASS (see --api-token-file)
//	GET key                                 the value, or nil
//	SET key value [EX s | PX ms]            OK; without EX or PX the value takes --ttl
//	DEL key [key …]                         the number of keys deleted (each cluster-wide)
//	FILLGET key fill_ms [WAIT ms]           [HIT, v] | [FILL, token] | [BUSY, nil] | [STALE, v, token|nil]
//	FILLSET key value ttl_ms token [SWR ms] 1 stored, 0 the token is no longer live
//	CLIENT SETNAME|GETNAME|SETINFO|ID, SELECT 0, ECHO, COMMAND, QUIT, for clients that send them
//
// Requests are read by respReader (respreader.go), pipelines and the inline (telnet) form
// included; replies are written in RESP2, and in RESP3 where the two differ (the HELLO map,
// null) on a connection that said HELLO 3. Each connection is served by one goroutine,
// which reads a command, runs it and writes its reply; replies are flushed before the
// goroutine waits for more bytes, so a pipeline's replies leave together. A FILLGET with
// WAIT blocks its connection, as BLPOP does in Redis: the other callers of a client pool
// are not held.
//
// What a connection may cost is bounded (respConfig): the connections at once, the time a
// connection may sit idle, the time one command may take to arrive and its reply to be
// read, the bytes of one command, and the bytes of all commands still being read. A panic
// on a connection's goroutines ends that connection alone: it is logged, counted in
// corral_resp_panics_total, and the client is told.

// respConfig is what `corral serve` is told about the Redis protocol front's bounds.
type respConfig struct {
	maxConns        int
	idleTimeout     time.Duration
	commandTimeout  time.Duration
	maxPendingBytes int64
}

// The defaults. A client pool keeps a few connections per process (go-redis: 10 per
// GOMAXPROCS, lazily), so 4096 connections serve hundreds of application processes; an idle
// connection costs about 13 KiB (measured: 2000 idle connections, RSS 24 → 50 MiB), 52 MiB
// at the bound. Five minutes idle is far past any pool's use of a
// connection under load, and short enough that connections a client forgot give their
// places back. Ten seconds to send one command (8 MiB at 0.8 MB/s) or to read a reply is
// generous on a pod network, and the slowloris bound of the HTTP front. 64 MiB of commands
// still being read is eight values of the largest default size arriving at once.
const (
	defaultRESPMaxConns        = 4096
	defaultRESPIdleTimeout     = 5 * time.Minute
	defaultRESPCommandTimeout  = 10 * time.Second
	defaultRESPMaxPendingBytes = 64 << 20
)

func addRESPFlags(fs *flag.FlagSet, c *respConfig) {
	fs.IntVar(&c.maxConns, "resp-max-conns", defaultRESPMaxConns, "Redis protocol connections open at once; one more is told \"max number of clients reached\" and closed")
	fs.DurationVar(&c.idleTimeout, "resp-idle-timeout", defaultRESPIdleTimeout, "a Redis protocol connection that sends no command this long is told so and closed")
	fs.DurationVar(&c.commandTimeout, "resp-command-timeout", defaultRESPCommandTimeout, "a Redis protocol command must arrive whole, and each reply be read, within this (a slowloris bound); the connection is closed otherwise")
	fs.Int64Var(&c.maxPendingBytes, "resp-max-pending-bytes", defaultRESPMaxPendingBytes, "bytes that Redis protocol commands still being read may hold at once, over all connections (the first 64 KiB of each are not counted); a command past it is refused and its connection closed. At least one command's bound (--max-value-bytes + 72 KiB) applies")
}

// withDefaults fills the fields a config made in code (the demo's) left at zero.
func (c respConfig) withDefaults() respConfig {
	setDefault(&c.maxConns, defaultRESPMaxConns)
	setDefault(&c.idleTimeout, defaultRESPIdleTimeout)
	setDefault(&c.commandTimeout, defaultRESPCommandTimeout)
	setDefault(&c.maxPendingBytes, defaultRESPMaxPendingBytes)
	return c
}

func setDefault[T comparable](p *T, d T) {
	var zero T
	if *p == zero {
		*p = d
	}
}

func (c *respConfig) validate() error {
	switch {
	case c.maxConns < 1:
		return fmt.Errorf("--resp-max-conns %d: want at least 1", c.maxConns)
	case c.idleTimeout <= 0 || c.commandTimeout <= 0:
		return errors.New("--resp-idle-timeout and --resp-command-timeout must be positive")
	case c.maxPendingBytes < 1:
		return fmt.Errorf("--resp-max-pending-bytes %d: want at least 1", c.maxPendingBytes)
	}
	return nil
}

// respCommandBytes bounds one command: a value, two keys and a little more.
func respCommandBytes(maxValueBytes int) int { return maxValueBytes + 2*fill.MaxKeyBytes + 64<<10 }

// respServer serves the Redis protocol for a daemon.
type respServer struct {
	d      *daemon
	group  *corral.Group[objects.Object]
	ln     net.Listener
	cfg    respConfig
	lim    respLimits
	budget *pendingBudget

	ctx    context.Context // ends the commands still blocked when the server stops
	cancel context.CancelFunc
	wg     sync.WaitGroup // the accept loop, connections and lingering closes
	linger chan struct{}  // bounds the closes that wait for a refused client to read why

	mu sync.Mutex // guards conns and stopped
	// conns holds the connections being served, to close them at stop.
	conns   map[*respConn]struct{}
	stopped bool
	once    sync.Once
}

// respMetrics are the Redis protocol front's own metrics; its refusals count in
// corral_http_limit_hits_total.
type respMetrics struct {
	conns  prometheus.Gauge
	panics prometheus.Counter
}

func newRESPMetrics(reg prometheus.Registerer) (*respMetrics, error) {
	m := &respMetrics{
		conns: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "corral_resp_connections",
			Help: "Redis protocol connections open now (at most --resp-max-conns).",
		}),
		panics: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "corral_resp_panics_total",
			Help: "Panics recovered on a Redis protocol connection's goroutines; each ended its connection alone.",
		}),
	}
	for _, c := range []prometheus.Collector{m.conns, m.panics} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// startRESP serves the Redis protocol on ln until stopRESP.
func (d *daemon) startRESP(ln net.Listener) error {
	g, err := d.groups.Group(d.node, d.cfg.respGroup)
	if err != nil {
		ln.Close()
		return fmt.Errorf("--resp-group: %w", err)
	}
	cfg := d.cfg.respConfig.withDefaults()
	command := respCommandBytes(d.cfg.maxValueBytes)
	s := &respServer{d: d, group: g, ln: ln, cfg: cfg,
		lim:    respLimits{command: command, args: maxRESPArgs, inline: maxInlineBytes, step: bulkStep},
		budget: &pendingBudget{max: max(cfg.maxPendingBytes, int64(command))},
		linger: make(chan struct{}, 64),
		conns:  map[*respConn]struct{}{},
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	d.mu.Lock()
	d.resp = s
	d.mu.Unlock()
	s.wg.Add(1)
	go s.acceptLoop()
	d.log.Info("serving the Redis protocol", "addr", ln.Addr().String(), "group", d.cfg.respGroup,
		"max_conns", cfg.maxConns, "idle_timeout", cfg.idleTimeout.String())
	return nil
}

// stopRESP stops the Redis protocol front: no new connections, blocked commands end,
// every connection closes. It waits for them until ctx ends. Safe to call twice, and when
// the front is off.
func (d *daemon) stopRESP(ctx context.Context) error {
	d.mu.Lock()
	s := d.resp
	d.mu.Unlock()
	if s == nil {
		return nil
	}
	var err error
	s.once.Do(func() {
		s.cancel()
		s.ln.Close()
		s.mu.Lock()
		s.stopped = true
		for c := range s.conns {
			c.nc.Close()
		}
		s.mu.Unlock()
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
func (s *respServer) acceptLoop() {
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
			s.d.log.Warn("Redis protocol: accept failed", "err", err, "retry_in", backoff.String())
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
		case len(s.conns) >= s.cfg.maxConns:
			s.mu.Unlock()
			s.d.hits.Hit(limithits.RESPConnections)
			s.refuse(nc, fmt.Sprintf("-ERR max number of clients reached (%d, --resp-max-conns)\r\n", s.cfg.maxConns))
			continue
		}
		c := s.newConn(nc) // its buffers only for a connection that is served
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		s.d.respMetrics.conns.Inc()
		go c.serve()
	}
}

// refuse tells a connection the server will not serve it, and closes it. The close waits
// a moment for the client to read why (a close with unread bytes from the client would
// reset the connection and lose the reply), for at most 64 connections at once.
func (s *respServer) refuse(nc net.Conn, reply string) {
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

// respConn is one connection and its state. Its fields are the serving goroutine's, but
// for early (see watch).
type respConn struct {
	s  *respServer
	nc net.Conn
	rd *respReader
	w  *bufio.Writer

	proto  int // 2 or 3 (HELLO 3)
	authed bool
	name   string
	client string // the client's IP, for its bounds
	werr   error  // the first write that failed: the connection ends after its command
	// hungUp is set by a watch that saw the client close the connection: the connection
	// ends after the command.
	hungUp atomic.Bool

	mu    sync.Mutex // guards early
	early []byte     // bytes a watch read ahead, which reads return first
}

func (s *respServer) newConn(nc net.Conn) *respConn {
	c := &respConn{s: s, nc: nc, proto: 2, client: clientlease.ClientOf(nc.RemoteAddr().String())}
	c.rd = newRESPReader(bufio.NewReaderSize(c, 8<<10), s.lim, s.budget)
	c.w = bufio.NewWriterSize(respWriteTo{c}, 4<<10)
	return c
}

// Read is the connection as the request reader sees it: first the bytes a watch read
// ahead; before it waits for the client, the replies written so far leave; and each wait
// has its deadline: --resp-idle-timeout between commands, --resp-command-timeout from a
// command's first byte.
func (c *respConn) Read(p []byte) (int, error) {
	c.mu.Lock()
	if len(c.early) > 0 {
		n := copy(p, c.early)
		c.early = c.early[n:]
		c.mu.Unlock()
		return n, nil
	}
	c.mu.Unlock()
	if c.w.Buffered() > 0 {
		if err := c.w.Flush(); err != nil {
			return 0, err
		}
	}
	deadline := time.Now().Add(c.s.cfg.idleTimeout)
	if c.rd.reading {
		deadline = c.rd.began.Add(c.s.cfg.commandTimeout)
	}
	c.nc.SetReadDeadline(deadline)
	return c.nc.Read(p)
}

// respWriteTo writes replies to the connection, each write bounded by
// --resp-command-timeout: a client that reads nothing is let go.
type respWriteTo struct{ c *respConn }

func (w respWriteTo) Write(p []byte) (int, error) {
	w.c.nc.SetWriteDeadline(time.Now().Add(w.c.s.cfg.commandTimeout))
	n, err := w.c.nc.Write(p)
	if err != nil && w.c.werr == nil {
		w.c.werr = err
	}
	return n, err
}

// serve reads and answers commands until the client leaves, breaks the protocol or a
// bound, or the server stops.
func (c *respConn) serve() {
	s := c.s
	defer func() {
		c.rd.done()
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		s.d.respMetrics.conns.Dec()
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
		if err != nil {
			c.readFailed(err)
			return
		}
		quit := s.serveCommand(c, args)
		c.rd.done()
		if quit || c.werr != nil || c.hungUp.Load() {
			c.w.Flush()
			c.nc.Close()
			return
		}
	}
}

// panicked logs and counts a recovered panic.
func (c *respConn) panicked(p any) {
	c.s.d.respMetrics.panics.Inc()
	c.s.d.log.Error("Redis protocol: connection panicked; it is closed", "panic", fmt.Sprint(p),
		"client", c.nc.RemoteAddr().String(), "stack", string(debug.Stack()))
}

// tellPanicked tells the client its connection ends for an internal error, if it can be
// told within a second. Only the serving goroutine writes.
func (c *respConn) tellPanicked() {
	c.nc.SetWriteDeadline(time.Now().Add(time.Second))
	c.w.WriteString("-ERR internal error\r\n")
	c.w.Flush()
}

// readFailed ends the connection after a read that failed: a client that broke the
// protocol or a bound is told why (and it is counted); one that left is not.
func (c *respConn) readFailed(err error) {
	var pe *respProtoError
	var ne net.Error
	reply := ""
	switch {
	case errors.As(err, &pe):
		c.s.d.hits.Hit(pe.limit)
		reply = pe.Error()
	case errors.As(err, &ne) && ne.Timeout() && c.s.ctx.Err() == nil:
		if c.rd.reading {
			c.s.d.hits.Hit(limithits.RESPCommandTimeout)
			reply = fmt.Sprintf("Protocol error: the command did not arrive whole within %v (--resp-command-timeout)", c.s.cfg.commandTimeout)
		} else {
			c.s.d.hits.Hit(limithits.RESPIdleTimeout)
			reply = fmt.Sprintf("idle for %v (--resp-idle-timeout): closing the connection", c.s.cfg.idleTimeout)
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

// serveCommand answers one command. It reports whether the connection should close.
func (s *respServer) serveCommand(c *respConn, args [][]byte) (quit bool) {
	name := strings.ToLower(string(args[0]))
	cmd := args[0]
	args = args[1:]
	if s.d.token != nil && !c.authed && s.needsAuth(name) {
		c.writeError("NOAUTH Authentication required.")
		return false
	}
	switch name {
	case "ping":
		switch len(args) {
		case 0:
			c.writeString("PONG")
		case 1:
			c.writeBulk(args[0])
		default:
			wrongArgs(c, name)
		}
	case "echo":
		if len(args) != 1 {
			wrongArgs(c, name)
			return false
		}
		c.writeBulk(args[0])
	case "hello":
		s.hello(c, args)
	case "auth":
		s.auth(c, args)
	case "quit":
		c.writeString("OK")
		return true
	case "select":
		if len(args) != 1 {
			wrongArgs(c, name)
		} else if string(args[0]) != "0" {
			c.writeError("ERR DB index is out of range")
		} else {
			c.writeString("OK")
		}
	case "client":
		s.client(c, args)
	case "command":
		c.writeArray(0) // no command table: clients fall back to sending commands as typed
	case "get":
		s.get(c, args)
	case "set":
		s.set(c, args)
	case "del":
		s.del(c, args)
	case "fillget":
		s.fillget(c, args)
	case "fillset":
		s.fillset(c, args)
	case "deltag":
		s.deltag(c, args)
	default:
		var quoted []string
		for _, a := range args {
			if len(quoted) == 8 {
				break
			}
			quoted = append(quoted, "'"+clip.String(string(a), 64)+"'")
		}
		c.writeError(fmt.Sprintf("ERR unknown command '%s', with args beginning with: %s", clip.String(string(cmd), 64), strings.Join(quoted, " ")))
	}
	return false
}

// Replies. A simple string or an error never holds a line break: one from the client's
// bytes (an unknown command's name) becomes a space.

func (c *respConn) writeString(s string) {
	c.w.WriteByte('+')
	c.w.WriteString(oneLine(s))
	c.w.WriteString("\r\n")
}

func (c *respConn) writeError(s string) {
	c.w.WriteByte('-')
	c.w.WriteString(oneLine(s))
	c.w.WriteString("\r\n")
}

func (c *respConn) writeBulk(b []byte) {
	c.w.WriteByte('$')
	c.w.WriteString(strconv.Itoa(len(b)))
	c.w.WriteString("\r\n")
	c.w.Write(b)
	c.w.WriteString("\r\n")
}

func (c *respConn) writeBulkString(s string) { c.writeBulk([]byte(s)) }

func (c *respConn) writeInt(n int64) {
	c.w.WriteByte(':')
	c.w.WriteString(strconv.FormatInt(n, 10))
	c.w.WriteString("\r\n")
}

func (c *respConn) writeArray(n int) {
	c.w.WriteByte('*')
	c.w.WriteString(strconv.Itoa(n))
	c.w.WriteString("\r\n")
}

// null writes RESP3's null, or RESP2's null bulk string.
func (c *respConn) null() {
	if c.proto == 3 {
		c.w.WriteString("_\r\n")
		return
	}
	c.w.WriteString("$-1\r\n")
}

// mapHeader starts a map of n pairs: a RESP3 map, or a flat array of 2n in RESP2.
func (c *respConn) mapHeader(n int) {
	if c.proto == 3 {
		c.w.WriteString("%" + strconv.Itoa(n) + "\r\n")
		return
	}
	c.writeArray(2 * n)
}

func oneLine(s string) string {
	if strings.ContainsAny(s, "\r\n") {
		return strings.NewReplacer("\r", " ", "\n", " ").Replace(s)
	}
	return s
}

// needsAuth reports whether a command needs AUTH first: writes always, everything with
// --api-token-reads, as over HTTP.
func (s *respServer) needsAuth(name string) bool {
	switch name {
	case "auth", "hello", "quit":
		return false
	case "set", "del", "deltag", "fillset", "fillget":
		return true // fillget grants leases: state that holds other callers up
	}
	return s.d.cfg.apiTokenReads
}

// maxClientName bounds a connection's name (CLIENT SETNAME, HELLO SETNAME): it is kept as
// long as the connection, so without a bound every connection could hold a command's worth.
const maxClientName = 256

func clientNameTooLong(n int) string {
	return fmt.Sprintf("ERR a client name of %d bytes exceeds the limit of %d bytes", n, maxClientName)
}

func wrongArgs(c *respConn, name string) {
	c.writeError(fmt.Sprintf("ERR wrong number of arguments for '%s' command", name))
}

func (s *respServer) hello(c *respConn, args [][]byte) {
	proto := c.proto
	if len(args) > 0 {
		v, err := strconv.Atoi(string(args[0]))
		if err != nil || (v != 2 && v != 3) {
			c.writeError("NOPROTO unsupported protocol version")
			return
		}
		proto = v
		args = args[1:]
	}
	authed, name := c.authed, c.name
	for len(args) > 0 {
		switch strings.ToLower(string(args[0])) {
		case "auth":
			if len(args) < 3 {
				c.writeError("ERR Syntax error in HELLO option 'auth'")
				return
			}
			if s.d.token == nil || !s.d.token.Matches(string(args[2])) {
				c.writeError(wrongPass(s.d.token))
				return
			}
			authed, args = true, args[3:]
		case "setname":
			if len(args) < 2 {
				c.writeError("ERR Syntax error in HELLO option 'setname'")
				return
			}
			if len(args[1]) > maxClientName {
				c.writeError(clientNameTooLong(len(args[1])))
				return
			}
			name, args = string(args[1]), args[2:]
		default:
			c.writeError(fmt.Sprintf("ERR Syntax error in HELLO option '%s'", clip.String(string(args[0]), 64)))
			return
		}
	}
	if s.d.token != nil && !authed {
		c.writeError("NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time")
		return
	}
	c.proto, c.authed, c.name = proto, authed, name
	c.mapHeader(7)
	c.writeBulkString("server")
	c.writeBulkString("corral")
	c.writeBulkString("version")
	c.writeBulkString("7.0.0") // the Redis protocol level spoken, for clients that look
	c.writeBulkString("proto")
	c.writeInt(int64(proto))
	c.writeBulkString("id")
	c.writeInt(0)
	c.writeBulkString("mode")
	c.writeBulkString("standalone")
	c.writeBulkString("role")
	c.writeBulkString("master")
	c.writeBulkString("modules")
	c.writeArray(0)
}

func wrongPass(tok *apitoken.Token) string {
	if tok == nil {
		return "ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?"
	}
	return "WRONGPASS invalid username-password pair or user is disabled."
}

// auth takes AUTH token or AUTH user token (Redis 6's form; any user name is the token's).
func (s *respServer) auth(c *respConn, args [][]byte) {
	if len(args) != 1 && len(args) != 2 {
		wrongArgs(c, "auth")
		return
	}
	if s.d.token == nil || !s.d.token.Matches(string(args[len(args)-1])) {
		c.writeError(wrongPass(s.d.token))
		return
	}
	c.authed = true
	c.writeString("OK")
}

func (s *respServer) client(c *respConn, args [][]byte) {
	if len(args) == 0 {
		wrongArgs(c, "client")
		return
	}
	switch strings.ToLower(string(args[0])) {
	case "setname":
		if len(args) != 2 {
			wrongArgs(c, "client|setname")
			return
		}
		if len(args[1]) > maxClientName {
			c.writeError(clientNameTooLong(len(args[1])))
			return
		}
		c.name = string(args[1])
		c.writeString("OK")
	case "getname":
		if c.name == "" {
			c.null()
			return
		}
		c.writeBulkString(c.name)
	case "setinfo":
		c.writeString("OK")
	case "id":
		c.writeInt(0)
	default:
		c.writeError(fmt.Sprintf("ERR unknown subcommand '%s'. Try CLIENT HELP.", clip.String(string(args[0]), 64)))
	}
}

func (s *respServer) get(c *respConn, args [][]byte) {
	if len(args) != 1 {
		wrongArgs(c, "get")
		return
	}
	if s.d.origin != nil {
		if err := s.d.origin.Check(s.group.Name(), string(args[0])); err != nil {
			c.writeError("ERR " + err.Error())
			return
		}
	}
	v, err := s.group.Get(s.ctx, string(args[0]))
	switch {
	case errors.Is(err, corral.ErrNotFound):
		c.null()
	case err != nil:
		s.writeErr(c, err)
	default:
		c.writeBulk(v.Body)
	}
}

func (s *respServer) set(c *respConn, args [][]byte) {
	if len(args) < 2 {
		wrongArgs(c, "set")
		return
	}
	key, v := string(args[0]), objects.Object{Body: args[1]}
	if !s.valueFits(c, v.Body) {
		return
	}
	args, tags, ok := splitTags(args, 2)
	if !ok {
		c.writeError("ERR syntax error: TAGS takes at least one tag")
		return
	}
	var ttl time.Duration
	for rest := args[2:]; len(rest) > 0; rest = rest[2:] {
		unit := time.Duration(0)
		switch strings.ToLower(string(rest[0])) {
		case "ex":
			unit = time.Second
		case "px":
			unit = time.Millisecond
		}
		if unit == 0 || len(rest) < 2 || ttl != 0 {
			c.writeError("ERR syntax error")
			return
		}
		n, ok := positive(rest[1], unit)
		if !ok {
			c.writeError("ERR invalid expire time in 'set' command")
			return
		}
		ttl = n
	}
	var err error
	if ttl > 0 {
		err = s.group.SetWithExpiry(s.ctx, key, v, corral.Expiry{TTL: ttl, Tags: tags})
	} else {
		err = s.group.SetWithTags(s.ctx, key, v, tags...)
	}
	if err != nil && !unreached(err) {
		s.writeErr(c, err)
		return
	}
	c.writeString("OK")
}

// del removes each key cluster-wide. It counts every key it removed: whether the key held a
// value is not known without asking its owner first, so a key that held none counts too.
func (s *respServer) del(c *respConn, args [][]byte) {
	if len(args) == 0 {
		wrongArgs(c, "del")
		return
	}
	removed := 0
	for _, k := range args {
		if err := s.group.Remove(s.ctx, string(k)); err != nil && !unreached(err) {
			s.writeErr(c, err)
			return
		}
		removed++
	}
	c.writeInt(int64(removed))
}

func (s *respServer) fillget(c *respConn, args [][]byte) {
	if len(args) != 2 && len(args) != 4 {
		wrongArgs(c, "fillget")
		return
	}
	if s.d.origin != nil {
		c.writeError("ERR FILLGET is for groups without --origin: this node fills from its origin")
		return
	}
	var o corral.LeaseOptions
	var ok bool
	if o.Fill, ok = positive(args[1], time.Millisecond); !ok {
		c.writeError("ERR fill_ms is not a positive integer")
		return
	}
	if err := s.d.leases.Check(o.Fill); err != nil {
		c.writeError("ERR " + err.Error())
		return
	}
	if len(args) == 4 {
		if !strings.EqualFold(string(args[2]), "wait") {
			c.writeError("ERR syntax error")
			return
		}
		if o.Wait, ok = nonNegative(args[3], time.Millisecond); !ok {
			c.writeError("ERR WAIT is not a non-negative integer")
			return
		}
	}
	ctx := s.ctx
	if o.Wait > 0 {
		// While it waits, the command watches its connection: a client that hangs up (its
		// socket timeout was shorter than WAIT, say) must not be handed the lease later.
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		defer c.watch(func() { c.hungUp.Store(true); cancel() })()
	}
	l, err := s.d.leases.Lease(ctx, s.group, c.client, string(args[0]), o)
	if err != nil {
		s.writeErr(c, err)
		return
	}
	switch l.State {
	case corral.LeaseHit:
		c.writeArray(2)
		c.writeString("HIT")
		c.writeBulk(l.Value.Body)
	case corral.LeaseFill:
		c.writeArray(2)
		c.writeString("FILL")
		c.writeBulkString(l.Token)
	case corral.LeaseBusy:
		c.writeArray(2)
		c.writeString("BUSY")
		c.null()
	case corral.LeaseStale:
		c.writeArray(3)
		c.writeString("STALE")
		c.writeBulk(l.Value.Body)
		if l.Token != "" {
			c.writeBulkString(l.Token)
		} else {
			c.null()
		}
	}
}

func (s *respServer) fillset(c *respConn, args [][]byte) {
	args, tags, ok := splitTags(args, 4)
	if !ok {
		c.writeError("ERR syntax error: TAGS takes at least one tag")
		return
	}
	if len(args) != 4 && len(args) != 6 {
		wrongArgs(c, "fillset")
		return
	}
	ttl, ok := positive(args[2], time.Millisecond)
	if !ok {
		c.writeError("ERR invalid expire time in 'fillset' command")
		return
	}
	e := corral.Expiry{TTL: ttl, Tags: tags}
	if len(args) == 6 {
		if !strings.EqualFold(string(args[4]), "swr") {
			c.writeError("ERR syntax error")
			return
		}
		if e.SWR, ok = nonNegative(args[5], time.Millisecond); !ok {
			c.writeError("ERR SWR is not a non-negative integer")
			return
		}
	}
	if !s.valueFits(c, args[1]) {
		return
	}
	token := string(args[3])
	if token == "" {
		c.writeInt(0) // no lease has an empty token
		return
	}
	stored, err := s.group.FillSet(s.ctx, string(args[0]), objects.Object{Body: args[1]}, token, e)
	s.d.leases.Stored(token)
	if err != nil && !(stored && unreached(err)) {
		s.writeErr(c, err)
		return
	}
	if stored {
		c.writeInt(1)
	} else {
		c.writeInt(0)
	}
}

// deltag purges each tag cluster-wide (DELETE /v1/tags/{tag}): every entry stored with it
// before the command is gone, in every group on every member. It answers how many tags it
// purged; a member that could not be told is not an error here, as for DEL.
func (s *respServer) deltag(c *respConn, args [][]byte) {
	if len(args) == 0 {
		wrongArgs(c, "deltag")
		return
	}
	for _, t := range args {
		if err := s.d.node.RemoveByTag(s.ctx, string(t)); err != nil && !unreached(err) {
			s.writeErr(c, err)
			return
		}
	}
	c.writeInt(int64(len(args)))
}

// splitTags splits a SET's or FILLSET's arguments at a TAGS option, which takes the rest of
// them: SET key value [EX s|PX ms] [TAGS tag …]. Options begin at index from (a key or value
// spelled "tags" is not one). ok is false for a TAGS with no tag.
func splitTags(args [][]byte, from int) (rest [][]byte, tags []string, ok bool) {
	for i, a := range args {
		if i >= from && strings.EqualFold(string(a), "tags") {
			if i == len(args)-1 {
				return nil, nil, false
			}
			for _, t := range args[i+1:] {
				tags = append(tags, string(t))
			}
			return args[:i], tags, true
		}
	}
	return args, nil, true
}

// valueFits answers a value over --max-value-bytes with the library's error, and reports
// whether it fits. (The node's own bound is the encoded object's, a little larger.)
func (s *respServer) valueFits(c *respConn, v []byte) bool {
	if len(v) > s.d.cfg.maxValueBytes {
		c.writeError(fmt.Sprintf("ERR value of %d bytes exceeds the value limit of %d bytes", len(v), s.d.cfg.maxValueBytes))
		return false
	}
	return true
}

// unreached reports a write that stands although some member could not be told of it: the
// daemon logs it (the HTTP API answers 202); a Redis client gets the command's success.
func unreached(err error) bool {
	var ue *corral.UnreachedError
	return errors.As(err, &ue)
}

func (s *respServer) writeErr(c *respConn, err error) {
	var le *corral.LimitError
	var full *clientlease.FullError
	switch {
	case errors.As(err, &full):
		c.writeError("BUSY " + full.Error())
	case errors.As(err, &le), errors.Is(err, corral.ErrLeaseArgument), errors.Is(err, corral.ErrInvalidTag):
		c.writeError("ERR " + strings.TrimPrefix(err.Error(), "corral: "))
	case errors.Is(err, corral.ErrClosed), errors.Is(err, context.Canceled) && s.ctx.Err() != nil:
		c.writeError("ERR node is shutting down")
	case c.hungUp.Load():
		// The client left while the command waited: nobody reads this, and the connection
		// ends after it (a hung-up pipeline would otherwise fail, and warn, once a command).
	default:
		s.d.log.Warn("Redis protocol: command failed", "err", err)
		c.writeError("ERR " + clip.Reason(err))
	}
}

// positive parses a positive integer count of unit.
func positive(b []byte, unit time.Duration) (time.Duration, bool) {
	d, ok := nonNegative(b, unit)
	return d, ok && d > 0
}

func nonNegative(b []byte, unit time.Duration) (time.Duration, bool) {
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil || n < 0 || n > int64(1<<62)/int64(unit) {
		return 0, false
	}
	return time.Duration(n) * unit, true
}

// maxEarly bounds the bytes a watch reads ahead.
const maxEarly = 64 << 10

// watch calls gone if the client closes the connection while a command blocks (nothing
// reads the connection while a command runs, so nothing else would notice). The returned
// stop ends the watch and waits for it; bytes it read ahead — a pipelined command — are kept
// for the next read. Only one goroutine reads the connection at a time: the serving one,
// which does not read while its command runs, or the watch.
func (c *respConn) watch(gone func()) (stop func()) {
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
