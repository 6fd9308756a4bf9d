package httpapi

import (
	"encoding/json"
	"net/http"
	"sort"
	"strings"
	"time"
)

// ClusterView is the JSON of GET /v1/cluster: the node's view of the cluster, and with ?key=K
// the member it routes K to.
type ClusterView struct {
	Self    string          `json:"self"`
	Epoch   uint64          `json:"epoch"`
	Members []ClusterMember `json:"members"`
	Owner   string          `json:"owner,omitempty"`
	// JoinRefusals are the seeds that turn this node's joins away, and why: what keeps a node
	// alone in its view although its seeds answer. Absent when none does.
	JoinRefusals []JoinRefusal `json:"join_refusals,omitempty"`
}

// JoinRefusal is a seed that turned this node's last join attempt away (see
// peer.JoinRefusedError).
type JoinRefusal struct {
	Seed      string    `json:"seed"`      // "ip:port"
	Reason    string    `json:"reason"`    // label, key or encryption (peer.RefusedReasons)
	Diagnosis string    `json:"diagnosis"` // what the node saw and what it suggests; "likely" where a guess
	Error     string    `json:"error"`     // memberlist's error
	At        time.Time `json:"at"`        // when the seed refused
}

// ClusterMember is a member in a ClusterView, with its share of the ring.
type ClusterMember struct {
	Name       string  `json:"name"`
	GossipAddr string  `json:"gossip_addr"`
	PeerAddr   string  `json:"peer_addr"`
	Share      float64 `json:"share"`
}

func (a *API) clusterView(key string) ClusterView {
	shares := a.cfg.Node.Shares()
	v := ClusterView{Self: a.cfg.Node.Name(), Epoch: a.cfg.Node.Epoch()}
	for _, m := range a.cfg.Node.Members() {
		v.Members = append(v.Members, ClusterMember{Name: m.Name, GossipAddr: m.GossipAddr, PeerAddr: m.PeerAddr, Share: shares[m.Name]})
	}
	sort.Slice(v.Members, func(i, j int) bool { return v.Members[i].Name < v.Members[j].Name })
	for _, r := range a.cfg.Node.JoinRefusals() {
		v.JoinRefusals = append(v.JoinRefusals, JoinRefusal{Seed: r.Seed, Reason: r.Reason, Diagnosis: r.Diagnosis, Error: r.Err.Error(), At: r.At})
	}
	if key != "" {
		v.Owner = a.cfg.Node.Owner(key).Name
	}
	return v
}

func (a *API) cluster(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if q.Has("key") && strings.TrimSpace(q.Get("key")) == "" {
		httpError(w, http.StatusBadRequest, "empty key")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(a.clusterView(q.Get("key")))
}
