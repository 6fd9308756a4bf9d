package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/corralcache/corral"
	"github.com/corralcache/corral/cmd/corral/internal/limithits"
	"github.com/corralcache/corral/cmd/corral/internal/objects"
)

// leaseConfig is what `corral serve` is told about leases for fillers outside Go, the Redis
// protocol front and the API token.
type leaseConfig struct {
	respPort        int
	respGroup       string
	apiTokenFile    string
	apiTokenReads   bool
	maxLease        time.Duration
	maxClientLeases int
}

// The defaults. A lease blocks every other caller of its key until it is stored or lapses,
// so a filler that crashed holds its key up for the whole of its fill time: one minute is
// far above a normal build (a page, a query) and the longest a waiter waits (WAIT). A
// client holds a lease per key it is building at once: 1024 is past any pool of workers
// in one pod, and 64 clients at the bound still leave room in a group's table (65,536).
const (
	defaultMaxLease        = time.Minute
	defaultMaxClientLeases = 1024
)

func addLeaseFlags(fs *flag.FlagSet, c *leaseConfig) {
	fs.IntVar(&c.respPort, "resp-port", 0, "Redis protocol (RESP2/RESP3) port: GET, SET, DEL, FILLGET, FILLSET, PING, HELLO, AUTH (0 = off)")
	fs.StringVar(&c.respGroup, "resp-group", "resp", "the group that holds every key of the Redis protocol front")
	fs.StringVar(&c.apiTokenFile, "api-token-file", "", "file holding the API token: PUT, DELETE and leases (?lease=; without it a plain read), and the Redis protocol's SET, DEL, FILLGET and FILLSET, need it as Authorization: Bearer <token> (AUTH <token>); a read without it never creates a group")
	fs.BoolVar(&c.apiTokenReads, "api-token-reads", false, "reads need the token too: GET, /v1/cluster, /debug/corral (and every Redis command but AUTH, HELLO and QUIT); /metrics, /healthz and /readyz stay open")
	fs.DurationVar(&c.maxLease, "max-lease", defaultMaxLease, "longest lease (?lease=, FILLGET's fill_ms) granted; longer are refused (400, -ERR)")
	fs.IntVar(&c.maxClientLeases, "max-client-leases", defaultMaxClientLeases, "leases one client IP may hold at once through this node (more get 429, -BUSY); a lease counts until it is stored through this node or its time is up; 0 = no bound")
}

func (c *leaseConfig) validate() error {
	switch {
	case c.respPort < 0 || c.respPort > 65535:
		return fmt.Errorf("--resp-port %d out of range", c.respPort)
	case c.apiTokenReads && c.apiTokenFile == "":
		return errors.New("--api-token-reads needs --api-token-file")
	case c.maxLease < corral.MinLeaseFill || c.maxLease > corral.MaxLeaseFill:
		return fmt.Errorf("--max-lease %v: want [%v, %v]", c.maxLease, corral.MinLeaseFill, corral.MaxLeaseFill)
	case c.maxClientLeases < 0:
		return fmt.Errorf("--max-client-leases %d is negative", c.maxClientLeases)
	}
	return nil
}

