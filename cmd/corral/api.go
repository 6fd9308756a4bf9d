package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/corralcache/corral"
	"github.com/corralcache/corral/cmd/corral/internal/clip"
	"github.com/corralcache/corral/cmd/corral/internal/limithits"
	"github.com/corralcache/corral/cmd/corral/internal/objects"
	"github.com/corralcache/corral/fill"
)

func (d *daemon) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/groups/{group}/keys/{key}", d.getKey)
	mux.HandleFunc("PUT /v1/groups/{group}/keys/{key}", d.putKey)
	mux.HandleFunc("DELETE /v1/groups/{group}/keys/{key}", d.deleteKey)
	mux.HandleFunc("DELETE /v1/tags/{tag}", d.deleteTag)
	mux.HandleFunc("GET /v1/cluster", d.cluster)
	mux.Handle("GET /metrics", promhttp.HandlerFor(d.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		// Liveness: the process answers. It never depends on other members.
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", d.readyz)
	d.debugRoutes(mux)
	return mux
}

// keyGroup resolves the request's group, creating it on first use — but with an API token,
// a request without it (a read) never creates one: it would be state a stranger made.
func (d *daemon) keyGroup(w http.ResponseWriter, r *http.Request) (*corral.Group[objects.Object], string, bool) {
	name := r.PathValue("group")
	if d.token != nil && !d.token.Bearer(r.Header.Get("Authorization")) {
		g, ok := d.groups.Existing(name)
		if !ok {
			if fill.CheckName(name) != nil {
				httpError(w, http.StatusBadRequest, fill.CheckName(name).Error())
				return nil, "", false
			}
			httpError(w, http.StatusNotFound, fmt.Sprintf("no group %q on this node: with --api-token-file, groups are made by --group or by a request with the token", name))
			return nil, "", false
		}
		return g, r.PathValue("key"), true
	}
	g, err := d.groups.Group(d.node, name)
	if err != nil {
		status := http.StatusBadRequest
		if errors.Is(err, objects.ErrTooManyGroups) {
			status = http.StatusTooManyRequests
			d.hits.Hit(limithits.Groups)
		}
		httpError(w, status, err.Error())
		return nil, "", false
	}
	return g, r.PathValue("key"), true
}

func (d *daemon) getKey(w http.ResponseWriter, r *http.Request) {
	g, key, ok := d.keyGroup(w, r)
	if !ok {
		return
	}
	if r.URL.Query().Has("lease") && d.mayLease(r) {
		d.getLease(w, r, g, key)
		return
	}
	if d.origin != nil {
		if err := d.origin.Check(g.Name(), key); err != nil {
			httpError(w, http.StatusBadRequest, err.Error())
			return
		}
	}
	if r.URL.Query().Has("peek") {
		d.peekKey(w, r, g, key)
		return
	}
	v, info, err := g.GetWithInfo(r.Context(), key)
	if err != nil {
		d.writeError(w, r, err)
		return
	}
	w.Header().Set("X-Corral-Source", string(info.Source))
	if len(info.Tags) > 0 {
		w.Header().Set(objects.SurrogateKeyHeader, strings.Join(info.Tags, " "))
	}
	if v.Type != "" {
		w.Header().Set("Content-Type", v.Type)
	} else {
		w.Header().Set("Content-Type", "application/octet-stream")
	}
	w.Write(v.Body)
}

func (d *daemon) putKey(w http.ResponseWriter, r *http.Request) {
	g, key, ok := d.keyGroup(w, r)
	if !ok {
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, int64(d.cfg.maxValueBytes)))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			d.hits.Hit(limithits.Body)
			httpError(w, http.StatusRequestEntityTooLarge,
				fmt.Sprintf("body exceeds the value limit of %d bytes", d.cfg.maxValueBytes))
			return
		}
		httpError(w, http.StatusBadRequest, "reading body: "+err.Error())
		return
	}
	v := objects.Object{Body: body, Type: r.Header.Get("Content-Type")}
	if len(v.Type) > objects.MaxTypeBytes {
		httpError(w, http.StatusBadRequest, fmt.Sprintf("Content-Type of %d bytes exceeds the limit of %d bytes", len(v.Type), objects.MaxTypeBytes))
		return
	}
	tags := objects.Tags(r.Header)
	if d.putExpiry(w, r, g, key, v, tags) {
		return
	}
	if err := g.SetWithTags(r.Context(), key, v, tags...); err != nil {
		d.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (d *daemon) deleteKey(w http.ResponseWriter, r *http.Request) {
	g, key, ok := d.keyGroup(w, r)
	if !ok {
		return
	}
	if err := g.Remove(r.Context(), key); err != nil {
		d.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// deleteTag purges a tag cluster-wide: every entry stored with it before the call is gone from
// every group on every member. 204, or 202 naming the members that could not be told.
func (d *daemon) deleteTag(w http.ResponseWriter, r *http.Request) {
	if err := d.node.RemoveByTag(r.Context(), r.PathValue("tag")); err != nil {
		d.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// peekKey answers what the key's owner holds of key, without filling it: the value (200) with
// its tags and remaining lifetime in headers, or 404. For corral inspect and people debugging.
func (d *daemon) peekKey(w http.ResponseWriter, r *http.Request, g *corral.Group[objects.Object], key string) {
	v, info, err := g.Peek(r.Context(), key)
	if err != nil {
		d.writeError(w, r, err)
		return
	}
	w.Header().Set("X-Corral-Source", string(info.Source))
	if len(info.Tags) > 0 {
		w.Header().Set(objects.SurrogateKeyHeader, strings.Join(info.Tags, " "))
	}
	w.Header().Set("X-Corral-Fresh-For", info.FreshFor.String())
	w.Header().Set("X-Corral-Stale-For", info.StaleFor.String())
	writeObject(w, v)
}

// writeError maps corral's errors to HTTP statuses with a short reason.
func (d *daemon) writeError(w http.ResponseWriter, r *http.Request, err error) {
	var le *corral.LimitError
	var ue *corral.UnreachedError
	var fe *corral.FillError
	switch {
	case errors.Is(err, corral.ErrNotFound):
		httpError(w, http.StatusNotFound, "not found")
	case errors.As(err, &le):
		status := http.StatusBadRequest
		if le.Limit == "value" {
			status = http.StatusRequestEntityTooLarge
		}
		httpError(w, status, err.Error())
	case errors.Is(err, corral.ErrInvalidTag):
		httpError(w, http.StatusBadRequest, err.Error())
	case errors.Is(err, corral.ErrFillCycle):
		httpError(w, http.StatusLoopDetected, err.Error())
	case errors.As(err, &ue):
		// The owner applied the write; some near copies may live until they expire.
		httpError(w, http.StatusAccepted, err.Error())
	case errors.Is(err, corral.ErrClosed):
		httpError(w, http.StatusServiceUnavailable, "node is shutting down")
	case errors.Is(err, context.Canceled) && r.Context().Err() != nil:
		// The client went away; nobody reads the answer.
	case errors.Is(err, corral.ErrPeerTimeout):
		// The time went to peers that did not answer, not to the origin.
		httpError(w, http.StatusGatewayTimeout, "peers: "+clip.Reason(fe0(err)))
	case errors.As(err, &fe):
		httpError(w, http.StatusBadGateway, "origin: "+clip.Reason(fe.Err))
	default:
		d.log.Warn("request failed", "method", r.Method, "path", r.URL.EscapedPath(), "err", err)
		httpError(w, http.StatusBadGateway, clip.Reason(err))
	}
}

// fe0 returns the Err of err's *FillError, or err.
func fe0(err error) error {
	var fe *corral.FillError
	if errors.As(err, &fe) {
		return fe.Err
	}
	return err
}

func httpError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	fmt.Fprintln(w, msg)
}

func (d *daemon) ready() (bool, string) {
	if d.stopping.Load() || !d.node.Ready() {
		return false, "shutting down"
	}
	if n := len(d.node.Members()); n < d.cfg.minMembers {
		return false, fmt.Sprintf("%d of %d members seen (--min-members)", n, d.cfg.minMembers)
	}
	return true, "ready"
}

func (d *daemon) readyz(w http.ResponseWriter, r *http.Request) {
	ok, why := d.ready()
	if !ok {
		httpError(w, http.StatusServiceUnavailable, why)
		return
	}
	fmt.Fprintln(w, why)
}

// clusterView is the JSON of GET /v1/cluster.
type clusterView struct {
	Self    string          `json:"self"`
	Epoch   uint64          `json:"epoch"`
	Members []clusterMember `json:"members"`
	Owner   string          `json:"owner,omitempty"`
}

type clusterMember struct {
	Name       string  `json:"name"`
	GossipAddr string  `json:"gossip_addr"`
	PeerAddr   string  `json:"peer_addr"`
	Share      float64 `json:"share"`
}

func (d *daemon) clusterView(key string) clusterView {
	shares := d.node.Shares()
	v := clusterView{Self: d.node.Name(), Epoch: d.node.Epoch()}
	for _, m := range d.node.Members() {
		v.Members = append(v.Members, clusterMember{Name: m.Name, GossipAddr: m.GossipAddr, PeerAddr: m.PeerAddr, Share: shares[m.Name]})
	}
	sort.Slice(v.Members, func(i, j int) bool { return v.Members[i].Name < v.Members[j].Name })
	if key != "" {
		v.Owner = d.node.Owner(key).Name
	}
	return v
}

func (d *daemon) cluster(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if q.Has("key") && strings.TrimSpace(q.Get("key")) == "" {
		httpError(w, http.StatusBadRequest, "empty key")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(d.clusterView(q.Get("key")))
}
