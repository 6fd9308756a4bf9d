package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tidwall/redcon"

	"github.com/corralcache/corral"
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
// Commands are parsed by github.com/tidwall/redcon, which also reads pipelines and the
// inline (telnet) form; it writes RESP2, and the few RESP3 types a RESP3 client gets (the
// HELLO map, null) are written here. A FILLGET with WAIT blocks its connection, as BLPOP
// does in Redis: the other callers of a client pool are not held.

// respServer serves the Redis protocol for a daemon.
type respServer struct {
	d     *daemon
	group *corral.Group[object]
	ln    net.Listener
	srv   *redcon.Server

	ctx    context.Context // ends the commands still blocked when the server stops
	cancel context.CancelFunc
	conns  sync.WaitGroup // connections being served
	served chan struct{}  // closed when Serve returned
	once   sync.Once
}

// respConn is one connection's state.
type respConn struct {
	proto  int // 2 or 3 (HELLO 3)
	authed bool
	name   string
}

// startRESP serves the Redis protocol on ln until stopRESP.
func (d *daemon) startRESP(ln net.Listener) error {
	g, err := d.group(d.node, d.cfg.respGroup)
	if err != nil {
		ln.Close()
		return fmt.Errorf("--resp-group: %w", err)
	}
	// A command is a key, a value and a little more.
	s := &respServer{d: d, group: g, served: make(chan struct{})}
	s.ln = &boundedListener{Listener: ln, limit: d.cfg.maxValueBytes + 2*fill.MaxKeyBytes + 64<<10,
		onLimit: func() { d.limits.hit("resp_command") }}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.srv = redcon.NewServer(ln.Addr().String(), s.serveCommand, s.accept, s.closed)
	d.mu.Lock()
	d.resp = s
	d.mu.Unlock()
	go func() {
		defer close(s.served)
		if err := s.srv.Serve(s.ln); err != nil {
			d.log.Error("Redis protocol server stopped", "err", err)
		}
	}()
	d.log.Info("serving the Redis protocol", "addr", ln.Addr().String(), "group", d.cfg.respGroup)
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
		s.srv.Close()
		s.ln.Close() // also when Serve had not set its listener yet
		done := make(chan struct{})
		go func() { <-s.served; s.conns.Wait(); close(done) }()
		select {
		case <-done:
		case <-ctx.Done():
			err = fmt.Errorf("Redis protocol: connections still open: %w", ctx.Err())
		}
	})
	return err
}

func (s *respServer) accept(c redcon.Conn) bool {
	s.conns.Add(1)
	c.SetContext(&respConn{proto: 2})
	return true
}

func (s *respServer) closed(redcon.Conn, error) { s.conns.Done() }

