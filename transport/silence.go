package transport

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/corralcache/corral/transport/peerpb"
)

// silence is a Client's judge of silent peers: how long a peer may leave a question
// unanswered before it is taken as unreachable — paused, cut off, its answers lost. Every
// wait on a peer that the Client bounds by silence uses bound: the silence watch of a Get
// stream (streamping.go), the wait for a stream's connection (peerConn.stream), a probe
// (Answers) and the waits between probes (UntilSilent).
type silence struct {
	timeout time.Duration // ClientConfig.SilentPeerTimeout; ≤ 0: no peer is ever silent
	late    lateness      // how late this node runs its timers (lateness.go)
}

// on reports whether peers are judged silent at all.
func (s *silence) on() bool { return s.timeout > 0 }

// bound is how long a peer may leave a question unanswered now: SilentPeerTimeout, plus
// twice the lateness of this node's own timers lately (see lateness.go). On a node that runs
// on time it is SilentPeerTimeout.
func (s *silence) bound() time.Duration { return s.timeout + 2*s.late.recent() }

// boundFor is bound for a peer that told the lateness kept in peer (nil: none): twice the
// larger of this node's and the peer's (lateness.go).
func (s *silence) boundFor(peer *toldLateness) time.Duration {
	late := s.late.recent()
	if peer != nil {
		late = max(late, peer.recent())
	}
	return s.timeout + 2*late
}

// UntilSilent runs call, a call to the peer at addr, under a context that also ends once the
// peer has gone silent: once call has waited the silence bound (SilentPeerTimeout, stretched
// while this node runs late), and again after each such interval, the peer is asked probe (a
// Get, bounded the same way), and a peer that does not answer it — paused, cut off, its
// answers lost — is given up: UntilSilent returns an *UnreachableError. Any answer counts,
// an error included; only silence (or a refused connection) does not. A peer that answers is
// working slowly, and call waits on. So a silent peer costs call at most twice the bound;
// the probe's bound leaves room for one TCP retransmission (200 ms). probe should be a Peek,
// which loads nothing.
//
// Gets on a stream need none of this: their streams are watched
// (ClientConfig.SilentPeerTimeout). It is for the calls that wait on the peer's work
// without one: Set, Invalidate, Lease, ..., and a Get sent as a unary call
// (peerConn.unaryGet).
func (c *Client) UntilSilent(ctx context.Context, addr string, probe *peerpb.GetRequest, call func(context.Context) error) error {
	if !c.silence.on() {
		return call(ctx)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var silent atomic.Bool
	var t *time.Timer
	var tmu sync.Mutex // guards t's Reset against its Stop, every and due: the probe runs on the timer's goroutine
	stopped := false
	peer := c.peerLate(addr)
	every := c.silence.boundFor(peer)
	due := time.Now().Add(every)
	t = time.AfterFunc(every, func() {
		tmu.Lock()
		c.silence.late.observe(time.Now(), due)
		tmu.Unlock()
		if c.Answers(ctx, addr, probe) {
			tmu.Lock()
			if !stopped {
				every = c.silence.boundFor(peer)
				due = time.Now().Add(every)
				t.Reset(every)
			}
			tmu.Unlock()
			return
		}
		silent.Store(true)
		cancel()
	})
	err := call(ctx)
	tmu.Lock()
	stopped = true
	t.Stop()
	waited := every
	tmu.Unlock()
	if silent.Load() {
		return &UnreachableError{Addr: addr, Err: fmt.Errorf("no answer to a probe after waiting %v", waited)}
	}
	return err
}

// Answers reports whether the peer at addr answers probe (a Get, best a Peek) within the
// silence bound (SilentPeerTimeout, stretched while this node runs late). Any answer counts,
// an error included; only silence (or a refused connection) does not. It is false, too, once
// ctx ends.
func (c *Client) Answers(ctx context.Context, addr string, probe *peerpb.GetRequest) bool {
	bound := c.silence.timeout
	if c.silence.on() {
		bound = c.silence.boundFor(c.peerLate(addr))
	}
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	_, err := c.Get(ctx, addr, probe)
	return ctx.Err() == nil && !IsUnreachable(err)
}
