package httpapi

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/corralcache/corral"
	"github.com/corralcache/corral/cmd/corral/internal/clientlease"
	"github.com/corralcache/corral/cmd/corral/internal/objects"
)

// Lease headers of the HTTP API.
const (
	LeaseStateHeader = "X-Corral-Lease-State"
	LeaseTokenHeader = "X-Corral-Lease"
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
func (a *API) getLease(w http.ResponseWriter, r *http.Request, g *corral.Group[objects.Object], key string) {
	if a.cfg.Origin != nil {
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
		err = a.cfg.Leases.Check(o.Fill)
	}
	if err != nil {
		httpError(w, http.StatusBadRequest, err.Error())
		return
	}
	l, err := a.cfg.Leases.Lease(r.Context(), g, clientlease.ClientOf(r.RemoteAddr), key, o)
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
		a.writeError(w, r, err)
		return
	}
	w.Header().Set(LeaseStateHeader, string(l.State))
	if l.Token != "" {
		w.Header().Set(LeaseTokenHeader, l.Token)
	}
	switch l.State {
	case corral.LeaseFill:
		w.WriteHeader(http.StatusAccepted)
	case corral.LeaseBusy:
		httpError(w, http.StatusConflict, "busy: another caller holds the lease")
	default: // hit, stale
		a.writeObject(w, l.Value)
	}
}

// mayLease reports whether r may be granted a lease: with an API token, only a request that
// carries it (without it, ?lease is a plain read).
func (a *API) mayLease(r *http.Request) bool {
	return a.cfg.Token == nil || a.cfg.Token.Bearer(r.Header.Get("Authorization"))
}

// putExpiry stores a PUT's body with a lifetime of its own (?ttl=60s[&swr=30s]) and tags,
// under the lease of its X-Corral-Lease header if it has one: 204 stored, 409 the lease is
// not live. It reports false when the request is a plain PUT (neither a lease nor a ttl).
func (a *API) putExpiry(w http.ResponseWriter, r *http.Request, g *corral.Group[objects.Object], key string, v objects.Object, tags []string) bool {
	q := r.URL.Query()
	token := r.Header.Get(LeaseTokenHeader)
	if token == "" && !q.Has("ttl") && !q.Has("swr") {
		return false
	}
	e := corral.Expiry{TTL: a.cfg.TTL, SWR: a.cfg.SWR, Tags: tags}
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
		a.cfg.Leases.Stored(token)
	} else {
		err = g.SetWithExpiry(r.Context(), key, v, e)
	}
	switch {
	case err != nil:
		a.writeError(w, r, err)
	case !stored:
		httpError(w, http.StatusConflict, "the lease is no longer live (lapsed, revoked by a write, or the key's owner changed): nothing stored")
	default:
		w.WriteHeader(http.StatusNoContent)
	}
	return true
}

// writeObject sends a cached object as the body of a 200.
func (a *API) writeObject(w http.ResponseWriter, v objects.Object) {
	t := v.Type
	if t == "" {
		t = "application/octet-stream"
	}
	a.types.set(w.Header(), t)
	w.Write(v.Body)
}
