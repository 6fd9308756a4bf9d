package corral

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/corralcache/corral/fill"
	"github.com/corralcache/corral/internal/handoff"
	"github.com/corralcache/corral/internal/lease"
	"github.com/corralcache/corral/internal/version"
	"github.com/corralcache/corral/internal/view"
	"github.com/corralcache/corral/transport"
	"github.com/corralcache/corral/transport/peerpb"
)

// LeaseState says what Group.Lease answered.
type LeaseState string

const (
	LeaseHit   LeaseState = "hit"   // Value is fresh
	LeaseFill  LeaseState = "fill"  // nobody held the lease: this caller does (Token); it builds the value and calls FillSet
	LeaseStale LeaseState = "stale" // Value is stale, within its SWR window; with a Token, this caller refreshes it
	LeaseBusy  LeaseState = "busy"  // another caller holds the lease and no value arrived within Wait
)

// Limits of a lease request.
const (
	MinLeaseFill = time.Millisecond // shortest LeaseOptions.Fill
	MaxLeaseFill = time.Hour        // longest LeaseOptions.Fill
	MaxLeaseWait = time.Minute      // longest LeaseOptions.Wait
)

// maxLeaseMoves bounds how often one Lease call follows the key to a new owner before it
// answers busy: views settle in a gossip round or two.
const maxLeaseMoves = 3

// ErrLeaseArgument is wrapped by the errors of Lease and FillSet for arguments out of range
// (a Fill outside [MinLeaseFill, MaxLeaseFill], a Wait above MaxLeaseWait, an empty token,
// a negative TTL or SWR).
var ErrLeaseArgument = errors.New("corral: invalid lease request")

// ErrTooManyLeases is wrapped by the error of Lease when the key's owner already holds, in
// the key's group, as many leases as it may at once (65,536): the request is sound, the
// owner is full. Nothing changed; a later call succeeds once leases end (stored, lapsed or
// revoked). corral serve answers it with 503 and -BUSY.
var ErrTooManyLeases = errors.New("corral: too many leases held")

// LeaseOptions configures one Lease call.
type LeaseOptions struct {
	// Fill is how long the caller that gets the lease may take to build the value before the
	// lease lapses and passes to the next caller: a little above the slowest normal build.
	// In [MinLeaseFill, MaxLeaseFill].
	Fill time.Duration
	// Wait is how long a caller that finds the lease held is kept waiting for the holder's
	// value (then it gets LeaseHit), or for the lease to lapse (then it may get LeaseFill).
	// 0 = answer LeaseBusy at once; at most MaxLeaseWait.
	Wait time.Duration
}

// Lease is Group.Lease's answer.
type Lease[V any] struct {
	State LeaseState
	Value V      // for LeaseHit and LeaseStale
	Token string // for LeaseFill, and for the one LeaseStale caller that refreshes; "" otherwise
}

// Expiry is the lifetime of one written value, instead of the group's TTL, jitter and grace.
type Expiry struct {
	TTL time.Duration // how long it is fresh; 0 = it never expires
	SWR time.Duration // then how long it is served stale while one caller refreshes it; 0 = none
}

