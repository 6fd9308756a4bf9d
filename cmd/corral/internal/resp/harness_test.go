package resp

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/corralcache/corral"
	"github.com/corralcache/corral/cmd/corral/internal/limithits"
	"github.com/corralcache/corral/cmd/corral/internal/objects"
	"github.com/corralcache/corral/cmd/corral/internal/servetest"
	"github.com/corralcache/corral/internal/clustertest"
	"github.com/corralcache/corral/internal/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// testConfig is the Config corral serve gives the front by default, without its group and
// node: its own metrics, hits and leases, serve's value limit, the default limits and one
// event loop (serve's on 2 cores).
func testConfig(tb testing.TB, reg prometheus.Registerer) Config {
	tb.Helper()
	hits, leases := servetest.Leases(tb, reg)
	metrics, err := NewMetrics(reg)
	if err != nil {
		tb.Fatal(err)
	}
	return Config{Leases: leases, Metrics: metrics, Hits: hits,
		MaxValueBytes: corral.DefaultConfig().MaxValueBytes, Limits: DefaultLimits(), Loops: 1}
}

// withGroup sets cfg's Node, a one-node corral, and its Group, "resp", made as corral serve
// makes groups.
func withGroup(tb testing.TB, reg prometheus.Registerer, cfg *Config, opts ...corral.GroupOption) {
	tb.Helper()
	cfg.Node = servetest.Node(tb, reg, cfg.MaxValueBytes)
	groups, err := objects.NewGroups(objects.GroupsConfig{MaxGroups: 1, Options: opts})
	if err != nil {
		tb.Fatal(err)
	}
	if cfg.Group, err = groups.Group(cfg.Node, "resp"); err != nil {
		tb.Fatal(err)
	}
}

// testServer is the Redis protocol front of a one-node corral, on loopback.
type testServer struct {
	s    *Server
	addr string
	hits *limithits.Counter
}

// startTestServer starts the front with testConfig, changed by mod; tb's cleanup stops it.
func startTestServer(tb testing.TB, mod func(*Config)) *testServer {
	tb.Helper()
	reg := prometheus.NewRegistry()
	cfg := testConfig(tb, reg)
	if mod != nil {
		mod(&cfg)
	}
	withGroup(tb, reg, &cfg)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	s, err := Start(ln, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Close(ctx); err != nil {
			tb.Errorf("close: %v", err)
		}
	})
	return &testServer{s: s, addr: ln.Addr().String(), hits: cfg.Hits}
}

// limitHits reads corral_http_limit_hits_total{limit}.
func (ts *testServer) limitHits(limit string) float64 { return ts.hits.Count(limithits.Limit(limit)) }

// fuzzServer is the front's Config for commands handed to it directly, without a listener:
// with an API token, a small value limit (so that an input can reach it) and a group store of
// 1 MiB; its log counts the recovered panics.
type fuzzServer struct {
	cfg      Config
	reg      *prometheus.Registry
	panics   atomic.Int64 // "panicked" logged by the front
	sentinel servetest.Sentinel
}

func newFuzzServer(tb testing.TB) *fuzzServer {
	tb.Helper()
	fs := &fuzzServer{}
	reg := prometheus.NewRegistry()
	fs.reg = reg
	fs.cfg = testConfig(tb, reg)
	fs.cfg.Token = servetest.Token(tb, servetest.FuzzToken)
	fs.cfg.MaxValueBytes = 1 << 10
	fs.cfg.Log = slog.New(panicCounter{&fs.panics})
	withGroup(tb, reg, &fs.cfg, corral.WithMaxBytes(1<<20))
	return fs
}

// panicCounter is a slog.Handler that drops every record but counts the front's recovered
// panics.
type panicCounter struct{ n *atomic.Int64 }

func (h panicCounter) Enabled(context.Context, slog.Level) bool { return true }
func (h panicCounter) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, "panicked") {
		h.n.Add(1)
	}
	return nil
}
func (h panicCounter) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h panicCounter) WithGroup(string) slog.Handler      { return h }

var _ slog.Handler = panicCounter{}

// panicsCounted reads corral_resp_panics_total.
func (fs *fuzzServer) panicsCounted(tb testing.TB) float64 {
	tb.Helper()
	return clustertest.MetricValue(tb, fs.reg, "corral_resp_panics_total")
}
