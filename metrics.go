package corral

import (
	"errors"
	"slices"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/corralcache/corral/fill"
	"github.com/corralcache/corral/internal/limit"
	"github.com/corralcache/corral/internal/owner"
	"github.com/corralcache/corral/internal/peertls"
	"github.com/corralcache/corral/internal/view"
	"github.com/corralcache/corral/internal/viewkeeper"
	"github.com/corralcache/corral/peer"
	"github.com/corralcache/corral/transport"
)

// metricSources are what the metrics read at scrape time, handed to newMetrics by the node:
// the hot path pays nothing for them.
type metricSources struct {
	view      *atomic.Pointer[view.View]
	members   *viewkeeper.Membership
	groups    func() map[string]GroupStats
	fills     *fill.Limiter // nil = unbounded
	refreshes *fill.Limiter
}

// metrics are the node's Prometheus metrics. Group counters are read from the groups
// at scrape time, so the hot path pays nothing for them.
type metrics struct {
	reg          prometheus.Registerer
	collectors   []prometheus.Collector
	fillDuration *prometheus.HistogramVec
	peerRequests *prometheus.CounterVec
	handoff      *prometheus.CounterVec
	refused      *prometheus.CounterVec
	purges       prometheus.Counter
	limits       limitCounts
	// client is the node's peer client once made: corral_timer_lateness_seconds reads it.
	client atomic.Pointer[transport.Client]
}

// limitCounts holds a counter per limit of limit.Counted.
type limitCounts struct{ hits [5]atomic.Uint64 }

// hit counts a hit of name (one of limit.Counted; others are ignored).
func (l *limitCounts) hit(name string) {
	if i := slices.Index(limit.Counted, name); i >= 0 {
		l.hits[i].Add(1)
	}
}

// limitCollector emits corral_limit_hits_total.
type limitCollector struct {
	src  *metricSources
	hits *limitCounts
	desc *prometheus.Desc
}

func (c *limitCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *limitCollector) Collect(ch chan<- prometheus.Metric) {
	for i, name := range limit.Counted {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(c.hits.hits[i].Load()), name)
	}
	var fills uint64
	if c.src.fills != nil {
		fills = c.src.fills.Full()
	}
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(fills), "fills")
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(c.src.refreshes.Full()), "refreshes")
}

var groupCounters = []struct {
	name, help string
	value      func(GroupStats) float64
}{
	{"corral_gets_total", "Get calls on this node.", func(s GroupStats) float64 { return float64(s.Gets) }},
	{"corral_fills_total", "Keys this node loaded from the source (a loader run, or one key of a batch loader's call); the sum over nodes is the cluster's fills.", func(s GroupStats) float64 { return float64(s.Fills) }},
	{"corral_fill_coalesced_total", "Gets on this node answered by a fill or owner request already in flight.", func(s GroupStats) float64 { return float64(s.Coalesced) }},
	{"corral_fill_errors_total", "Loader runs that failed or panicked.", func(s GroupStats) float64 { return float64(s.FillErrors) }},
	{"corral_stale_served_total", "Reads answered with a stale value.", func(s GroupStats) float64 { return float64(s.StaleServed) }},
	{"corral_refreshes_total", "Background refreshes started.", func(s GroupStats) float64 { return float64(s.Refreshes) }},
	{"corral_near_hits_total", "Gets answered by a near copy of a key owned elsewhere.", func(s GroupStats) float64 { return float64(s.NearHits) }},
	{"corral_lease_granted_total", "Lease tokens this node handed out as a key's owner (FILL, and STALE with a token).", func(s GroupStats) float64 { return float64(s.LeasesGranted) }},
	{"corral_lease_lapsed_total", "Leases that lapsed on this node without a FillSet.", func(s GroupStats) float64 { return float64(s.LeasesLapsed) }},
	{"corral_lease_rejected_total", "FillSets refused on this node because their token was no longer live.", func(s GroupStats) float64 { return float64(s.LeaseRejected) }},
	{"corral_batch_requests_total", "Batched requests (GetMany) this node sent to keys' owners: one per owner per GetMany, whatever its number of keys.", func(s GroupStats) float64 { return float64(s.BatchRequests) }},
	{"corral_batch_request_keys_total", "Keys of those requests: divided by corral_batch_requests_total, the keys a batch carries on average.", func(s GroupStats) float64 { return float64(s.BatchRequestKeys) }},
	{"corral_batch_loads_total", "Calls of a group's batch loader (WithBatchLoad) on this node.", func(s GroupStats) float64 { return float64(s.BatchLoads) }},
	{"corral_batch_load_keys_total", "Keys of those calls: divided by corral_batch_loads_total, the keys one database query loads on average.", func(s GroupStats) float64 { return float64(s.BatchLoadKeys) }},
	{"corral_backups_sent_total", "Entries this node gave the backups of keys it owns (WithBackups).", func(s GroupStats) float64 { return float64(s.BackupsSent) }},
	{"corral_backups_taken_total", "Backups this node took as its own value on coming to own their keys (their owner left or crashed): each one a fill saved.", func(s GroupStats) float64 { return float64(s.BackupsTaken) }},
	{"corral_tag_purged_total", "Values dropped on this node (store and near copies) because a tag of theirs was purged after they were made: found on a read, by the sweep, or a fill's result.", func(s GroupStats) float64 { return float64(s.Purged) }},
}

