package route

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/corralcache/corral/internal/view"
)

// Failure detection by gossip takes seconds, and longer for a node that is itself cut off:
// memberlist's Lifeguard slows a node's own suspicion of others while its probes fail, so an
// isolated node keeps every member in its view for a long time. Requests cannot wait for it.
// So every peer has a breaker, fed by what requests see: a peer that a request found
// unreachable — a refused connection, a silent peer that did not answer a probe — is skipped
// by the requests after it, which go straight to the key's next owner, for a window that
// doubles from breakerMin to breakerMax while the peer stays unreachable; any answer from the
// peer closes it. While a breaker is open and requests are passing its peer by, the peer is
// asked a probe every breakerProbe, off those requests: so a peer that answers again — a
// partition healed, a pause ended — has its keys back within about breakerProbe, not after
// the rest of a window of up to breakerMax in which this node alone would route them to
// their successor (and tell the peer of no write, answering 202). And the first time a
// breaker opens, this node probes every other member at once, so that a node cut off from
// all of them learns it from one request, not one per member, and fills its keys itself:
// one extra fill per isolated side, the cost corral allows, instead of failed requests.

const (
	breakerMin   = time.Second
	breakerMax   = 10 * time.Second
	breakerProbe = 500 * time.Millisecond
)

// Breakers are this node's view of which peers answer, by peer address.
type Breakers struct {
	// tripped counts the entries of m, so that the common case — every peer answers — costs
	// requests one atomic load and no lock.
	tripped atomic.Int32

	mu sync.Mutex
	// guards m and sweeping
	m        map[string]breaker
	sweeping bool // a probe of every member runs

	// probe, if set, starts a probe of addr that resets its breaker when addr answers; it
	// must not block. Set once, before any request.
	probe func(addr string)
}

type breaker struct {
	until   time.Time     // skipped until then
	window  time.Duration // how long it opened for last
	probeAt time.Time     // when a skip may start the next probe
}

// Skip reports whether requests should pass addr by now. A skip starts a probe of addr when
// none was started within breakerProbe.
func (b *Breakers) Skip(addr string, now time.Time) bool {
	if b.tripped.Load() == 0 {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	br, ok := b.m[addr]
	if !ok || !now.Before(br.until) {
		return false
	}
	if b.probe != nil && !now.Before(br.probeAt) {
		br.probeAt = now.Add(breakerProbe)
		b.m[addr] = br
		b.probe(addr)
	}
	return true
}

// Trip opens addr's breaker (for twice its last window, within bounds) and reports whether it
// was closed before.
func (b *Breakers) Trip(addr string, now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.m == nil {
		b.m = make(map[string]breaker)
	}
	br, ok := b.m[addr]
	wasClosed := !ok || !now.Before(br.until)
	w := breakerMin
	if ok {
		w = min(2*br.window, breakerMax)
	} else {
		b.tripped.Add(1)
	}
	b.m[addr] = breaker{until: now.Add(w), window: w, probeAt: now.Add(breakerProbe)}
	return wasClosed
}

// Reset closes addr's breaker: it answered.
func (b *Breakers) Reset(addr string) {
	if b.tripped.Load() == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.m[addr]; ok {
		delete(b.m, addr)
		b.tripped.Add(-1)
	}
}

// startSweep reports whether the caller should probe every member (none is being probed).
func (b *Breakers) startSweep() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.sweeping {
		return false
	}
	b.sweeping = true
	return true
}

func (b *Breakers) endSweep() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.sweeping = false
}

// peerDown records that st was found unreachable; the first time, it probes every other
// member of the view at once and trips the breakers of those that do not answer either.
func (r *Router) peerDown(ctx context.Context, st *view.MemberState) {
	now := time.Now()
	b := &r.breakers
	if !b.Trip(st.PeerAddr, now) || !b.startSweep() {
		return
	}
	defer b.endSweep()
	v := r.cfg.View.Load()
	var wg sync.WaitGroup
	for _, other := range v.Members {
		if other.Name == v.Self || other == st || b.Skip(other.PeerAddr, now) {
			continue
		}
		wg.Go(func() {
			if r.Answers(context.WithoutCancel(ctx), other.PeerAddr) {
				b.Reset(other.PeerAddr)
			} else {
				b.Trip(other.PeerAddr, time.Now())
			}
		})
	}
	wg.Wait()
}

// probeBreaker is Breakers.probe: it asks addr a probe on a goroutine of its own, which
// Close waits for, and closes addr's breaker when it answers.
func (r *Router) probeBreaker(addr string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done {
		return
	}
	r.probeWG.Go(func() {
		if r.Answers(r.ctx, addr) {
			r.breakers.Reset(addr)
		}
	})
}
