package group

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/corralcache/corral/fill"
	"github.com/corralcache/corral/internal/handoff"
	"github.com/corralcache/corral/internal/leakcheck"
	"github.com/corralcache/corral/internal/limit"
	"github.com/corralcache/corral/internal/owner"
	"github.com/corralcache/corral/internal/route"
	"github.com/corralcache/corral/internal/version"
	"github.com/corralcache/corral/internal/view"
	"github.com/corralcache/corral/internal/write"
	"github.com/corralcache/corral/peer"
	"github.com/corralcache/corral/ring"
	"github.com/corralcache/corral/transport"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// testNode is one node's worth of what its groups run on, made of the real parts but with no
// membership, no peer port and no other member: a group on it owns every key, so its Gets,
// writes and leases run as the owner's, and its owner's side (Server) serves requests made
// in-process as a peer's would be.
type testNode struct {
	env    Env
	server *owner.Server
	groups testGroups
	hits   sync.Map // limit name → *atomic.Int64, the limit hits the Checker counted
}

// testNodeConfig changes a testNode from its defaults.
type testNodeConfig struct {
	maxValueBytes int                     // 0 = 1 MiB
	maxFills      int                     // 0 = unbounded
	autoGroup     func(name string) error // registers a group a request names; nil = none
}

// testAddr is the peer address a testNode advertises: no one listens there, and no one asks.
const testAddr = "127.0.0.1:7947"

func newTestNode(tb testing.TB, cfg testNodeConfig) *testNode {
	tb.Helper()
	tn := &testNode{}
	tn.groups.byName = map[string]testGroup{}
	tn.groups.auto = cfg.autoGroup
	self := "self"
	// The view of a membership of this node alone: its address is a member's, so that a
	// request made in-process from it passes the owner's member check, as a peer's does.
	vp := new(atomic.Pointer[view.View])
	v, _, err := view.Next(view.Alone(self, testAddr, ring.DefaultConfig()),
		[]peer.Member{{Name: self, GossipAddr: "127.0.0.1:7946", Meta: peer.Meta{PeerAddr: testAddr}}},
		ring.DefaultConfig(), time.Now(), time.Minute, nil)
	if err != nil {
		tb.Fatal(err)
	}
	vp.Store(v)
	client, err := transport.NewClient(transport.ClientConfig{})
	if err != nil {
		tb.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	clock := version.New(self, time.Now)
	tags := fill.NewTags(fill.TagsConfig{})
	state := &owner.State{}
	limits := &limit.Checker{MaxValueBytes: cmpOr(cfg.maxValueBytes, 1<<20), Hit: tn.hit}
	router := route.New(route.Config{View: vp, Client: client, Clock: clock, Log: log, PeerAddr: testAddr,
		Started: time.Now(), Leaving: &state.Leaving})
	writer := write.New(write.Config{Self: self, View: vp, Router: router, Client: client, Clock: clock, Log: log,
		Live: func() []peer.Member { return nil }, PeerTimeout: time.Second, Tags: tags})
	waits := fill.NewWaitGraph(func(context.Context, fill.WaitTarget) ([]fill.WaitTarget, error) {
		return nil, fmt.Errorf("no other member")
	})
	tn.server = owner.New(owner.Config{Self: self, PeerAddr: testAddr, View: vp, Clock: clock, Writer: writer,
		Waits: waits, Log: log, PeekWindow: time.Minute, Members: func() []peer.Member { return nil },
		Groups: &tn.groups, Limits: limits, Reconciled: func(string, string) {}, State: state,
		Refused: func(string) {}, Received: func() {}, Purged: func() {}})
	mover := handoff.New(handoff.Config{View: vp, Router: router, Client: client, Clock: clock, Log: log,
		PeekWindow: time.Minute, PeekTimeout: 250 * time.Millisecond, AskedAt: tn.server.AskedAt,
		Sent: func(int) {}, Tags: tags})
	tn.env = Env{Self: self, View: vp, State: state, Router: router, Client: client, Writer: writer, Mover: mover,
		Versions: clock, Waits: waits, Tags: tags, Limits: limits, Refreshes: fill.NewLimiter(fill.DefaultMaxRefreshes),
		Clock: fill.NewSystemClock(), Log: log, PeerTimeout: time.Second, PeekWindow: time.Minute,
		PeekTimeout: 250 * time.Millisecond, AskedAt: tn.server.AskedAt, NearBytes: 1 << 20, NearTTL: time.Second,
		NearPromote: 2, OnFill: func(string, time.Duration, trace.SpanContext) {}, Received: func() {}, Sent: func(int) {}}
	if cfg.maxFills > 0 {
		tn.env.Fills = fill.NewLimiter(cfg.maxFills)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		tn.groups.close(ctx)
		router.Close()
		client.Close()
	})
	return tn
}

func cmpOr(v, d int) int {
	if v == 0 {
		return d
	}
	return v
}

// hit counts a hit of a limit.
func (tn *testNode) hit(name string) {
	c, _ := tn.hits.LoadOrStore(name, new(atomic.Int64))
	c.(*atomic.Int64).Add(1)
}

// hitsOf returns the hits the node counted of the limit called name.
func (tn *testNode) hitsOf(name string) int64 {
	if c, ok := tn.hits.Load(name); ok {
		return c.(*atomic.Int64).Load()
	}
	return 0
}

// testGroup is a group whatever its value type, as the test node serves it.
type testGroup interface {
	owner.Group
	Close(context.Context) error
}

// testGroups are a testNode's groups (owner.Groups).
type testGroups struct {
	mu     sync.Mutex
	byName map[string]testGroup
	auto   func(name string) error
}

func (gs *testGroups) Lookup(name string) (owner.Group, bool) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	g, ok := gs.byName[name]
	return g, ok
}

func (gs *testGroups) Serve(name string) (owner.Group, error) {
	if g, ok := gs.Lookup(name); ok {
		return g, nil
	}
	if gs.auto != nil && fill.CheckName(name) == nil && gs.auto(name) == nil {
		if g, ok := gs.Lookup(name); ok {
			return g, nil
		}
	}
	return nil, fmt.Errorf("%w: %q", transport.ErrUnknownGroup, name)
}

func (gs *testGroups) Remember(string, string, uint64) {}

func (gs *testGroups) close(ctx context.Context) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	for _, g := range gs.byName {
		g.Close(ctx)
	}
}

// newGroup makes a group on tn, registered under its name, closed when tb ends.
func newGroup[V any](tb testing.TB, tn *testNode, name string, load func(context.Context, string) (V, error), codec Codec[V], o Options) *Group[V] {
	tb.Helper()
	g, err := New(tn.env, name, load, nil, codec, o)
	if err != nil {
		tb.Fatal(err)
	}
	tn.register(name, g)
	return g
}

// register serves g on tn as name; tn closes it when the test ends.
func (tn *testNode) register(name string, g testGroup) {
	tn.groups.mu.Lock()
	defer tn.groups.mu.Unlock()
	tn.groups.byName[name] = g
}

// stringCodec is the codec of a group of strings: the bytes as they are.
type stringCodec struct{}

func (stringCodec) Encode(v string) ([]byte, error) { return []byte(v), nil }
func (stringCodec) Decode(b []byte) (string, error) { return string(b), nil }

func noLoader(context.Context, string) (string, error) { return "", fill.ErrNotFound }