// serveCommand answers one command. A panic answers that command with an error and is
// logged: it never takes the daemon down.
func (s *respServer) serveCommand(c redcon.Conn, cmd redcon.Command) {
	defer func() {
		if p := recover(); p != nil {
			s.d.log.Error("Redis protocol: command panicked", "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			c.WriteError("ERR internal error")
		}
	}()
	if bc, ok := c.NetConn().(*boundedConn); ok {
		bc.pending.Store(0) // a command arrived whole
	}
	st, _ := c.Context().(*respConn)
	if st == nil {
		st = &respConn{proto: 2}
		c.SetContext(st)
	}
	name := strings.ToLower(string(cmd.Args[0]))
	args := cmd.Args[1:]
	if s.d.token != nil && !st.authed && s.needsAuth(name) {
		c.WriteError("NOAUTH Authentication required.")
		return
	}
	w := respWriter{c: c, proto: st.proto}
	switch name {
	case "ping":
		switch len(args) {
		case 0:
			c.WriteString("PONG")
		case 1:
			c.WriteBulk(args[0])
		default:
			wrongArgs(c, name)
		}
	case "echo":
		if len(args) != 1 {
			wrongArgs(c, name)
			return
		}
		c.WriteBulk(args[0])
	case "hello":
		s.hello(w, st, args)
	case "auth":
		s.auth(c, st, args)
	case "quit":
		c.WriteString("OK")
		c.Close()
	case "select":
		if len(args) != 1 {
			wrongArgs(c, name)
		} else if string(args[0]) != "0" {
			c.WriteError("ERR DB index is out of range")
		} else {
			c.WriteString("OK")
		}
	case "client":
		s.client(w, st, args)
	case "command":
		c.WriteArray(0) // no command table: clients fall back to sending commands as typed
	case "get":
		s.get(w, args)
	case "set":
		s.set(c, args)
	case "del":
		s.del(c, args)
	case "fillget":
		s.fillget(w, args)
	case "fillset":
		s.fillset(c, args)
	default:
		var quoted []string
		for _, a := range args {
			if len(quoted) == 8 {
				break
			}
			quoted = append(quoted, "'"+clip(string(a), 64)+"'")
		}
		c.WriteError(fmt.Sprintf("ERR unknown command '%s', with args beginning with: %s", clip(string(cmd.Args[0]), 64), strings.Join(quoted, " ")))
	}
}

// needsAuth reports whether a command needs AUTH first: writes always, everything with
// --api-token-reads, as over HTTP.
func (s *respServer) needsAuth(name string) bool {
	switch name {
	case "auth", "hello", "quit":
		return false
	case "set", "del", "fillset":
		return true
	}
	return s.d.cfg.apiTokenReads
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

func wrongArgs(c redcon.Conn, name string) {
	c.WriteError(fmt.Sprintf("ERR wrong number of arguments for '%s' command", name))
}

// respWriter writes the replies whose encoding differs between RESP2 and RESP3.
type respWriter struct {
	c     redcon.Conn
	proto int
}

func (w respWriter) null() {
	if w.proto == 3 {
		w.c.WriteRaw([]byte("_\r\n"))
		return
	}
	w.c.WriteNull()
}

// mapHeader starts a map of n pairs: a RESP3 map, or a flat array of 2n in RESP2.
func (w respWriter) mapHeader(n int) {
	if w.proto == 3 {
		w.c.WriteRaw([]byte("%" + strconv.Itoa(n) + "\r\n"))
		return
	}
	w.c.WriteArray(2 * n)
}

func (s *respServer) hello(w respWriter, st *respConn, args [][]byte) {
	c := w.c
	proto := st.proto
	if len(args) > 0 {
		v, err := strconv.Atoi(string(args[0]))
		if err != nil || (v != 2 && v != 3) {
			c.WriteError("NOPROTO unsupported protocol version")
			return
		}
		proto = v
		args = args[1:]
	}
	authed, name := st.authed, st.name
	for len(args) > 0 {
		switch strings.ToLower(string(args[0])) {
		case "auth":
			if len(args) < 3 {
				c.WriteError("ERR Syntax error in HELLO option 'auth'")
				return
			}
			if s.d.token == nil || !s.d.token.matches(string(args[2])) {
				c.WriteError(wrongPass(s.d.token))
				return
			}
			authed, args = true, args[3:]
		case "setname":
			if len(args) < 2 {
				c.WriteError("ERR Syntax error in HELLO option 'setname'")
				return
			}
			name, args = string(args[1]), args[2:]
		default:
			c.WriteError(fmt.Sprintf("ERR Syntax error in HELLO option '%s'", clip(string(args[0]), 64)))
			return
		}
	}
	if s.d.token != nil && !authed {
		c.WriteError("NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time")
		return
	}
	st.proto, st.authed, st.name = proto, authed, name
	w.proto = proto
	w.mapHeader(7)
	c.WriteBulkString("server")
	c.WriteBulkString("corral")
	c.WriteBulkString("version")
	c.WriteBulkString("7.0.0") // the Redis protocol level spoken, for clients that look
	c.WriteBulkString("proto")
	c.WriteInt(proto)
	c.WriteBulkString("id")
	c.WriteInt64(0)
	c.WriteBulkString("mode")
	c.WriteBulkString("standalone")
	c.WriteBulkString("role")
	c.WriteBulkString("master")
	c.WriteBulkString("modules")
	c.WriteArray(0)
}

func wrongPass(tok *apiToken) string {
	if tok == nil {
		return "ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?"
	}
	return "WRONGPASS invalid username-password pair or user is disabled."
}

// auth takes AUTH token or AUTH user token (Redis 6's form; any user name is the token's).
func (s *respServer) auth(c redcon.Conn, st *respConn, args [][]byte) {
	if len(args) != 1 && len(args) != 2 {
		wrongArgs(c, "auth")
		return
	}
	if s.d.token == nil || !s.d.token.matches(string(args[len(args)-1])) {
		c.WriteError(wrongPass(s.d.token))
		return
	}
	st.authed = true
	c.WriteString("OK")
}

func (s *respServer) client(w respWriter, st *respConn, args [][]byte) {
	c := w.c
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
		st.name = string(args[1])
		c.WriteString("OK")
	case "getname":
		if st.name == "" {
			w.null()
			return
		}
		c.WriteBulkString(st.name)
	case "setinfo":
		c.WriteString("OK")
	case "id":
		c.WriteInt(0)
	default:
		c.WriteError(fmt.Sprintf("ERR unknown subcommand '%s'. Try CLIENT HELP.", clip(string(args[0]), 64)))
	}
}

func (s *respServer) get(w respWriter, args [][]byte) {
	if len(args) != 1 {
		wrongArgs(w.c, "get")
		return
	}
	v, err := s.group.Get(s.ctx, string(args[0]))
	switch {
	case errors.Is(err, corral.ErrNotFound):
		w.null()
	case err != nil:
		s.writeErr(w.c, err)
	default:
		w.c.WriteBulk(v.Body)
	}
}

func (s *respServer) set(c redcon.Conn, args [][]byte) {
	if len(args) < 2 {
		wrongArgs(c, "set")
		return
	}
	key, v := string(args[0]), object{Body: args[1]}
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
			c.WriteError("ERR syntax error")
			return
		}
		n, ok := positive(rest[1], unit)
		if !ok {
			c.WriteError("ERR invalid expire time in 'set' command")
			return
		}
		ttl = n
	}
	var err error
	if ttl > 0 {
		err = s.group.SetWithExpiry(s.ctx, key, v, corral.Expiry{TTL: ttl})
	} else {
		err = s.group.Set(s.ctx, key, v)
	}
	if err != nil && !unreached(err) {
		s.writeErr(c, err)
		return
	}
	c.WriteString("OK")
}

