package httpapi

import (
	"context"
	"errors"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/corralcache/corral"
	"github.com/corralcache/corral/cmd/corral/internal/debugui"
	"github.com/corralcache/corral/cmd/corral/internal/limithits"
	"github.com/corralcache/corral/cmd/corral/internal/objects"
	"github.com/corralcache/corral/cmd/corral/internal/servetest"
	"github.com/corralcache/corral/internal/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// apiSetup is what a test changes of the API corral serve runs by default: its Config (but
// for the Node and the Groups, made from the rest), and the bound of its groups.
type apiSetup struct {
	Config
	MaxGroups int // --max-groups
	// GroupOptions are every group's options (--max-bytes, …); none by default.
	GroupOptions []corral.GroupOption
}

// testAPI is the HTTP API of a one-node corral, and what it was made with.
type testAPI struct {
	a      *API
	groups *objects.Groups
	hits   *limithits.Counter
}

// newTestAPI makes the API as corral serve does, with serve's defaults changed by mod, over a
// one-node corral that tb's cleanup closes. Every request is ready, and the debug page shows
// a fixed state.
func newTestAPI(tb testing.TB, mod func(*apiSetup)) *testAPI {
	tb.Helper()
	reg := prometheus.NewRegistry()
	hits, leases := servetest.Leases(tb, reg)
	s := apiSetup{MaxGroups: 64, Config: Config{
		Leases: leases, Gatherer: reg, Hits: hits,
		Ready:         func() (bool, string) { return true, "ready" },
		Debug:         debugui.Handler("/debug/corral", func() debugui.State { return debugui.State{Self: "test", Ready: true} }),
		MaxValueBytes: corral.DefaultConfig().MaxValueBytes, TTL: time.Minute, Limits: DefaultLimits(),
		Loops: 1, // as corral serve runs on 2 CPUs
	}}
	if mod != nil {
		mod(&s)
	}
	s.Node = servetest.Node(tb, reg, s.MaxValueBytes)
	var err error
	gcfg := objects.GroupsConfig{MaxGroups: s.MaxGroups, Options: s.GroupOptions}
	if s.Origin != nil {
		gcfg.Load = s.Origin.Load // as corral serve does
	}
	if s.Groups, err = objects.NewGroups(gcfg); err != nil {
		tb.Fatal(err)
	}
	a, err := New(s.Config)
	if err != nil {
		tb.Fatal(err)
	}
	return &testAPI{a: a, groups: s.Groups, hits: hits}
}

// testServer is a testAPI served on loopback.
type testServer struct {
	*testAPI
	srv  *Server
	http string // "127.0.0.1:port"
}

// startTestServer serves newTestAPI(tb, mod) on loopback until tb's cleanup shuts it down.
func startTestServer(tb testing.TB, mod func(*apiSetup)) *testServer {
	tb.Helper()
	ta := newTestAPI(tb, mod)
	srv, addr := serveAPI(tb, ta, ta.a.cfg.Loops)
	return &testServer{testAPI: ta, srv: srv, http: addr}
}

// serveAPI serves ta on loopback with loops event loops until tb's cleanup shuts it down,
// and returns its Server and address. An API may be served by more than one at once.
func serveAPI(tb testing.TB, ta *testAPI, loops int) (*Server, string) {
	tb.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	srv := ta.a.Server()
	srv.nloops = loops
	done := make(chan error, 1)
	go func() { done <- srv.Serve(lis) }()
	tb.Cleanup(func() {
		// A connection the client dialed but never used would hold Shutdown for 5 s.
		http.DefaultClient.CloseIdleConnections()
		ctx, cancel := context.WithTimeout(context.Background(), 25*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			tb.Errorf("shutdown: %v", err)
		}
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			tb.Errorf("serve: %v", err)
		}
	})
	return srv, lis.Addr().String()
}

// do sends an HTTP request and returns the response with its body read.
func (ts *testServer) do(tb testing.TB, method, path, body string, header ...string) (*http.Response, string) {
	tb.Helper()
	return servetest.Do(tb, ts.http, method, path, body, header...)
}

// limitHits reads corral_http_limit_hits_total{limit}.
func (ta *testAPI) limitHits(limit string) float64 { return ta.hits.Count(limithits.Limit(limit)) }