// authorize wraps the HTTP API: with a token, every request that changes something needs
// it, and with --api-token-reads every other request too, except the probes and /metrics,
// which a kubelet and a Prometheus scrape without credentials. A request without it gets
// 401 and changes nothing.
func (d *daemon) authorize(next http.Handler) http.Handler {
	if d.token == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/metrics", "/healthz", "/readyz":
			next.ServeHTTP(w, r)
			return
		}
		read := r.Method == http.MethodGet || r.Method == http.MethodHead
		if (read && !d.cfg.apiTokenReads) || d.token.Bearer(r.Header.Get("Authorization")) {
			next.ServeHTTP(w, r)
			return
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="corral"`)
		httpError(w, http.StatusUnauthorized, "unauthorized: send Authorization: Bearer <token> (see --api-token-file)")
	})
}

// Lease headers of the HTTP API.
const (
	leaseStateHeader = "X-Corral-Lease-State"
	leaseTokenHeader = "X-Corral-Lease"
)

// parseWait reads a duration parameter: a Go duration ("5s", "200ms") or a number of
// milliseconds ("5000"), as Redis clients think of them.
func parseWait(name, s string) (time.Duration, error) {
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
		if ms < 0 || ms > math.MaxInt64/int64(time.Millisecond) {
			return 0, fmt.Errorf("%s=%s out of range", name, s)
		}
		return time.Duration(ms) * time.Millisecond, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%s=%q: want a duration (5s, 200ms) or milliseconds", name, s)
	}
	return d, nil
}

// getLease answers GET …/keys/{key}?lease=5s[&wait=200ms] (see "Leases for fillers outside
// Go" in the README). getKey sends it only requests that may be granted a lease.
func (d *daemon) getLease(w http.ResponseWriter, r *http.Request, g *corral.Group[objects.Object], key string) {
	if d.origin != nil {
		httpError(w, http.StatusBadRequest, "leases are for groups without --origin: this node fills from its origin")
		return
	}
	q := r.URL.Query()
	var o corral.LeaseOptions
	var err error
	if o.Fill, err = parseWait("lease", q.Get("lease")); err == nil && q.Has("wait") {
		o.Wait, err = parseWait("wait", q.Get("wait"))
	}
	if err == nil {
		err = d.checkLease(o.Fill)
	}
	if err != nil {
		httpError(w, http.StatusBadRequest, err.Error())
		return
	}
	l, err := d.leases.lease(r.Context(), g, clientIP(r), key, o)
	var full *leasesFullError
	switch {
	case errors.As(err, &full):
		w.Header().Set("Retry-After", "1")
		httpError(w, full.status(), full.Error())
		return
	case errors.Is(err, corral.ErrLeaseArgument):
		httpError(w, http.StatusBadRequest, err.Error())
		return
	case err != nil:
		d.writeError(w, r, err)
		return
	}
	w.Header().Set(leaseStateHeader, string(l.State))
	if l.Token != "" {
		w.Header().Set(leaseTokenHeader, l.Token)
	}
	switch l.State {
	case corral.LeaseFill:
		w.WriteHeader(http.StatusAccepted)
	case corral.LeaseBusy:
		httpError(w, http.StatusConflict, "busy: another caller holds the lease")
	default: // hit, stale
		writeObject(w, l.Value)
	}
}

// checkLease refuses a fill time past --max-lease.
func (d *daemon) checkLease(fill time.Duration) error {
	if fill > d.cfg.maxLease {
		d.hits.Hit(limithits.LeaseTime)
		return fmt.Errorf("a lease of %v exceeds the limit of %v (--max-lease)", fill, d.cfg.maxLease)
	}
	return nil
}

// mayLease reports whether r may be granted a lease: with an API token, only a request that
// carries it (without it, ?lease is a plain read).
func (d *daemon) mayLease(r *http.Request) bool {
	return d.token == nil || d.token.Bearer(r.Header.Get("Authorization"))
}

// leasesFullError is a lease refused because a table is full: this client's leases
// (--max-client-leases) or the owner's table of the group.
type leasesFullError struct {
	client bool // the client's bound, not the owner's table
	msg    string
}

func (e *leasesFullError) Error() string { return e.msg }

// status is the HTTP status: 429 for the client's own bound, 503 for the owner's table.
func (e *leasesFullError) status() int {
	if e.client {
		return http.StatusTooManyRequests
	}
	return http.StatusServiceUnavailable
}

// clientLeases bounds the leases each client holds through this node. A lease counts from
// its grant until a FillSet with its token passes through this node or its fill time is
// up: a lease revoked by a write, or stored through another node, counts until then, which
// errs on the side of the bound.
type clientLeases struct {
	max  int // 0 = no bound
	hits *limithits.Counter

	mu sync.Mutex // guards byClient, owner and swept
	// byClient holds, per client, its slots being granted and the expiry of each token.
	byClient map[string]*leaseHolder
	owner    map[string]string // token → client
	swept    time.Time         // when every client's expired leases were last dropped
}

type leaseHolder struct {
	granting int                  // Lease calls in progress
	tokens   map[string]time.Time // token → when its fill time is up
}

func newClientLeases(max int, hits *limithits.Counter) *clientLeases {
	return &clientLeases{max: max, hits: hits, byClient: map[string]*leaseHolder{}, owner: map[string]string{}, swept: time.Now()}
}

// lease calls g.Lease for client within its bound, and maps a full table to a
// *leasesFullError.
func (cl *clientLeases) lease(ctx context.Context, g *corral.Group[objects.Object], client, key string, o corral.LeaseOptions) (corral.Lease[objects.Object], error) {
	if cl.max == 0 {
		return cl.leaseFrom(ctx, g, key, o)
	}
	if !cl.reserve(client) {
		cl.hits.Hit(limithits.ClientLeases)
		return corral.Lease[objects.Object]{}, &leasesFullError{client: true,
			msg: fmt.Sprintf("this client holds %d leases, the limit (--max-client-leases): store or let some lapse first", cl.max)}
	}
	l, err := cl.leaseFrom(ctx, g, key, o)
	cl.settle(client, l.Token, time.Now().Add(o.Fill))
	return l, err
}

// leaseFrom calls g.Lease, and maps a full table to a *leasesFullError.
func (cl *clientLeases) leaseFrom(ctx context.Context, g *corral.Group[objects.Object], key string, o corral.LeaseOptions) (corral.Lease[objects.Object], error) {
	l, err := g.Lease(ctx, key, o)
	if errors.Is(err, corral.ErrTooManyLeases) {
		cl.hits.Hit(limithits.LeasesFull)
		return l, &leasesFullError{msg: strings.TrimPrefix(err.Error(), "corral: ") + ": try again when leases end"}
	}
	return l, err
}

// reserve takes a slot for a Lease call of client, if it has one left.
func (cl *clientLeases) reserve(client string) bool {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	now := time.Now()
	// Clients that went away leave expired tokens: drop them all now and then.
	if now.Sub(cl.swept) > time.Minute {
		for c, h := range cl.byClient {
			cl.dropExpiredLocked(h, now)
			if h.granting == 0 && len(h.tokens) == 0 {
				delete(cl.byClient, c)
			}
		}
		cl.swept = now
	}
	h := cl.byClient[client]
	if h == nil {
		h = &leaseHolder{tokens: map[string]time.Time{}}
		cl.byClient[client] = h
	}
	if h.granting+len(h.tokens) >= cl.max {
		// At the bound, and only then, look for leases whose time is up: a scan of at most
		// cl.max tokens.
		cl.dropExpiredLocked(h, now)
		if h.granting+len(h.tokens) >= cl.max {
			return false
		}
	}
	h.granting++
	return true
}

// settle ends a Lease call of client's: token, if one was granted, counts until expires.
func (cl *clientLeases) settle(client, token string, expires time.Time) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	h := cl.byClient[client]
	h.granting--
	if token != "" {
		h.tokens[token] = expires
		cl.owner[token] = client
	}
	if h.granting == 0 && len(h.tokens) == 0 {
		delete(cl.byClient, client)
	}
}

// stored drops token, whose FillSet passed through this node (stored or not: either way
// it is no longer live).
func (cl *clientLeases) stored(token string) {
	if cl.max == 0 {
		return
	}
	cl.mu.Lock()
	defer cl.mu.Unlock()
	client, ok := cl.owner[token]
	if !ok {
		return
	}
	delete(cl.owner, token)
	if h := cl.byClient[client]; h != nil {
		delete(h.tokens, token)
		if h.granting == 0 && len(h.tokens) == 0 {
			delete(cl.byClient, client)
		}
	}
}

// dropExpiredLocked drops h's tokens whose time is up.
func (cl *clientLeases) dropExpiredLocked(h *leaseHolder, now time.Time) {
	for tok, exp := range h.tokens {
		if !now.Before(exp) {
			delete(h.tokens, tok)
			delete(cl.owner, tok)
		}
	}
}

// held is how many leases client holds (for tests).
func (cl *clientLeases) held(client string) int {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if h := cl.byClient[client]; h != nil {
		return len(h.tokens)
	}
	return 0
}

// putExpiry stores a PUT's body with a lifetime of its own (?ttl=60s[&swr=30s]) and tags,
// under the lease of its X-Corral-Lease header if it has one: 204 stored, 409 the lease is
// not live. It reports false when the request is a plain PUT (neither a lease nor a ttl).
func (d *daemon) putExpiry(w http.ResponseWriter, r *http.Request, g *corral.Group[objects.Object], key string, v objects.Object, tags []string) bool {
	q := r.URL.Query()
	token := r.Header.Get(leaseTokenHeader)
	if token == "" && !q.Has("ttl") && !q.Has("swr") {
		return false
	}
	e := corral.Expiry{TTL: d.cfg.ttl, SWR: d.cfg.swr, Tags: tags}
	var err error
	if q.Has("ttl") {
		e.TTL, err = parseWait("ttl", q.Get("ttl"))
	}
	if err == nil && q.Has("swr") {
		e.SWR, err = parseWait("swr", q.Get("swr"))
	}
	if err != nil {
		httpError(w, http.StatusBadRequest, err.Error())
		return true
	}
	stored := true
	if token != "" {
		stored, err = g.FillSet(r.Context(), key, v, token, e)
		d.leases.stored(token)
	} else {
		err = g.SetWithExpiry(r.Context(), key, v, e)
	}
	switch {
	case err != nil:
		d.writeError(w, r, err)
	case !stored:
		httpError(w, http.StatusConflict, "the lease is no longer live (lapsed, revoked by a write, or the key's owner changed): nothing stored")
	default:
		w.WriteHeader(http.StatusNoContent)
	}
	return true
}

// writeObject sends a cached object as the body of a 200.
func writeObject(w http.ResponseWriter, v objects.Object) {
	if v.Type != "" {
		w.Header().Set("Content-Type", v.Type)
	} else {
		w.Header().Set("Content-Type", "application/octet-stream")
	}
	w.Write(v.Body)
}
