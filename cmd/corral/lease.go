package main

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/corralcache/corral"
	"github.com/corralcache/corral/cmd/corral/internal/clientlease"
	"github.com/corralcache/corral/cmd/corral/internal/objects"
)

// leaseConfig is what `corral serve` is told about leases for fillers outside Go, the Redis
// protocol front and the API token.
type leaseConfig struct {
	respPort      int
	respGroup     string
	apiTokenFile  string
	apiTokenReads bool
}

func addLeaseFlags(fs *flag.FlagSet, c *leaseConfig, lim *clientlease.Limits) {
	fs.IntVar(&c.respPort, "resp-port", 0, "Redis protocol (RESP2/RESP3) port: GET, SET, DEL, FILLGET, FILLSET, PING, HELLO, AUTH (0 = off)")
	fs.StringVar(&c.respGroup, "resp-group", "resp", "the group that holds every key of the Redis protocol front")
	fs.StringVar(&c.apiTokenFile, "api-token-file", "", "file holding the API token: PUT, DELETE and leases (?lease=; without it a plain read), and the Redis protocol's SET, DEL, FILLGET and FILLSET, need it as Authorization: Bearer <token> (AUTH <token>); a read without it never creates a group")
	fs.BoolVar(&c.apiTokenReads, "api-token-reads", false, "reads need the token too: GET, /v1/cluster, /debug/corral (and every Redis command but AUTH, HELLO and QUIT); /metrics, /healthz and /readyz stay open")
	d := clientlease.DefaultLimits()
	fs.DurationVar(&lim.MaxLease, "max-lease", d.MaxLease, "longest lease (?lease=, FILLGET's fill_ms) granted; longer are refused (400, -ERR)")
	fs.IntVar(&lim.MaxClientLeases, "max-client-leases", d.MaxClientLeases, "leases one client IP may hold at once through this node (more get 429, -BUSY); a lease counts until it is stored through this node or its time is up; 0 = no bound")
}

func (c *leaseConfig) validate() error {
	switch {
	case c.respPort < 0 || c.respPort > 65535:
		return fmt.Errorf("--resp-port %d out of range", c.respPort)
	case c.apiTokenReads && c.apiTokenFile == "":
		return errors.New("--api-token-reads needs --api-token-file")
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
		err = d.leases.Check(o.Fill)
	}
	if err != nil {
		httpError(w, http.StatusBadRequest, err.Error())
		return
	}
	l, err := d.leases.Lease(r.Context(), g, clientlease.ClientOf(r.RemoteAddr), key, o)
	var full *clientlease.FullError
	switch {
	case errors.As(err, &full):
		// 429 for the client's own bound, 503 for the owner's table.
		status := http.StatusServiceUnavailable
		if full.Client {
			status = http.StatusTooManyRequests
		}
		w.Header().Set("Retry-After", "1")
		httpError(w, status, full.Error())
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

// mayLease reports whether r may be granted a lease: with an API token, only a request that
// carries it (without it, ?lease is a plain read).
func (d *daemon) mayLease(r *http.Request) bool {
	return d.token == nil || d.token.Bearer(r.Header.Get("Authorization"))
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
		d.leases.Stored(token)
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