// Lease asks key's owner for the value of key, or for the right to build it:
//
//   - LeaseHit: the value is fresh.
//   - LeaseFill: nobody held the lease; now this caller does, for o.Fill. It builds the value
//     and stores it with FillSet(key, v, Token, …).
//   - LeaseStale: the value is past its TTL but within the SWR its FillSet gave; the one
//     caller in the cluster that should refresh it also gets a Token.
//   - LeaseBusy: another caller holds the lease. With o.Wait, the owner first holds this
//     call until the holder's value is stored (then LeaseHit), the lease lapses or is
//     revoked (then this caller may get LeaseFill), or o.Wait ends.
//
// A caller on another node waits on the owner's result through the peer path: one call
// answered when something happens, never polling. Lease reads the owner's store, not near
// copies, and never runs the group's loader.
//
// Errors: *LimitError for a bad key; an error wrapping ErrLeaseArgument for options out of
// range; one wrapping ErrTooManyLeases when the owner's table is full; ctx.Err() when ctx
// ends first; ErrClosed after Close.
func (g *Group[V]) Lease(ctx context.Context, key string, o LeaseOptions) (Lease[V], error) {
	if err := g.node.checkKey(key); err != nil {
		return Lease[V]{}, err
	}
	if err := lease.Validate(o.Fill, o.Wait); err != nil {
		return Lease[V]{}, leaseErr(err)
	}
	n := g.node
	if n.closed.Load() {
		return Lease[V]{}, ErrClosed
	}
	until := time.Now().Add(o.Wait)
	for range maxLeaseMoves {
		var ans lease.Answer[V]
		_, err := n.router.OnOwner(ctx, key, false,
			func() error {
				var err error
				ans, err = g.leases.Acquire(ctx, key, o.Fill, until)
				err = leaseErr(err)
				return err
			},
			func(ctx context.Context, st *view.MemberState) error {
				wait := max(time.Until(until), 0)
				// The owner may hold the call for wait: give it a deadline past that, so the
				// client's default call timeout does not read a long wait as a dead owner.
				cctx, cancel := context.WithTimeout(ctx, wait+n.cfg.PeerTimeout)
				defer cancel()
				resp, err := n.client.Lease(cctx, st.PeerAddr, &peerpb.LeaseRequest{
					Header: n.router.Header(ctx), Group: g.name, Key: []byte(key),
					FillNanos: int64(o.Fill), WaitNanos: int64(wait),
				})
				if err != nil {
					return err
				}
				ans, err = g.leaseFromWire(resp)
				return err
			})
		if errors.Is(err, transport.ErrInvalidArgument) {
			// The owner refused the request: the same error as here. The wire has no code of
			// its own for a full table; the owner's message names it.
			if strings.Contains(err.Error(), ErrTooManyLeases.Error()) {
				return Lease[V]{}, fmt.Errorf("%w on the key's owner: %v", ErrTooManyLeases, err)
			}
			return Lease[V]{}, fmt.Errorf("%w: %v", ErrLeaseArgument, err)
		}
		if err != nil {
			return Lease[V]{}, g.wrapErr(key, fromWire(err))
		}
		if ans.State != lease.Moved {
			return Lease[V]{State: LeaseState(ans.State), Value: ans.Entry.Value, Token: ans.Token}, nil
		}
	}
	return Lease[V]{State: LeaseBusy}, nil
}

// FillSet stores v for key with lifetime e, but only while token is the key's live lease
// (from Lease): it reports false, and changes nothing, when the lease has lapsed, was
// revoked by a Set, Remove or FillSet, or the key's owner changed since it was granted.
// A stored value is a write like Set's: every member is told of it before FillSet returns,
// and an *UnreachedError (with stored true) names the members that could not be told.
//
// Errors: *LimitError for a bad key or value; an error wrapping ErrLeaseArgument for an
// empty token or a negative lifetime; ErrClosed after Close.
func (g *Group[V]) FillSet(ctx context.Context, key string, v V, token string, e Expiry) (bool, error) {
	if token == "" {
		return false, fmt.Errorf("%w: empty token", ErrLeaseArgument)
	}
	return g.store(ctx, key, v, token, e)
}

// SetWithExpiry is Set with a lifetime of the caller's instead of the group's TTL, jitter
// and grace (Redis's SET … EX). It revokes the key's lease, as Set does.
func (g *Group[V]) SetWithExpiry(ctx context.Context, key string, v V, e Expiry) error {
	_, err := g.store(ctx, key, v, "", e)
	return err
}

// store writes v for key with lifetime e through the owner: under token's lease, or
// unconditionally when token is "".
func (g *Group[V]) store(ctx context.Context, key string, v V, token string, e Expiry) (bool, error) {
	if err := g.node.checkKey(key); err != nil {
		return false, err
	}
	if err := lease.Expiry(e).Validate(); err != nil {
		return false, leaseErr(err)
	}
	b, err := g.codec.Encode(v)
	if err != nil {
		return false, fmt.Errorf("corral: encode value of %s/%q: %w", g.name, key, err)
	}
	if err := g.node.checkValue(len(b)); err != nil {
		return false, err
	}
	n := g.node
	var stored bool
	err = g.write(ctx, key,
		func(drawn uint64) (uint64, error) {
			version, err := g.leases.Store(key, v, token, lease.Expiry(e), drawn)
			stored = version > 0
			return version, err
		},
		func(ctx context.Context, st *view.MemberState, drawn uint64) (uint64, error) {
			resp, err := n.client.FillSet(ctx, st.PeerAddr, &peerpb.FillSetRequest{
				Header: n.router.Header(ctx), Token: token,
				Entry: &peerpb.Entry{Group: g.name, Key: []byte(key), Value: b,
					FreshForNanos: int64(e.TTL), StaleForNanos: int64(e.SWR), Version: drawn},
			})
			stored = resp.GetStored()
			return resp.GetVersion(), err
		})
	return stored, err
}

