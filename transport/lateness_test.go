package transport

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

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
		time.Sleep(latePeriod + latePeriod/2)
		if got := l.recent(); got != 120*time.Millisecond {
			t.Fatalf("recent lateness %v a period and a half later, want 120ms still", got)
		}
		time.Sleep(latePeriod)
		if got := l.recent(); got != 0 {
			t.Fatalf("recent lateness %v two and a half periods later, want it forgotten", got)
		}
		// The meter's own timer fires on time in virtual time: it sees no lateness.
		l.start()
		time.Sleep(10 * lateTick)
		if got := l.recent(); got != 0 {
			t.Fatalf("recent lateness %v of timers that fire on time", got)
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

func testLateNodeWaitsLonger(t *testing.T, path streamPath) {
	const silent, late, pause = 200 * time.Millisecond, 150 * time.Millisecond, 400 * time.Millisecond
	h := &gateHandler{fakeHandler: newFakeHandler(), in: make(chan string, 4), gates: map[string]chan struct{}{}}
	c, addr, b := serveOnMemnet(t, h, ClientConfig{SilentPeerTimeout: silent}, path)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := getKey(c, ctx, addr, "warm"); err != nil { // the stream opens
		t.Fatal(err)
	}

	// pausedGet does a Get of key, pauses the peer for d as it arrives and lets the Get's
	// fill end after that; it returns the Get's error and how long it took.
	pausedGet := func(key string, d time.Duration) (error, time.Duration) {
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
	go func() {
		<-h.entered
		b.Pause()
	}()
	start := time.Now()
	_, err := getKey(c, ctx, addr, "hang")
	took := time.Since(start)
	b.Resume()
	if bound := c.silence.bound(); !IsUnreachable(err) || took > bound+silent/4 {
		t.Fatalf("late, a Get on a peer silent for good: %v after %v, want unreachable within %v", err, took, bound+silent/4)
	}
}