// excludedCollector emits corral_members_excluded from the view.
type excludedCollector struct {
	src  *metricSources
	desc *prometheus.Desc
}

func (c *excludedCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *excludedCollector) Collect(ch chan<- prometheus.Metric) {
	counts := map[string]int{view.ExcludedReconciling: 0, view.ExcludedPeerTLS: 0, view.ExcludedTLSPending: 0, view.ExcludedTLSFailed: 0}
	if v := c.src.view.Load(); v != nil {
		for _, reason := range v.Excluded {
			counts[reason]++
		}
	}
	for reason, k := range counts {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(k), reason)
	}
}

// joinRefusedCollector emits corral_join_refused_total from the membership's counts.
type joinRefusedCollector struct {
	src  *metricSources
	desc *prometheus.Desc
}

func (c *joinRefusedCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *joinRefusedCollector) Collect(ch chan<- prometheus.Metric) {
	members := c.src.members.Get()
	for _, reason := range peer.RefusedReasons {
		var k uint64
		if members != nil {
			k = members.JoinRefusedCount(reason)
		}
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(k), reason)
	}
}

// groupCollector emits the group counters.
type groupCollector struct {
	src    *metricSources
	descs  []*prometheus.Desc // groupCounters'
	gauges []*prometheus.Desc // groupGauges'
}

// groupGauges are the group metrics that go down as well as up.
var groupGauges = []struct {
	name, help string
	value      func(GroupStats) float64
}{
	{"corral_backup_entries", "Copies this node keeps now as a backup of keys other members own (WithBackups): each would be this node's value, with no fill, if their owner crashed.", func(s GroupStats) float64 { return float64(s.BackupEntries) }},
}

func (c *groupCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
	for _, d := range c.gauges {
		ch <- d
	}
}

func (c *groupCollector) Collect(ch chan<- prometheus.Metric) {
	for name, s := range c.src.groups() {
		for i, gc := range groupCounters {
			ch <- prometheus.MustNewConstMetric(c.descs[i], prometheus.CounterValue, gc.value(s), name)
		}
		for i, gg := range groupGauges {
			ch <- prometheus.MustNewConstMetric(c.gauges[i], prometheus.GaugeValue, gg.value(s), name)
		}
	}
}