// del removes each key cluster-wide. It counts every key it removed: whether the key held a
// value is not known without asking its owner first, so a key that held none counts too.
func (s *respServer) del(c redcon.Conn, args [][]byte) {
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
	c.WriteInt(removed)
}

func (s *respServer) fillget(w respWriter, args [][]byte) {
	c := w.c
	if len(args) != 2 && len(args) != 4 {
		wrongArgs(c, "fillget")
		return
	}
	if s.d.origin != nil {
		c.WriteError("ERR FILLGET is for groups without --origin: this node fills from its origin")
		return
	}
	var o corral.LeaseOptions
	var ok bool
	if o.Fill, ok = positive(args[1], time.Millisecond); !ok {
		c.WriteError("ERR fill_ms is not a positive integer")
		return
	}
	if len(args) == 4 {
		if !strings.EqualFold(string(args[2]), "wait") {
			c.WriteError("ERR syntax error")
			return
		}
		if o.Wait, ok = nonNegative(args[3], time.Millisecond); !ok {
			c.WriteError("ERR WAIT is not a non-negative integer")
			return
		}
	}
	ctx := s.ctx
	if bc, ok := c.NetConn().(*boundedConn); ok && o.Wait > 0 {
		// While it waits, the command watches its connection: a client that hangs up (its
		// socket timeout was shorter than WAIT, say) must not be handed the lease later.
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		defer bc.watch(cancel)()
	}
	l, err := s.group.Lease(ctx, string(args[0]), o)
	if err != nil {
		s.writeErr(c, err)
		return
	}
	switch l.State {
	case corral.LeaseHit:
		c.WriteArray(2)
		c.WriteString("HIT")
		c.WriteBulk(l.Value.Body)
	case corral.LeaseFill:
		c.WriteArray(2)
		c.WriteString("FILL")
		c.WriteBulkString(l.Token)
	case corral.LeaseBusy:
		c.WriteArray(2)
		c.WriteString("BUSY")
		w.null()
	case corral.LeaseStale:
		c.WriteArray(3)
		c.WriteString("STALE")
		c.WriteBulk(l.Value.Body)
		if l.Token != "" {
			c.WriteBulkString(l.Token)
		} else {
			w.null()
		}
	}
}

