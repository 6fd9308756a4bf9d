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
// by the requests after it, which go straight to the key's next owner, until the peer
// answers again. No request waits on it to find that out: while a breaker is open, the
// Router probes its peer every breakerProbe, off the requests, and the first answer closes
// it. So a peer found silent costs the requests of this node one silent-peer bound, once —
// not once more each time a window ends while the peer is still silent, which used to put a
// request's whole wait on a partitioned member again and again — and a peer that answers
// again (a partition healed, a pause ended) has its keys back within about breakerProbe. And
// the first time a breaker opens, this node probes every other member at once, and requests
// that find another peer unreachable meanwhile wait for that sweep rather than ask its
// members one after another: a node cut off from all of them learns it from one request, not
// one per member, and fills its keys itself — one extra fill per isolated side, the cost
// corral allows, instead of failed requests.

// breakerProbe is how often a peer whose breaker is open is probed.
const breakerProbe = 500 * time.Millisecond

// Breakers are this node's view of which peers answer, by peer address. The zero value is
// valid: breakers that open and close, probed by nobody.
type Breakers struct {
	// tripped counts the entries of m, so that the common case — every peer answers — costs
	// requests one atomic load and no lock.
	tripped atomic.Int32

	mu sync.Mutex
	// guards m and sweep
	m     map[string]time.Time // open breakers: when each opened
	sweep chan struct{}        // closed when the probe of every member in progress ends; nil when none runs

	// opened, if set, is called after a breaker opened, without mu: the Router starts its
	// probes then. Set once, before any request.
	opened func()
}

// Skip reports whether requests should pass addr by: its breaker is open.
func (b *Breakers) Skip(addr string, now time.Time) bool {
	if b.tripped.Load() == 0 {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	_, open := b.m[addr]
	return open
}

// Trip opens addr's breaker and reports whether it was closed before.
func (b *Breakers) Trip(addr string, now time.Time) bool {
	b.mu.Lock()
	if b.m == nil {
		b.m = make(map[string]time.Time)
	}
	_, open := b.m[addr]
	if !open {
		b.m[addr] = now
		b.tripped.Add(1)
	}
	b.mu.Unlock()
	if !open && b.opened != nil {
		b.opened()
	}
	return !open
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

// open returns the addresses whose breakers are open.
func (b *Breakers) open() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]string, 0, len(b.m))
	for addr := range b.m {
		out = append(out, addr)
	}
	return out
}

// startSweep returns the channel that the probe of every member closes when it ends, and
// whether the caller is to run it (none was running).
func (b *Breakers) startSweep() (done chan struct{}, run bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.sweep != nil {
		return b.sweep, false
	}
	b.sweep = make(chan struct{})
	return b.sweep, true
}

func (b *Breakers) endSweep() {
	b.mu.Lock()
	defer b.mu.Unlock()
	close(b.sweep)
	b.sweep = nil
}

// peerDown records that st was found unreachable. The first time, it probes every other
// member of the view whose breaker is closed, at once, and opens the breakers of those that
// do not answer either; a request that finds a peer unreachable while such a probe runs waits
// for it (or for ctx) before it asks another member. It reports whether st's breaker opened
// (it was closed).
func (r *Router) peerDown(ctx context.Context, st *view.MemberState) bool {
	b := &r.breakers
	opened := b.Trip(st.PeerAddr, time.Now())
	done, run := b.startSweep()
	if !run {
		select {
		case <-done:
		case <-ctx.Done():
		}
		return opened
	}
	defer b.endSweep()
	if !opened {
		return false
	}
	v := r.cfg.View.Load()
	now := time.Now()
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
	return true
}

// startProbes is Breakers.opened: it starts the probes of the open breakers, on a goroutine
// of their own that Close stops and waits for, unless it runs.
func (r *Router) startProbes() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done || r.probing {
		return
	}
	r.probing = true
	r.probeWG.Go(r.probeOpen)
}

// probeOpen probes, every breakerProbe, each peer whose breaker is open, all at once, and
// closes the breakers of those that answer, and of those that have left the view (nothing is
// routed to them; one that comes back is reset by the view's keeper). It returns once no
// breaker is open, or at Close.
func (r *Router) probeOpen() {
	t := time.NewTicker(breakerProbe)
	defer t.Stop()
	b := &r.breakers
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-t.C:
		}
		addrs := b.open()
		if len(addrs) == 0 {
			r.mu.Lock()
			// Under mu: a Trip after this look calls startProbes, which waits for mu and
			// finds probing unset, and starts probing again.
			if b.tripped.Load() == 0 {
				r.probing = false
				r.mu.Unlock()
				return
			}
			r.mu.Unlock()
			continue
		}
		v := r.cfg.View.Load()
		var wg sync.WaitGroup
		for _, addr := range addrs {
			if !inView(v, addr) {
				b.Reset(addr)
				continue
			}
			wg.Go(func() {
				if r.Answers(r.ctx, addr) {
					b.Reset(addr)
				}
			})
		}
		wg.Wait()
	}
}

// inView reports whether a member of v has the peer address addr.
func inView(v *view.View, addr string) bool {
	for _, st := range v.Members {
		if st.PeerAddr == addr {
			return true
		}
	}
	return false
}