func newMetrics(reg prometheus.Registerer, src *metricSources) (*metrics, error) {
	m := &metrics{
		reg: reg,
		fillDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "corral_fill_duration_seconds",
			Help:    "Loader run time.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16), // 0.5 ms … 16 s
		}, []string{"group"}),
		peerRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "corral_peer_requests_total",
			Help: "Peer RPCs sent, by method and code.",
		}, []string{"method", "code"}),
		handoff: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "corral_handoff_keys_total",
			Help: "Entries handed over, by direction (sent, received).",
		}, []string{"direction"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "corral_peer_requests_refused_total",
			Help: "Peer requests and connections this node refused, by reason (\"not a member\": from an address that is not a member's, without TLS; \"tls: …\": a peer's certificate failed the check of either side of a handshake — no certificate, expired (or not valid yet), unknown authority (does not chain to the CA), bad certificate, names no member).",
		}, []string{"reason"}),
		purges: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "corral_tag_purges_total",
			Help: "Purges of a tag (RemoveByTag) applied on this node: its own and those it was told of.",
		}),
	}
	// Every reason is exported from the start, at 0, so that an alert on a rise needs no
	// first occurrence to see.
	for _, r := range append([]string{owner.RefusedNonMember}, peertls.Reasons...) {
		m.refused.WithLabelValues(r)
	}
	gc := &groupCollector{src: src}
	for _, c := range groupCounters {
		gc.descs = append(gc.descs, prometheus.NewDesc(c.name, c.help, []string{"group"}, nil))
	}
	for _, c := range groupGauges {
		gc.gauges = append(gc.gauges, prometheus.NewDesc(c.name, c.help, []string{"group"}, nil))
	}
	members := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "corral_members",
		Help: "Members in this node's view.",
	}, func() float64 {
		if v := src.view.Load(); v != nil {
			return float64(len(v.List))
		}
		return 0
	})
	gossipKeys := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "corral_gossip_keys",
		Help: "Gossip encryption keys this node holds (0: plaintext gossip); above 1 while a key rotation is under way.",
	}, func() float64 {
		members := src.members.Get()
		if members == nil {
			return 0
		}
		return float64(members.KeyCount())
	})
	lateness := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "corral_timer_lateness_seconds",
		Help: "How late this node's timers fired lately: the largest delay of the last 15 to 30 seconds, 0 under 10 ms. Its answers tell it to peers, whose silence bounds for it stretch by twice it; hundreds of ms mean a node starved of CPU (throttled).",
	}, func() float64 {
		if c := m.client.Load(); c != nil {
			return c.Lateness().Seconds()
		}
		return 0
	})
	excluded := &excludedCollector{src: src, desc: prometheus.NewDesc("corral_members_excluded",
		"Live members this node keeps out of its ring, by reason (reconciling: back from the dead, exchanging the writes it missed; peer TLS differs: one of the two runs without TLS; peer TLS failed: no mutual TLS handshake completes with it; peer TLS not checked yet: a new member, checked at once).",
		[]string{"reason"}, nil)}
	limits := &limitCollector{src: src, hits: &m.limits, desc: prometheus.NewDesc("corral_limit_hits_total",
		"Requests a limit turned away or held back, by limit: key (over 4 KiB, or empty), value (over Config.MaxValueBytes), group_name (a peer named an invalid group), peer_stream_calls (a peer's Gets in flight past the transport's bound), peer_handshake (a peer connection that did not complete its handshake in time), fills (a fill that waited for one of Config.MaxFills slots), refreshes (a background refresh skipped at Config.MaxRefreshes).",
		[]string{"limit"}, nil)}
	joinRefused := &joinRefusedCollector{src: src, desc: prometheus.NewDesc("corral_join_refused_total",
		"Join attempts a seed turned away, each seed address of an attempt once, by this node's reading of why: label (the seed closed the connection unanswered, as a member of another cluster label does: likely, not certain), key (another gossip key), encryption (one side encrypts gossip, the other does not).",
		[]string{"reason"}, nil)}
	m.collectors = []prometheus.Collector{gc, m.fillDuration, m.peerRequests, m.handoff, m.refused, m.purges, members, gossipKeys, lateness, excluded, limits, joinRefused}
	if reg == nil {
		return m, nil
	}
	for i, c := range m.collectors {
		if err := reg.Register(c); err != nil {
			for _, done := range m.collectors[:i] {
				reg.Unregister(done)
			}
			var are prometheus.AlreadyRegisteredError
			if errors.As(err, &are) {
				return nil, errors.New("corral: metrics already registered on this Registerer (one Node per registry)")
			}
			return nil, err
		}
	}
	return m, nil
}

func (m *metrics) peerCall(method, code string, _ time.Duration) {
	m.peerRequests.WithLabelValues(method, code).Inc()
}

// refuse counts a peer request or connection refused for reason.
func (m *metrics) refuse(reason string) { m.refused.WithLabelValues(reason).Inc() }

// sent and received count entries handed over (corral_handoff_keys_total).
func (m *metrics) sent(k int) { m.handoff.WithLabelValues("sent").Add(float64(k)) }
func (m *metrics) received()  { m.handoff.WithLabelValues("received").Inc() }

// fillObserved records a run of a group's loader (corral_fill_duration_seconds), with the
// ID of its trace as the observation's exemplar when the run's span was kept: the bucket of a
// slow fill leads to its trace (exemplars are served in the OpenMetrics format).
func (m *metrics) fillObserved(group string, d time.Duration, span trace.SpanContext) {
	o := m.fillDuration.WithLabelValues(group)
	if span.IsSampled() {
		if eo, ok := o.(prometheus.ExemplarObserver); ok {
			eo.ObserveWithExemplar(d.Seconds(), prometheus.Labels{"trace_id": span.TraceID().String()})
			return
		}
	}
	o.Observe(d.Seconds())
}

func (m *metrics) unregister() {
	if m.reg == nil {
		return
	}
	for _, c := range m.collectors {
		m.reg.Unregister(c)
	}
}