// The peer side.

// leaseHandle is what the node needs of a group for leases, whatever its value type.
type leaseHandle interface {
	serveLease(ctx context.Context, req *peerpb.LeaseRequest) (*peerpb.LeaseResponse, error)
	serveFillSet(ctx context.Context, req *peerpb.FillSetRequest) (*peerpb.FillSetResponse, error)
	leasesMoved(v *view.View)
}

var (
	_ leaseHandle            = (*Group[string])(nil)
	_ transport.LeaseHandler = server{}
)

// Lease serves a peer's Lease, as acting owner. Once this node has left, it answers that it
// is leaving: the caller asks the key's next owner.
func (s server) Lease(ctx context.Context, req *peerpb.LeaseRequest) (*peerpb.LeaseResponse, error) {
	g, err := s.leaseGroup(ctx, req.GetHeader(), req.GetGroup())
	if err != nil {
		return nil, err
	}
	return g.serveLease(ctx, req)
}

// FillSet serves a peer's FillSet, as acting owner.
func (s server) FillSet(ctx context.Context, req *peerpb.FillSetRequest) (*peerpb.FillSetResponse, error) {
	g, err := s.leaseGroup(ctx, req.GetHeader(), req.GetEntry().GetGroup())
	if err != nil {
		return nil, err
	}
	return g.serveFillSet(ctx, req)
}

func (s server) leaseGroup(ctx context.Context, h *peerpb.Header, group string) (leaseHandle, error) {
	n := s.n
	if err := n.admit(ctx, h); err != nil {
		return nil, err
	}
	if n.draining.Load() {
		return nil, fmt.Errorf("%w: %s has left", transport.ErrLeaving, n.cfg.Name)
	}
	g, err := n.handle(group)
	if err != nil {
		return nil, err
	}
	lg, ok := g.(leaseHandle)
	if !ok {
		return nil, fmt.Errorf("%w: group %q serves no leases", transport.ErrUnknownGroup, group)
	}
	return lg, nil
}

// leasesMoved ends, in every group, the leases of keys whose owner changed in v.
func (n *Node) leasesMoved(v *view.View) {
	for _, g := range n.groupList() {
		if lg, ok := g.(leaseHandle); ok {
			lg.leasesMoved(v)
		}
	}
}

func (g *Group[V]) leasesMoved(v *view.View) { g.leases.Moved(v) }

func (g *Group[V]) serveLease(ctx context.Context, req *peerpb.LeaseRequest) (*peerpb.LeaseResponse, error) {
	key := string(req.GetKey())
	if err := g.node.checkKey(key); err != nil {
		return nil, toWire(err)
	}
	fillFor, wait := time.Duration(req.GetFillNanos()), time.Duration(req.GetWaitNanos())
	if err := lease.Validate(fillFor, wait); err != nil {
		return nil, fmt.Errorf("%w: %v", transport.ErrInvalidArgument, err)
	}
	ans, err := g.leases.Acquire(ctx, key, fillFor, time.Now().Add(wait))
	switch {
	case errors.Is(err, lease.ErrClosed):
		return nil, fmt.Errorf("%w: %s is closing", transport.ErrLeaving, g.node.cfg.Name)
	case errors.Is(err, lease.ErrArgument), errors.Is(err, lease.ErrTooMany):
		return nil, fmt.Errorf("%w: %v", transport.ErrInvalidArgument, err)
	case err != nil:
		return nil, toWire(err)
	}
	resp := &peerpb.LeaseResponse{State: wireLeaseState(ans.State), Token: ans.Token}
	if ans.State == lease.Hit || ans.State == lease.Stale {
		if resp.Entry, err = g.encodeEntry(key, ans.Entry); err != nil {
			return nil, toWire(err)
		}
	}
	return resp, nil
}

