package peer_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corralcache/corral/peer"
)

// Helpers shared by the tests that run real memberlist instances over loopback.

// waitTimeout bounds every wait for the cluster to converge. Convergence takes well under a
// second with fastConfig; the margin is for a loaded CI machine under -race.
const waitTimeout = 15 * time.Second

// fastConfig is a Config with timings for loopback: gossip about ten times faster than
// production, and failure detection that keeps room for a busy machine — a 2-core machine
// running other suites under -race starves a process of the CPU for hundreds of
// milliseconds, and with a 50 ms probe timeout and a 300 ms suspicion a live member was
// declared dead there, failing the tests that assert it never is. A suspected member has a
// second to refute it; a crash is seen within a few seconds.
func fastConfig(tb testing.TB, name string) peer.Config {
	tb.Helper()
	return peer.Config{
		Name:                name,
		BindAddr:            "127.0.0.1",
		BindPort:            0,
		Meta:                peer.Meta{PeerAddr: peerAddrOf(name)},
		ProbeInterval:       250 * time.Millisecond,
		ProbeTimeout:        200 * time.Millisecond,
		GossipInterval:      20 * time.Millisecond,
		PushPullInterval:    500 * time.Millisecond,
		SuspicionMult:       4,
		DeadNodeReclaimTime: 100 * time.Millisecond,
		StreamTimeout:       time.Second,
		JoinTimeout:         2 * time.Second,
		JoinBackoffMin:      20 * time.Millisecond,
		JoinBackoffMax:      200 * time.Millisecond,
		RejoinInterval:      200 * time.Millisecond,
	}
}

// peerAddrOf is the PeerAddr every test gives member name, so that tests can check meta.
func peerAddrOf(name string) string { return "127.0.0.1:" + fmt.Sprint(20000+int(name[0])) }

// start runs New and closes the Membership when the test ends. Without a Logger, it logs into a
// testLog.
func start(tb testing.TB, cfg peer.Config) *peer.Membership {
	tb.Helper()
	if cfg.Logger == nil {
		cfg.Logger = slog.New(testLog(tb, cfg.Name))
	}
	m, err := peer.New(cfg)
	if err != nil {
		tb.Fatalf("New(%s): %v", cfg.Name, err)
	}
	tb.Cleanup(func() {
		if err := m.Close(); err != nil {
			tb.Errorf("Close(%s): %v", cfg.Name, err)
		}
	})
	return m
}

// waitFor polls cond until it holds or waitTimeout passes.
func waitFor(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(waitTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %v waiting for %s", waitTimeout, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// names returns the members' names, in their order.
func names(ms []peer.Member) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Name
	}
	return out
}

// hasNames reports whether m sees exactly want (sorted).
func hasNames(m *peer.Membership, want ...string) func() bool {
	return func() bool { return slices.Equal(names(m.Members()), want) }
}

// recorder keeps what OnEvent and OnChange deliver.
type recorder struct {
	mu      sync.Mutex
	events  []peer.Event
	changes [][]peer.Member
}

func (r *recorder) onEvent(e peer.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

func (r *recorder) onChange(ms []peer.Member) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.changes = append(r.changes, ms)
}

// install makes cfg report to r.
func (r *recorder) install(cfg *peer.Config) {
	cfg.OnEvent = r.onEvent
	cfg.OnChange = r.onChange
}

// kinds returns the kinds of the events about member, in order.
func (r *recorder) kinds(member string) []peer.EventKind {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ks []peer.EventKind
	for _, e := range r.events {
		if e.Member.Name == member {
			ks = append(ks, e.Kind)
		}
	}
	return ks
}

// lastChange returns the argument of the last OnChange call, nil if none.
func (r *recorder) lastChange() []peer.Member {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.changes) == 0 {
		return nil
	}
	return r.changes[len(r.changes)-1]
}

// sameMembers compares member lists, Meta.StartedAt with Equal.
func sameMembers(a, b []peer.Member) bool {
	return slices.EqualFunc(a, b, func(x, y peer.Member) bool {
		return x.Name == y.Name && x.GossipAddr == y.GossipAddr && x.Meta.PeerAddr == y.Meta.PeerAddr &&
			x.Meta.RingVersion == y.Meta.RingVersion && x.Meta.StartedAt.Equal(y.Meta.StartedAt)
	})
}

// testLog returns a log handler that keeps every record (Debug included, memberlist's too) in
// memory and prints them if the test fails. It never calls tb.Log itself, because memberlist may
// still log from its own goroutines after the test has ended.
func testLog(tb testing.TB, name string) *logBuffer {
	tb.Helper()
	lb := &logBuffer{}
	lb.Handler = slog.NewTextHandler(lb, &slog.HandlerOptions{Level: slog.LevelDebug})
	tb.Cleanup(func() {
		if tb.Failed() {
			tb.Logf("log of %s:\n%s", name, lb.String())
		}
	})
	return lb
}

// logBuffer is an slog.Handler that writes into a buffer safe for concurrent use.
type logBuffer struct {
	slog.Handler
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// count returns how many times the log holds s.
func (b *logBuffer) count(s string) int { return strings.Count(b.String(), s) }

// freePort returns a port that is free for both TCP and UDP on every ip, for tests that need to
// know a member's address before it starts, or members on several loopback addresses sharing a
// port as pods behind a headless Service do. Another process may take it before it is used; on
// loopback in a test that is unlikely enough.
func freePort(tb testing.TB, ips ...string) int {
	tb.Helper()
	for range 20 {
		l, err := net.Listen("tcp", net.JoinHostPort(ips[0], "0"))
		if err != nil {
			tb.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		closers := []func() error{l.Close}
		ok := true
		for i, ip := range ips {
			if i > 0 {
				l, err := net.Listen("tcp", net.JoinHostPort(ip, fmt.Sprint(port)))
				if err != nil {
					ok = false
					break
				}
				closers = append(closers, l.Close)
			}
			u, err := net.ListenPacket("udp", net.JoinHostPort(ip, fmt.Sprint(port)))
			if err != nil {
				ok = false
				break
			}
			closers = append(closers, u.Close)
		}
		for _, c := range closers {
			c()
		}
		if ok {
			return port
		}
	}
	tb.Fatal("no free port")
	return 0
}

// ctx returns a context that ends with the test or after waitTimeout.
func testCtx(tb testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	tb.Cleanup(cancel)
	return ctx
}
