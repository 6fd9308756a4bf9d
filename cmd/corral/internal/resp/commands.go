package resp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/corralcache/corral"
	"github.com/corralcache/corral/cmd/corral/internal/apitoken"
	"github.com/corralcache/corral/cmd/corral/internal/batch"
	"github.com/corralcache/corral/cmd/corral/internal/clientlease"
	"github.com/corralcache/corral/cmd/corral/internal/clip"
	"github.com/corralcache/corral/cmd/corral/internal/limithits"
	"github.com/corralcache/corral/cmd/corral/internal/objects"
	"github.com/corralcache/corral/fill"
)

// serveCommand answers one command. It reports whether the connection should close.
func (s *Server) serveCommand(c *conn, args [][]byte) (quit bool) {
	name := commandName(args[0])
	cmd := args[0]
	args = args[1:]
	if s.cfg.Token != nil && !c.authed && s.needsAuth(name) {
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
	case "mget":
		s.mget(c, args)
	case "set":
		s.set(c, args)
	case "del":
		s.del(c, args)
	case "exists":
		s.exists(c, args)
	case "ttl", "pttl":
		s.ttl(c, name, args)
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

// commandName returns a command's name in lower case: for the commands the front knows, the
// constant string of its case below, so that a GET costs no allocation here; any other name
// is lowered as it is.
func commandName(b []byte) string {
	var buf [8]byte
	if len(b) > len(buf) {
		return strings.ToLower(string(b))
	}
	lower := buf[:len(b)]
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		lower[i] = c
	}
	switch string(lower) { // a switch on string(bytes) does not allocate
	case "get":
		return "get"
	case "mget":
		return "mget"
	case "set":
		return "set"
	case "del":
		return "del"
	case "ping":
		return "ping"
	case "fillget":
		return "fillget"
	case "fillset":
		return "fillset"
	}
	return strings.ToLower(string(b))
}

// needsAuth reports whether a command needs AUTH first: writes always, everything with
// --api-token-reads, as over HTTP.
func (s *Server) needsAuth(name string) bool {
	switch name {
	case "auth", "hello", "quit":
		return false
	case "set", "del", "deltag", "fillset", "fillget":
		return true // fillget grants leases: state that holds other callers up
	}
	return s.cfg.TokenReads
}

// maxClientName bounds a connection's name (CLIENT SETNAME, HELLO SETNAME): it is kept as
// long as the connection, so without a bound every connection could hold a command's worth.
const maxClientName = 256

func clientNameTooLong(n int) string {
	return fmt.Sprintf("ERR a client name of %d bytes exceeds the limit of %d bytes", n, maxClientName)
}

func wrongArgs(c *conn, name string) { c.writeError(wrongArgsReply(name)) }

func wrongArgsReply(name string) string {
	return fmt.Sprintf("ERR wrong number of arguments for '%s' command", name)
}

func (s *Server) hello(c *conn, args [][]byte) {
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
			if s.cfg.Token == nil || !s.cfg.Token.Matches(string(args[2])) {
				c.writeError(wrongPass(s.cfg.Token))
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
	if s.cfg.Token != nil && !authed {
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
func (s *Server) auth(c *conn, args [][]byte) {
	if len(args) != 1 && len(args) != 2 {
		wrongArgs(c, "auth")
		return
	}
	if s.cfg.Token == nil || !s.cfg.Token.Matches(string(args[len(args)-1])) {
		c.writeError(wrongPass(s.cfg.Token))
		return
	}
	c.authed = true
	c.writeString("OK")
}

func (s *Server) client(c *conn, args [][]byte) {
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
	case "tracking":
		// Client-side caching needs the server to push invalidations; rueidis asks for it
		// unless told not to, and then says why it cannot connect.
		c.writeError("ERR CLIENT TRACKING is not supported: corral pushes no invalidations for client-side caching (rueidis: set ClientOption.DisableCache)")
	case "id":
		c.writeInt(0)
	default:
		c.writeError(fmt.Sprintf("ERR unknown subcommand '%s'. Try CLIENT HELP.", clip.String(string(args[0]), 64)))
	}
}

func (s *Server) get(c *conn, args [][]byte) {
	if len(args) != 1 {
		wrongArgs(c, "get")
		return
	}
	key := s.keys.Of(args[0])
	if s.cfg.Origin != nil {
		if err := s.cfg.Origin.Check(s.cfg.Group.Name(), key); err != nil {
			c.writeError("ERR " + err.Error())
			return
		}
	}
	if c.loop != nil {
		// As the connection's loop answers it (answerAtOnce), counted toward its return there.
		if v, _, ok := s.cfg.Group.GetIfHeld(s.ctx, key); ok {
			c.streak++
			c.writeBulk(v.Body)
			return
		}
	}
	v, err := s.cfg.Group.Get(s.ctx, key)
	switch {
	case errors.Is(err, corral.ErrNotFound):
		c.null()
	case err != nil:
		s.writeErr(c, err)
	default:
		c.writeBulk(v.Body)
	}
}

// mget reads its keys as one batch read (package batch): the keys that miss on this node
// asked of their owners in one request per owner, each key filled once in the cluster, through
// --origin when the node has one. It answers as Redis does: an array of each key's value, or
// nil for a key not found, in the order asked, a key named twice answered twice. A key that
// failed (not a not-found: the origin failed, the peers did not answer) fails the command:
// -ERR naming the keys that failed, so that no client takes a failure for a miss; the keys
// that were read stay cached, and an MGET again costs only the fills of the failed ones.
func (s *Server) mget(c *conn, args [][]byte) {
	if len(args) == 0 {
		wrongArgs(c, "mget")
		return
	}
	keys := make([]string, len(args))
	for i, a := range args {
		keys[i] = s.keys.Of(a)
	}
	a, err := batch.Read(s.ctx, s.cfg.Group, s.cfg.Origin, keys)
	switch {
	case errors.Is(err, batch.ErrRefused):
		s.cfg.Hits.Hit(limithits.Batch)
		c.writeError("ERR " + err.Error())
		return
	case err != nil:
		s.writeErr(c, err)
		return
	case len(a.Failed) > 0:
		s.cfg.Log.Warn("Redis protocol: MGET keys failed", "keys", len(a.Failed), "of", len(keys), "first", a.Failed[0].Err)
		c.writeError(failedKeys(a.Failed, len(keys)))
		return
	}
	c.writeArray(len(keys))
	for _, key := range keys {
		if v, found := a.Values[key]; found {
			c.writeBulk(v.Body)
		} else {
			c.null()
		}
	}
}

// failedKeys is MGET's error for keys that failed: how many, and the first few with why.
func failedKeys(failed []batch.Failure, asked int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "ERR MGET: %d of %d keys failed, so no key is answered (the others are cached: MGET again)", len(failed), asked)
	const shown = 3
	for i, f := range failed {
		if i == shown {
			fmt.Fprintf(&b, "; and %d more", len(failed)-shown)
			break
		}
		reason := f.Err
		var fe *corral.FillError
		if errors.As(f.Err, &fe) {
			reason = fe.Err // the key is named already
		}
		fmt.Fprintf(&b, "; '%s': %s", clip.String(f.Key, 64), strings.TrimPrefix(clip.String(reason.Error(), 120), "corral: "))
	}
	return b.String()
}

// refuseArgs answers a command that the reader dropped for its arguments: an MGET of more
// keys than a batch read may name, or any command of more arguments than the bound.
func (s *Server) refuseArgs(c *conn, e *argsError) {
	switch {
	case e.name == "mget" && e.count > 0:
		s.cfg.Hits.Hit(limithits.Batch)
		c.writeError(fmt.Sprintf("ERR MGET of %d keys exceeds the limit of %d keys of one batch read: nothing was read", e.count-1, batch.MaxKeys))
	case e.count > 0:
		s.cfg.Hits.Hit(limithits.RESPCommand)
		c.writeError(fmt.Sprintf("ERR a command of %d arguments exceeds the limit of %d: it was not run", e.count, maxArgs))
	default:
		s.cfg.Hits.Hit(limithits.RESPCommand)
		c.writeError(fmt.Sprintf("ERR a command of more than %d arguments exceeds the limit: it was not run", maxArgs))
	}
}

// set answers one SET: parsed, written and answered at once. (A SET of a pipeline is
// applied with the SETs next to it: pipeline.go.)
func (s *Server) set(c *conn, args [][]byte) {
	w, bad := s.parseSet(args)
	if bad != "" {
		c.writeError(bad)
		return
	}
	s.setReply(c, s.store(w))
}

// parseSet reads a SET's arguments: SET key value [EX s | PX ms] [TAGS t …]. bad is the error
// reply of a SET that is not run.
func (s *Server) parseSet(args [][]byte) (w pendingSet, bad string) {
	if len(args) < 2 {
		return w, wrongArgsReply("set")
	}
	if len(args[1]) > s.cfg.MaxValueBytes {
		return w, s.valueTooLarge(len(args[1]))
	}
	args, tags, ok := splitTags(args, 2)
	if !ok {
		return w, "ERR syntax error: TAGS takes at least one tag"
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
			return w, "ERR syntax error"
		}
		n, ok := positive(rest[1], unit)
		if !ok {
			return w, "ERR invalid expire time in 'set' command"
		}
		ttl = n
	}
	// The key and value are kept: copies, since the reader reuses its arguments' bytes.
	return pendingSet{key: string(args[0]), value: objects.Object{Body: bytes.Clone(args[1])},
		expiry: corral.Expiry{TTL: ttl, Tags: tags}}, ""
}

// store writes a parsed SET: under its TTL (EX, PX) or the group's (--ttl), with its tags.
func (s *Server) store(w pendingSet) error {
	if w.expiry.TTL > 0 {
		return s.cfg.Group.SetWithExpiry(s.ctx, w.key, w.value, w.expiry)
	}
	return s.cfg.Group.SetWithTags(s.ctx, w.key, w.value, w.expiry.Tags...)
}

// setReply answers a SET that store ran: OK, also for a write that some member could not be
// told of.
func (s *Server) setReply(c *conn, err error) {
	if err != nil && !unreached(err) {
		s.writeErr(c, err)
		return
	}
	c.writeString("OK")
}

// del removes each key cluster-wide. It counts every key it removed: whether the key held a
// value is not known without asking its owner first, so a key that held none counts too.
func (s *Server) del(c *conn, args [][]byte) {
	if len(args) == 0 {
		wrongArgs(c, "del")
		return
	}
	removed := 0
	for _, k := range args {
		if err := s.cfg.Group.Remove(s.ctx, string(k)); err != nil && !unreached(err) {
			s.writeErr(c, err)
			return
		}
		removed++
	}
	c.writeInt(int64(removed))
}

// held asks the key's owner what it holds of key, without filling it (Group.Peek): a value
// fresh or stale within its grace, and how long it stays fresh. A key not held (never
// written or read, expired past its grace, deleted, or a remembered not-found) is not
// found; with --origin, it is not read through.
func (s *Server) held(key string) (fresh time.Duration, found bool, err error) {
	_, info, err := s.cfg.Group.Peek(s.ctx, key)
	switch {
	case errors.Is(err, corral.ErrNotFound):
		return 0, false, nil
	case err != nil:
		return 0, false, err
	}
	return info.FreshFor, true, nil
}

// exists counts the keys whose owner holds a value (held), a key named twice counted twice,
// as Redis counts them.
func (s *Server) exists(c *conn, args [][]byte) {
	if len(args) == 0 {
		wrongArgs(c, "exists")
		return
	}
	n := 0
	for _, k := range args {
		_, found, err := s.held(string(k))
		if err != nil {
			s.writeErr(c, err)
			return
		}
		if found {
			n++
		}
	}
	c.writeInt(int64(n))
}

// ttl answers TTL (seconds) and PTTL (milliseconds) as Redis does: -2 for a key not held, -1
// for a value that never expires, else its remaining freshness — PTTL in whole milliseconds,
// TTL rounded to the nearest second (Redis's (ms+500)/1000). A stale value, still served
// within its grace (--swr), has 0 left.
func (s *Server) ttl(c *conn, name string, args [][]byte) {
	if len(args) != 1 {
		wrongArgs(c, name)
		return
	}
	fresh, found, err := s.held(string(args[0]))
	if err != nil {
		s.writeErr(c, err)
		return
	}
	c.writeInt(redisTTL(fresh, found, name == "pttl"))
}

// redisTTL is TTL's answer (PTTL's with ms) for a key found or not, fresh for fresh.
func redisTTL(fresh time.Duration, found, ms bool) int64 {
	switch {
	case !found:
		return -2
	case fresh == fill.Never:
		return -1
	case ms:
		return max(fresh, 0).Milliseconds()
	}
	return (max(fresh, 0).Milliseconds() + 500) / 1000
}

func (s *Server) fillget(c *conn, args [][]byte) {
	if len(args) != 2 && len(args) != 4 {
		wrongArgs(c, "fillget")
		return
	}
	if s.cfg.Origin != nil {
		c.writeError("ERR FILLGET is for groups without --origin: this node fills from its origin")
		return
	}
	var o corral.LeaseOptions
	var ok bool
	if o.Fill, ok = positive(args[1], time.Millisecond); !ok {
		c.writeError("ERR fill_ms is not a positive integer")
		return
	}
	if err := s.cfg.Leases.Check(o.Fill); err != nil {
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
	l, err := s.cfg.Leases.Lease(ctx, s.cfg.Group, c.client, string(args[0]), o)
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

func (s *Server) fillset(c *conn, args [][]byte) {
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
	stored, err := s.cfg.Group.FillSet(s.ctx, string(args[0]), objects.Object{Body: bytes.Clone(args[1])}, token, e)
	s.cfg.Leases.Stored(token)
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
func (s *Server) deltag(c *conn, args [][]byte) {
	if len(args) == 0 {
		wrongArgs(c, "deltag")
		return
	}
	for _, t := range args {
		if err := s.cfg.Node.RemoveByTag(s.ctx, string(t)); err != nil && !unreached(err) {
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
func (s *Server) valueFits(c *conn, v []byte) bool {
	if len(v) > s.cfg.MaxValueBytes {
		c.writeError(s.valueTooLarge(len(v)))
		return false
	}
	return true
}

func (s *Server) valueTooLarge(n int) string {
	return fmt.Sprintf("ERR value of %d bytes exceeds the value limit of %d bytes", n, s.cfg.MaxValueBytes)
}

// unreached reports a write that stands although some member could not be told of it: the
// daemon logs it (the HTTP API answers 202); a Redis client gets the command's success.
func unreached(err error) bool {
	var ue *corral.UnreachedError
	return errors.As(err, &ue)
}

func (s *Server) writeErr(c *conn, err error) {
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
		s.cfg.Log.Warn("Redis protocol: command failed", "err", err)
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