func (s *respServer) fillset(c redcon.Conn, args [][]byte) {
	if len(args) != 4 && len(args) != 6 {
		wrongArgs(c, "fillset")
		return
	}
	ttl, ok := positive(args[2], time.Millisecond)
	if !ok {
		c.WriteError("ERR invalid expire time in 'fillset' command")
		return
	}
	e := corral.Expiry{TTL: ttl}
	if len(args) == 6 {
		if !strings.EqualFold(string(args[4]), "swr") {
			c.WriteError("ERR syntax error")
			return
		}
		if e.SWR, ok = nonNegative(args[5], time.Millisecond); !ok {
			c.WriteError("ERR SWR is not a non-negative integer")
			return
		}
	}
	token := string(args[3])
	if token == "" {
		c.WriteInt(0) // no lease has an empty token
		return
	}
	stored, err := s.group.FillSet(s.ctx, string(args[0]), object{Body: args[1]}, token, e)
	if err != nil && !(stored && unreached(err)) {
		s.writeErr(c, err)
		return
	}
	if stored {
		c.WriteInt(1)
	} else {
		c.WriteInt(0)
	}
}

// unreached reports a write that stands although some member could not be told of it: the
// daemon logs it (the HTTP API answers 202); a Redis client gets the command's success.
func unreached(err error) bool {
	var ue *corral.UnreachedError
	return errors.As(err, &ue)
}

func (s *respServer) writeErr(c redcon.Conn, err error) {
	var le *corral.LimitError
	switch {
	case errors.As(err, &le), errors.Is(err, corral.ErrLeaseArgument):
		c.WriteError("ERR " + strings.TrimPrefix(err.Error(), "corral: "))
	case errors.Is(err, corral.ErrClosed), errors.Is(err, context.Canceled) && s.ctx.Err() != nil:
		c.WriteError("ERR node is shutting down")
	default:
		s.d.log.Warn("Redis protocol: command failed", "err", err)
		c.WriteError("ERR " + shortReason(err))
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

// boundedListener hands out boundedConns.
type boundedListener struct {
	net.Listener
	limit   int    // bytes a connection may send without completing a command
	onLimit func() // counts a connection cut off for it
}

func (l *boundedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &boundedConn{Conn: c, limit: l.limit, onLimit: l.onLimit}, nil
}

// boundedConn bounds what a client may send without completing a command: redcon buffers
// a command until it is whole, so without a bound one connection could make the daemon
// hold any amount of memory. Past the limit the client gets an error and the connection
// is closed.
type boundedConn struct {
	net.Conn
	limit   int
	onLimit func()
	pending atomic.Int64 // bytes read since the last whole command
	// limitHit is set when the connection first goes over the limit: it counts once.
	limitHit atomic.Bool

	mu    sync.Mutex // guards early
	early []byte     // bytes a watch read ahead, which Read returns first
}

func (c *boundedConn) Read(p []byte) (int, error) {
	c.mu.Lock()
	if len(c.early) > 0 {
		n := copy(p, c.early)
		c.early = c.early[n:]
		c.mu.Unlock()
		c.pending.Add(int64(n))
		return n, nil
	}
	c.mu.Unlock()
	n, err := c.Conn.Read(p)
	if c.pending.Add(int64(n)) > int64(c.limit) {
		// Counted before the client is told, so that whoever reads the error sees the count.
		if c.limitHit.CompareAndSwap(false, true) {
			c.onLimit()
		}
		c.Conn.Write([]byte("-ERR Protocol error: command exceeds the " + strconv.Itoa(c.limit) + "-byte limit\r\n"))
		return 0, errCommandTooLarge
	}
	return n, err
}

var errCommandTooLarge = errors.New("command too large")

// watch calls gone if the client closes the connection while a command blocks (redcon
// reads nothing while a command runs, so nothing else would notice). The returned stop
// ends the watch and waits for it; bytes it read ahead — a pipelined command — are kept for
// the next Read. Only one goroutine reads the connection at a time: the command's, which
// does not read while it runs, or the watch's.
func (c *boundedConn) watch(gone func()) (stop func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 4096)
		n, err := c.Conn.Read(buf)
		c.mu.Lock()
		c.early = append(c.early, buf[:n]...)
		c.mu.Unlock()
		var ne net.Error
		if err != nil && !(errors.As(err, &ne) && ne.Timeout()) {
			gone() // closed or reset: the next Read sees the same end
		}
	}()
	return func() {
		c.Conn.SetReadDeadline(time.Now()) // ends the watch's Read
		<-done
		c.Conn.SetReadDeadline(time.Time{})
	}
}
