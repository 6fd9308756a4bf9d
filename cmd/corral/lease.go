package main

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"flag"
	"fmt"
	"math"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/corralcache/corral"
)

// leaseConfig is what `corral serve` is told about leases for fillers outside Go, the Redis
// protocol front and the API token.
type leaseConfig struct {
	respPort      int
	respGroup     string
	apiTokenFile  string
	apiTokenReads bool
}

func addLeaseFlags(fs *flag.FlagSet, c *leaseConfig) {
	fs.IntVar(&c.respPort, "resp-port", 0, "Redis protocol (RESP2/RESP3) port: GET, SET, DEL, FILLGET, FILLSET, PING, HELLO, AUTH (0 = off)")
	fs.StringVar(&c.respGroup, "resp-group", "resp", "the group that holds every key of the Redis protocol front")
	fs.StringVar(&c.apiTokenFile, "api-token-file", "", "file holding the API token: PUT and DELETE (and the Redis protocol's SET, DEL, FILLSET) need it as Authorization: Bearer <token> (AUTH <token>)")
	fs.BoolVar(&c.apiTokenReads, "api-token-reads", false, "reads need the token too: GET, /v1/cluster, /debug/corral (and every Redis command but AUTH, HELLO and QUIT); /metrics, /healthz and /readyz stay open")
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

// apiToken is the API token, kept as its SHA-256 so that a comparison takes the same time
// whatever the length or the content of what a client sent. It is never logged.
type apiToken struct{ sum [sha256.Size]byte }

func loadToken(path string) (*apiToken, error) {
	if path == "" {
		return nil, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--api-token-file: %w", err)
	}
	tok := strings.TrimSpace(string(b)) // editors and `echo` add a newline
	if tok == "" {
		return nil, errors.New("--api-token-file: the file is empty")
	}
	return &apiToken{sum: sha256.Sum256([]byte(tok))}, nil
}

// matches reports, in constant time, whether s is the token.
func (t *apiToken) matches(s string) bool {
	sum := sha256.Sum256([]byte(s))
	return subtle.ConstantTimeCompare(sum[:], t.sum[:]) == 1
}

// bearer reports whether an Authorization header carries the token.
func (t *apiToken) bearer(header string) bool {
	scheme, cred, ok := strings.Cut(header, " ")
	return ok && strings.EqualFold(scheme, "Bearer") && t.matches(strings.TrimSpace(cred))
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
		if (read && !d.cfg.apiTokenReads) || d.token.bearer(r.Header.Get("Authorization")) {
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

// getLease answers GET …/keys/{key}?lease=5s[&wait=200ms] (see DESIGN.md, "Leases for
// fillers outside Go").
func (d *daemon) getLease(w http.ResponseWriter, r *http.Request, g *corral.Group[object], key string) {
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
	if err != nil {
		httpError(w, http.StatusBadRequest, err.Error())
		return
	}
	l, err := g.Lease(r.Context(), key, o)
	if err != nil {
		if errors.Is(err, corral.ErrLeaseArgument) {
			httpError(w, http.StatusBadRequest, err.Error())
			return
		}
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

// putExpiry stores a PUT's body with a lifetime of its own (?ttl=60s[&swr=30s]), under the
// lease of its X-Corral-Lease header if it has one: 204 stored, 409 the lease is not live.
// It reports false when the request is a plain PUT (neither a lease nor a ttl).
func (d *daemon) putExpiry(w http.ResponseWriter, r *http.Request, g *corral.Group[object], key string, v object) bool {
	q := r.URL.Query()
	token := r.Header.Get(leaseTokenHeader)
	if token == "" && !q.Has("ttl") && !q.Has("swr") {
		return false
	}
	e := corral.Expiry{TTL: d.cfg.ttl, SWR: d.cfg.swr}
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
func writeObject(w http.ResponseWriter, v object) {
	if v.Type != "" {
		w.Header().Set("Content-Type", v.Type)
	} else {
		w.Header().Set("Content-Type", "application/octet-stream")
	}
	w.Write(v.Body)
}
