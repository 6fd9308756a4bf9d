package transport

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/corralcache/corral/memnet"
	"github.com/corralcache/corral/transport/peerpb"
)

// The meter remembers the largest lateness seen for one to two latePeriods, then forgets it.
func TestLatenessIsRemembered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var l lateness
		now := time.Now()
		l.observe(now, now.Add(-30*time.Millisecond))
		l.observe(now, now.Add(-120*time.Millisecond))
		l.observe(now, now.Add(-40*time.Millisecond))
		if got := l.recent(); got != 120*time.Millisecond {
			t.Fatalf("recent lateness %v, want the largest seen, 120ms", got)
		}
		if got := l.toldMillis(); got != 120 {
			t.Fatalf("the node tells %d ms, want 120", got)
		}
		time.Sleep(latePeriod + latePeriod/2)
		if got := l.recent(); got != 120*time.Millisecond {
			t.Fatalf("recent lateness %v a period and a half later, want 120ms still", got)
		}
		time.Sleep(latePeriod)
		if got := l.recent(); got != 0 {
			t.Fatalf("recent lateness %v two and a half periods later, want it forgotten", got)
		}
		// Under minToldLate the node tells nothing; a peer's word counts up to maxPeerLate.
		var small lateness
		now = time.Now()
		small.observe(now, now.Add(-minToldLate+time.Millisecond))
		if got := small.toldMillis(); got != 0 {
			t.Fatalf("a node %v late tells %d ms, want nothing", minToldLate-time.Millisecond, got)
		}
		var peer toldLateness
		peer.heard(3_600_000)
		if got := peer.recent(); got != maxPeerLate {
			t.Fatalf("a peer that told an hour counts %v, want at most %v", got, maxPeerLate)
		}
		peer.heard(0)
		if got := peer.recent(); got != 0 {
			t.Fatalf("a peer that told nothing after an hour counts %v, want 0: its last word counts", got)
		}
		// The meter's own timer fires on time in virtual time: it sees no lateness. What the
		// node tells lasts longer: one to two toldPeriods.
		l.start()
		time.Sleep(10 * lateTick)
		if got := l.recent(); got != 0 {
			t.Fatalf("recent lateness %v of timers that fire on time", got)
		}
		if got := l.toldMillis(); got != 120 {
			t.Fatalf("the node tells %d ms %v after it was 120 ms late, want 120", got, 2*latePeriod+latePeriod/2+10*lateTick)
		}
		time.Sleep(2 * toldPeriod)
		if got := l.toldMillis(); got != 0 {
			t.Fatalf("the node tells %d ms two toldPeriods later, want nothing", got)
		}
		l.stop()
		l.stop()
		l.start() // stopped for good: it does not start again
		l.mu.Lock()
		stopped := l.stopped
		l.mu.Unlock()
		if !stopped {
			t.Fatal("the meter started again after stop")
		}
	})
}

// A node that is itself late waits longer before it calls a peer silent: with its timers
// found 150 ms late, a peer that answers nothing for 400 ms — a pause, as a starved owner's
// — is waited on, where a node on time (silence bound 200 ms) gives it up; and a peer that
// stays silent is still given up, within the stretched bound. Virtual time, on an in-memory
// network.
func TestLateNodeWaitsLonger(t *testing.T) {
	for _, path := range streamPaths {
		t.Run(path.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { testLateNodeWaitsLonger(t, path) })
		})
	}
}

// gateHandler holds each Get of a key it has a gate for until the gate is closed, and says
// on in when one arrives.
type gateHandler struct {
	*fakeHandler
	in chan string

	mu sync.Mutex
	// guards gates
	gates map[string]chan struct{}
}