func (g *Group[V]) serveFillSet(ctx context.Context, req *peerpb.FillSetRequest) (*peerpb.FillSetResponse, error) {
	pe := req.GetEntry()
	key := string(pe.GetKey())
	if err := g.node.checkKey(key); err != nil {
		return nil, toWire(err)
	}
	e := lease.Expiry{TTL: time.Duration(pe.GetFreshForNanos()), SWR: time.Duration(pe.GetStaleForNanos())}
	if err := e.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %v", transport.ErrInvalidArgument, err)
	}
	if err := version.Check(pe.GetVersion()); err != nil {
		return nil, fmt.Errorf("%w: %v", transport.ErrInvalidArgument, err)
	}
	v, err := g.codec.Decode(pe.GetValue())
	if err != nil {
		return nil, fmt.Errorf("%w: %v", transport.ErrInvalidArgument, err)
	}
	version, err := g.leases.Store(key, v, req.GetToken(), e, pe.GetVersion())
	if err != nil {
		return nil, toWire(err)
	}
	if version > 0 {
		g.near.Invalidate(key, version)
	}
	return &peerpb.FillSetResponse{Stored: version > 0, Version: version}, nil
}

func (g *Group[V]) leaseFromWire(resp *peerpb.LeaseResponse) (lease.Answer[V], error) {
	ans := lease.Answer[V]{Token: resp.GetToken()}
	switch resp.GetState() {
	case peerpb.LeaseState_LEASE_STATE_HIT:
		ans.State = lease.Hit
	case peerpb.LeaseState_LEASE_STATE_FILL:
		ans.State = lease.Fill
	case peerpb.LeaseState_LEASE_STATE_STALE:
		ans.State = lease.Stale
	case peerpb.LeaseState_LEASE_STATE_BUSY:
		ans.State = lease.Busy
	case peerpb.LeaseState_LEASE_STATE_MOVED:
		ans.State = lease.Moved
	default:
		return ans, fmt.Errorf("corral: lease answer of unknown state %v", resp.GetState())
	}
	if ans.State == lease.Hit || ans.State == lease.Stale {
		pe := resp.GetEntry()
		if err := version.Check(pe.GetVersion()); err != nil {
			return ans, fmt.Errorf("corral: value of %s/%q from its owner: %w", g.name, pe.GetKey(), err)
		}
		g.node.versions.Observe(pe.GetVersion())
		e, err := g.decodeEntry(pe)
		if err != nil {
			return ans, fmt.Errorf("corral: value of %s/%q from its owner: %w", g.name, pe.GetKey(), err)
		}
		ans.Entry = e
	}
	return ans, nil
}

func wireLeaseState(s lease.State) peerpb.LeaseState {
	switch s {
	case lease.Hit:
		return peerpb.LeaseState_LEASE_STATE_HIT
	case lease.Fill:
		return peerpb.LeaseState_LEASE_STATE_FILL
	case lease.Stale:
		return peerpb.LeaseState_LEASE_STATE_STALE
	case lease.Busy:
		return peerpb.LeaseState_LEASE_STATE_BUSY
	}
	return peerpb.LeaseState_LEASE_STATE_MOVED
}

// leaseErr turns the lease table's errors into the public ones, with their messages.
func leaseErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, lease.ErrClosed):
		return ErrClosed
	case errors.Is(err, lease.ErrArgument):
		return relabel(err, ErrLeaseArgument)
	case errors.Is(err, lease.ErrTooMany):
		return relabel(err, ErrTooManyLeases)
	}
	return err
}

// leaseStore is a group's store as its lease table sees it.
type leaseStore[V any] struct{ g *Group[V] }

func (s leaseStore[V]) Peek(key string) (fill.Entry[V], bool) { return s.g.local.Peek(key) }
func (s leaseStore[V]) Floor(key string) uint64               { return s.g.tombs.Floor(key) }

func (s leaseStore[V]) SetFor(key string, v V, fresh, swr time.Duration, floor, version uint64) (bool, error) {
	return s.g.local.SetFor(key, v, fresh, swr, floor, version)
}

// Take stores a copy another member still holds (a warm pull), unless a write overtook it;
// a remembered not-found is no value: the caller builds it.
func (s leaseStore[V]) Take(ctx context.Context, key string) bool {
	g := s.g
	e, found := handoff.Pull(ctx, g.node.mover, g.name, key, g.tombs.Floor, g.decodeEntry)
	if !found || e.NotFound {
		return false
	}
	if stored, _ := g.local.Put(key, e); !stored {
		return false // a write overtook the copy
	}
	g.node.metrics.handoff.WithLabelValues("received").Inc()
	return true
}

var _ lease.Store[string] = leaseStore[string]{}
