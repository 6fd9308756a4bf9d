package transport

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/corralcache/corral/transport/peerpb"
)

// UntilSilent runs call, a call to the peer at addr, under a context that also ends once the
// peer has gone silent: once call has waited SilentPeerTimeout, and again after each such
// interval, the peer is asked probe (a Get, bounded by SilentPeerTimeout too), and a peer
// that does not answer it — paused, cut off, its answers lost — is given up: UntilSilent
// returns an *UnreachableError. Any answer counts, an error included; only silence (or a
// refused connection) does not. A peer that answers is working slowly, and call waits on. So
// a silent peer costs call at most twice SilentPeerTimeout; the probe's bound leaves room
// for one TCP retransmission (200 ms). probe should be a Peek, which loads nothing.
//
// Gets need none of this: their streams are watched (ClientConfig.SilentPeerTimeout). It is
// for the other calls (Set, Invalidate, Lease, ...), which wait on the peer's work.
func (c *Client) UntilSilent(ctx context.Context, addr string, probe *peerpb.GetRequest, call func(context.Context) error) error {
	every := c.silent
	if every <= 0 {
		return call(ctx)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var silent atomic.Bool
	var t *time.Timer
	var tmu sync.Mutex // guards t's Reset against its Stop: the probe runs on the timer's goroutine
	stopped := false
	t = time.AfterFunc(every, func() {
		if c.Answers(ctx, addr, probe) {
			tmu.Lock()
			if !stopped {
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
	tmu.Unlock()
	if silent.Load() {
		return &UnreachableError{Addr: addr, Err: fmt.Errorf("no answer to a probe after waiting %v", every)}
	}
	return err
}

// Answers reports whether the peer at addr answers probe (a Get, best a Peek) within
// SilentPeerTimeout. Any answer counts, an error included; only silence (or a refused
// connection) does not. It is false, too, once ctx ends.
func (c *Client) Answers(ctx context.Context, addr string, probe *peerpb.GetRequest) bool {
	ctx, cancel := context.WithTimeout(ctx, c.silent)
	defer cancel()
	_, err := c.Get(ctx, addr, probe)
	return ctx.Err() == nil && !IsUnreachable(err)
}

// unaryGet is a Get sent as a unary call (a large value, or a peer without GetStream),
// watched by probes — the same Get as a Peek — unless it is a Peek itself, which waits on
// no work.
func (p *peerConn) unaryGet(ctx context.Context, req *peerpb.GetRequest) (*peerpb.GetResponse, error) {
	if req.GetPeek() && !req.GetWaitFill() { // a Peek that waits for a fill waits on work
		return p.rpc.Get(ctx, req)
	}
	var resp *peerpb.GetResponse
	probe := proto.CloneOf(req)
	probe.Peek, probe.WaitFill = true, false
	err := p.client.UntilSilent(ctx, p.addr, probe, func(ctx context.Context) error {
		var err error
		resp, err = p.rpc.Get(ctx, req)
		return err
	})
	return resp, err
}
