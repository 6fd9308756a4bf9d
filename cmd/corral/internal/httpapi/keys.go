package httpapi

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/corralcache/corral"
	"github.com/corralcache/corral/cmd/corral/internal/limithits"
	"github.com/corralcache/corral/cmd/corral/internal/objects"
	"github.com/corralcache/corral/fill"
)

// keyGroup resolves the request's group, creating it on first use — but with an API token,
// a request without it (a read) never creates one: it would be state a stranger made.
func (a *API) keyGroup(w http.ResponseWriter, r *http.Request, name string) (*corral.Group[objects.Object], bool) {
	if a.cfg.Token != nil && !a.cfg.Token.Bearer(r.Header.Get("Authorization")) {
		g, ok := a.cfg.Groups.Existing(name)
		if !ok {
			if fill.CheckName(name) != nil {
				httpError(w, http.StatusBadRequest, fill.CheckName(name).Error())
				return nil, false
			}
			httpError(w, http.StatusNotFound, fmt.Sprintf("no group %q on this node: with --api-token-file, groups are made by --group or by a request with the token", name))
			return nil, false
		}
		return g, true
	}
	g, err := a.cfg.Groups.Group(a.cfg.Node, name)
	if err != nil {
		status := http.StatusBadRequest
		if errors.Is(err, objects.ErrTooManyGroups) {
			status = http.StatusTooManyRequests
			a.cfg.Hits.Hit(limithits.Groups)
		}
		httpError(w, status, err.Error())
		return nil, false
	}
	return g, true
}

// getKey answers GET /v1/groups/{group}/keys/{key}: the hit path. A plain GET (no query)
// allocates nothing here; TestHitAllocs holds it to that.
func (a *API) getKey(w http.ResponseWriter, r *http.Request, group, key string) {
	g, ok := a.keyGroup(w, r, group)
	if !ok {
		return
	}
	// url.Values is a map made on every parse: a query-less GET does not parse one.
	query := r.URL.RawQuery != ""
	if query && r.URL.Query().Has("lease") && a.mayLease(r) {
		a.getLease(w, r, g, key)
		return
	}
	if a.cfg.Origin != nil {
		if err := a.cfg.Origin.Check(g.Name(), key); err != nil {
			httpError(w, http.StatusBadRequest, err.Error())
			return
		}
	}
	if query && r.URL.Query().Has("peek") {
		a.peekKey(w, r, g, key)
		return
	}
	v, info, err := g.GetWithInfo(r.Context(), key)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	a.entryHeaders(w, info.Source, info.Tags)
	a.writeObject(w, v)
}

func (a *API) putKey(w http.ResponseWriter, r *http.Request) {
	key := r.PathValue("key")
	g, ok := a.keyGroup(w, r, r.PathValue("group"))
	if !ok {
		return
	}
	body, ok := a.readBody(w, r, fmt.Sprintf("body exceeds the value limit of %d bytes", a.cfg.MaxValueBytes))
	if !ok {
		return
	}
	v := objects.Object{Body: body, Type: r.Header.Get("Content-Type")}
	if len(v.Type) > objects.MaxTypeBytes {
		httpError(w, http.StatusBadRequest, fmt.Sprintf("Content-Type of %d bytes exceeds the limit of %d bytes", len(v.Type), objects.MaxTypeBytes))
		return
	}
	tags := objects.Tags(r.Header)
	if a.putExpiry(w, r, g, key, v, tags) {
		return
	}
	if err := g.SetWithTags(r.Context(), key, v, tags...); err != nil {
		a.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// readBody reads r's body whole, at most MaxValueBytes of it. It reports false once it has
// answered why not: 413 with tooLarge past the bound, 408 for a body that did not arrive
// within --read-body-timeout (the connection then closes), 400 for one cut short.
func (a *API) readBody(w http.ResponseWriter, r *http.Request, tooLarge string) ([]byte, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, int64(a.cfg.MaxValueBytes)))
	if err == nil {
		return body, true
	}
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		a.cfg.Hits.Hit(limithits.Body)
		httpError(w, http.StatusRequestEntityTooLarge, tooLarge)
	case bodyTimedOut(err):
		a.cfg.Hits.Hit(limithits.ReadBodyTimeout)
		w.Header().Set("Connection", "close") // the rest of the body is still on its way
		httpError(w, http.StatusRequestTimeout,
			fmt.Sprintf("the body did not arrive whole within %v (--read-body-timeout)", a.cfg.Limits.ReadBodyTimeout))
	default:
		httpError(w, http.StatusBadRequest, "reading body: "+err.Error())
	}
	return nil, false
}

func (a *API) deleteKey(w http.ResponseWriter, r *http.Request) {
	key := r.PathValue("key")
	g, ok := a.keyGroup(w, r, r.PathValue("group"))
	if !ok {
		return
	}
	if err := g.Remove(r.Context(), key); err != nil {
		a.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// deleteTag purges a tag cluster-wide: every entry stored with it before the call is gone from
// every group on every member. 204, or 202 naming the members that could not be told.
func (a *API) deleteTag(w http.ResponseWriter, r *http.Request) {
	if err := a.cfg.Node.RemoveByTag(r.Context(), r.PathValue("tag")); err != nil {
		a.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// peekKey answers what the key's owner holds of key, without filling it: the value (200) with
// its tags and remaining lifetime in headers, or 404. For corral inspect and people debugging.
func (a *API) peekKey(w http.ResponseWriter, r *http.Request, g *corral.Group[objects.Object], key string) {
	v, info, err := g.Peek(r.Context(), key)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	a.entryHeaders(w, info.Source, info.Tags)
	w.Header().Set("X-Corral-Fresh-For", info.FreshFor.String())
	w.Header().Set("X-Corral-Stale-For", info.StaleFor.String())
	a.writeObject(w, v)
}

// entryHeaders says where an answer's value came from (X-Corral-Source) and its tags
// (Surrogate-Key), if it has any.
func (a *API) entryHeaders(w http.ResponseWriter, source corral.Source, tags []string) {
	setSource(w.Header(), source)
	if len(tags) > 0 {
		w.Header().Set(objects.SurrogateKeyHeader, strings.Join(tags, " "))
	}
}