func (h *gateHandler) Get(ctx context.Context, req *peerpb.GetRequest) (*peerpb.GetResponse, error) {
	h.mu.Lock()
	gate, ok := h.gates[string(req.GetKey())]
	h.mu.Unlock()
	if ok {
		h.in <- string(req.GetKey())
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return h.fakeHandler.Get(ctx, req)
}

// pausedGet does a Get of key through c, pauses the peer's host b for d as it arrives and
// lets the Get's fill end after that; it returns the Get's error and how long it took.
func (h *gateHandler) pausedGet(ctx context.Context, c *Client, addr string, b *memnet.Host, key string, d time.Duration) (error, time.Duration) {
	gate := make(chan struct{})
	h.mu.Lock()
	h.gates[key] = gate
	h.mu.Unlock()
	paused := make(chan struct{})
	go func() {
		defer close(paused)
		<-h.in
		b.Pause()
		time.Sleep(d)
		b.Resume()
		close(gate)
	}()
	start := time.Now()
	_, err := getKey(c, ctx, addr, key)
	took := time.Since(start)
	<-paused
	return err, took
}

// hangGet does a Get of "hang" through c and pauses the peer's host b for good as it arrives
// (until the Get ends); it returns the Get's error and how long it took.
func hangGet(ctx context.Context, c *Client, addr string, b *memnet.Host, h *gateHandler) (error, time.Duration) {
	go func() {
		<-h.entered
		b.Pause()
	}()
	start := time.Now()
	_, err := getKey(c, ctx, addr, "hang")
	took := time.Since(start)
	b.Resume()
	return err, took
}

func testLateNodeWaitsLonger(t *testing.T, path streamPath) {
	const silent, late, pause = 200 * time.Millisecond, 150 * time.Millisecond, 400 * time.Millisecond
	h := &gateHandler{fakeHandler: newFakeHandler(), in: make(chan string, 4), gates: map[string]chan struct{}{}}
	c, addr, b := serveOnMemnet(t, h, ClientConfig{SilentPeerTimeout: silent}, path)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := getKey(c, ctx, addr, "warm"); err != nil { // the stream opens
		t.Fatal(err)
	}

	pausedGet := func(key string, d time.Duration) (error, time.Duration) { return h.pausedGet(ctx, c, addr, b, key, d) }

	if err, took := pausedGet("on time", pause); !IsUnreachable(err) || took > silent*5/4 {
		t.Fatalf("on time, a Get on a peer silent for %v: %v after %v, want unreachable within %v", pause, err, took, silent*5/4)
	}

	now := time.Now()
	c.silence.late.observe(now, now.Add(-late)) // a timer of this node fired 150 ms late
	if got, want := c.silence.bound(), silent+2*late; got != want {
		t.Fatalf("silence bound %v on a node 150 ms late, want %v", got, want)
	}
	if err, took := pausedGet("late", pause); err != nil || took < pause {
		t.Fatalf("late, a Get on a peer silent for %v: %v after %v, want its answer", pause, err, took)
	}

	// Silent for good: given up within the stretched bound (and a quarter of the timeout,
	// for a peer that falls silent while the Get waits).
	err, took := hangGet(ctx, c, addr, b, h)
	if bound := c.silence.bound(); !IsUnreachable(err) || took > bound+silent/4 {
		t.Fatalf("late, a Get on a peer silent for good: %v after %v, want unreachable within %v", err, took, bound+silent/4)
	}
}

// A peer starved of CPU while this node runs on time — a container throttled alone — says
// so in its answers, and this node waits longer before it calls it silent: with the peer
// telling 150 ms, a pause of 400 ms is waited on, where a peer whose answers tell nothing is
// given up at the plain bound (200 ms). The peer's last word counts, for latePeriod when no
// answer follows it, and at most maxPeerLate. Virtual time, on an in-memory
// network.
func TestLatePeerIsWaitedOn(t *testing.T) {
	for _, path := range streamPaths {
		t.Run(path.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { testLatePeerIsWaitedOn(t, path) })
		})
	}
}

func testLatePeerIsWaitedOn(t *testing.T, path streamPath) {
	const silent, late, pause = 200 * time.Millisecond, 150 * time.Millisecond, 400 * time.Millisecond
	h := &gateHandler{fakeHandler: newFakeHandler(), in: make(chan string, 4), gates: map[string]chan struct{}{}}
	var told atomic.Int64 // what the Server tells of its lateness
	scfg := ServerConfig{Lateness: func() time.Duration { return time.Duration(told.Load()) }}
	c, addr, b := serveOnMemnetWith(t, h, scfg, ClientConfig{SilentPeerTimeout: silent}, path)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	bound := func() time.Duration { return c.silence.boundFor(c.peerLate(addr)) }
	warm := func() {
		t.Helper()
		if _, err := getKey(c, ctx, addr, "warm"); err != nil {
			t.Fatal(err)
		}
	}

	pausedGet := func(key string) (error, time.Duration) { return h.pausedGet(ctx, c, addr, b, key, pause) }

	told.Store(int64(late))
	warm() // the stream opens; the answer tells 150 ms
	if got, want := bound(), silent+2*late; got != want {
		t.Fatalf("silence bound %v for a peer that told 150 ms, want %v", got, want)
	}
	if own := c.silence.bound(); own != silent {
		t.Fatalf("this node's own bound %v, want %v: it runs on time", own, silent)
	}
	if err, took := pausedGet("late peer"); err != nil || took < pause {
		t.Fatalf("a Get on a peer that told 150 ms, silent for %v: %v after %v, want its answer", pause, err, took)
	}

	// The peer is on time again: its next answer tells nothing, and it is given up as before.
	told.Store(0)
	warm()
	if got := bound(); got != silent {
		t.Fatalf("silence bound %v after the peer's answer told nothing, want %v", got, silent)
	}
	if err, took := pausedGet("on time"); !IsUnreachable(err) || took > silent*5/4 {
		t.Fatalf("a Get on a peer on time, silent for %v: %v after %v, want unreachable within %v", pause, err, took, silent*5/4)
	}

	// A peer's word, with no answer after it, counts for latePeriod.
	told.Store(int64(late))
	warm()
	told.Store(0)
	time.Sleep(latePeriod / 2)
	if got, want := bound(), silent+2*late; got != want {
		t.Fatalf("silence bound %v half a period after the peer told 150 ms, want %v", got, want)
	}
	time.Sleep(latePeriod/2 + time.Millisecond)
	if got := bound(); got != silent {
		t.Fatalf("silence bound %v a period after the peer last told, want %v", got, silent)
	}

	// A peer that tells an hour counts maxPeerLate: silent for good, it is still given up.
	told.Store(int64(time.Hour))
	warm()
	if got, want := bound(), silent+2*maxPeerLate; got != want {
		t.Fatalf("silence bound %v for a peer that told an hour, want %v", got, want)
	}
	err, took := hangGet(ctx, c, addr, b, h)
	if max := silent + 2*maxPeerLate + silent/4; !IsUnreachable(err) || took > max {
		t.Fatalf("a Get on a peer that told an hour, silent for good: %v after %v, want unreachable within %v", err, took, max)
	}
}
