package debugui

import "time"

// State is what the page shows: one node's view of the cluster at one moment. The page polls
// it as JSON every second.
type State struct {
	Self      string    `json:"self"`       // this node's member name
	Epoch     uint64    `json:"epoch"`      // ring epoch of this node's view
	Ready     bool      `json:"ready"`      // what /readyz says: joined and not leaving
	StartedAt time.Time `json:"started_at"` // process start; the page shows uptime from it
	Members   []Member  `json:"members"`    // sorted by name
	Groups    []Group   `json:"groups"`     // sorted by name
	// JoinRefusals are the seeds that turn this node's joins away (another cluster label or
	// gossip key), sorted by seed; the page shows each in a banner. Empty when none does.
	JoinRefusals []JoinRefusal `json:"join_refusals,omitempty"`
}

// JoinRefusal is a seed that turned this node's last join attempt away, and why.
type JoinRefusal struct {
	Seed      string    `json:"seed"`      // "ip:port"
	Reason    string    `json:"reason"`    // "label", "key" or "encryption"
	Diagnosis string    `json:"diagnosis"` // one sentence; says "likely" where it is a guess
	At        time.Time `json:"at"`        // when the seed last refused
}

// Member is one member as this node knows it.
type Member struct {
	Name       string  `json:"name"`
	GossipAddr string  `json:"gossip_addr"` // "ip:port"
	PeerAddr   string  `json:"peer_addr"`   // "ip:port"
	Share      float64 `json:"share"`       // fraction of the ring this member owns, 0..1; must be finite
	Self       bool    `json:"self"`        // this member is the node serving the page
	Status     string  `json:"status"`      // "alive", "suspect", "leaving" (what the node knows)
}

// Group is one group's counters on this node since it started. Counters only grow; the page
// computes rates from them.
type Group struct {
	Name        string   `json:"name"`
	Gets        uint64   `json:"gets"`         // Get calls on this node
	Fills       uint64   `json:"fills"`        // loader runs on this node
	Coalesced   uint64   `json:"coalesced"`    // Gets answered by a fill or owner request in flight
	StaleServed uint64   `json:"stale_served"` // reads answered with a stale value
	NearHits    uint64   `json:"near_hits"`    // Gets answered from the near cache
	FillErrors  uint64   `json:"fill_errors"`  // loader runs that failed or panicked
	Entries     int      `json:"entries"`      // entries stored on this node now
	Bytes       uint64   `json:"bytes"`        // bytes stored on this node now
	HotKeys     []string `json:"hot_keys"`     // hottest first; arbitrary bytes, shown as text
	// HotTags holds the tags of the hot keys that carry any (RemoveByTag), by key.
	HotTags map[string][]string `json:"hot_tags,omitempty"`
	// HotBackups holds the members that keep backups of the hot keys (--backups), by key.
	HotBackups map[string][]string `json:"hot_backups,omitempty"`
	// SlowFill is the slowest fill of the last minute whose trace was kept, with a link to
	// the trace in a trace viewer (corral serve --trace-ui-url); nil without one.
	SlowFill *SlowFill `json:"slow_fill,omitempty"`
}

// SlowFill is a slow fill and where its trace is.
type SlowFill struct {
	Key      string  `json:"key"`       // arbitrary bytes, shown as text
	Millis   float64 `json:"millis"`    // how long the loader ran
	TraceID  string  `json:"trace_id"`  // 32 hex digits
	TraceURL string  `json:"trace_url"` // the trace in the viewer
}
