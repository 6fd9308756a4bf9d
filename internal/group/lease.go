package group

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/corralcache/corral/fill"
	"github.com/corralcache/corral/internal/handoff"
	"github.com/corralcache/corral/internal/lease"
	"github.com/corralcache/corral/internal/route"
	"github.com/corralcache/corral/internal/version"
	"github.com/corralcache/corral/internal/view"
	"github.com/corralcache/corral/transport"
	"github.com/corralcache/corral/transport/peerpb"
)

// Lease asks key's owner for the value of key, or for the right to build it for fillFor
// (corral.Group.Lease), waiting up to wait for a holder's value: locally when this node owns
// the key, through one long-poll peer call otherwise. It follows the key to a new owner when
// the one it asked lost it meanwhile (lease.Moved), at most maxLeaseMoves times.
//
// Errors: *limit.Error for a bad key; an error wrapping lease.ErrArgument for a fill or
// wait out of range; one wrapping lease.ErrTooMany when the owner's table is full; ctx.Err()
// when ctx ends first; view.ErrClosed after Close.
func (g *Group[V]) Lease(ctx context.Context, key string, fillFor, wait time.Duration) (lease.Answer[V], error) {
	if err := g.env.Limits.Key(key); err != nil {
		return lease.Answer[V]{}, err
	}
	if err := lease.Validate(fillFor, wait); err != nil {
		return lease.Answer[V]{}, err
	}
	if g.env.State.Closed.Load() {
		return lease.Answer[V]{}, view.ErrClosed
	}
	until := time.Now().Add(wait)
	for range maxLeaseMoves {
		var ans lease.Answer[V]
		_, err := g.env.Router.OnOwner(ctx, key, false,
			func() error {
				var err error
				ans, err = g.leases.Acquire(ctx, key, fillFor, until)
				return err
			},
			func(ctx context.Context, st *view.MemberState) error {
				wait := max(time.Until(until), 0)
				// The owner may hold the call for wait: give it a deadline past that, so the
				// client's default call timeout does not read a long wait as a dead owner.
				cctx, cancel := context.WithTimeout(ctx, wait+g.env.PeerTimeout)
				defer cancel()
				resp, err := g.env.Client.Lease(cctx, st.PeerAddr, &peerpb.LeaseRequest{
					Header: g.env.Router.Header(ctx), Group: g.name, Key: []byte(key),
					FillNanos: int64(fillFor), WaitNanos: int64(wait),
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
			if strings.Contains(err.Error(), lease.ErrTooMany.Error()) {
				return lease.Answer[V]{}, fmt.Errorf("%w on the key's owner: %v", lease.ErrTooMany, err)
			}
			return lease.Answer[V]{}, fmt.Errorf("%w: %v", lease.ErrArgument, err)
		}
		if err != nil {
			return lease.Answer[V]{}, g.wrapErr(key, route.FromWire(err))
		}
		if ans.State != lease.Moved {
			return ans, nil
		}
	}
	return lease.Answer[V]{State: lease.Busy}, nil
}

// maxLeaseMoves bounds how often one Lease call follows the key to a new owner before it
// answers busy: views settle in a gossip round or two.
const maxLeaseMoves = 3

// FillSet stores v for key with lifetime e, but only while token is the key's live lease
// (corral.Group.FillSet). A stored value is a write like Set's.
func (g *Group[V]) FillSet(ctx context.Context, key string, v V, token string, e lease.Expiry) (bool, error) {
	if token == "" {
		return false, fmt.Errorf("%w: empty token", lease.ErrArgument)
	}
	return g.store(ctx, key, v, token, e)
}

// SetWithExpiry is Set with a lifetime of the caller's instead of the group's TTL, jitter
// and grace (Redis's SET … EX). It revokes the key's lease, as Set does.
func (g *Group[V]) SetWithExpiry(ctx context.Context, key string, v V, e lease.Expiry) error {
	_, err := g.store(ctx, key, v, "", e)
	return err
}

// store writes v for key with lifetime e through the owner: under token's lease, or
// unconditionally when token is "".
func (g *Group[V]) store(ctx context.Context, key string, v V, token string, e lease.Expiry) (bool, error) {
	if err := g.env.Limits.Key(key); err != nil {
		return false, err
	}
	if err := e.Validate(); err != nil {
		return false, err
	}
	if err := fill.CheckTags(e.Tags); err != nil {
		return false, err
	}
	enc, err := g.encodeChecked(key, v)
	if err != nil {
		return false, err
	}
	var stored bool
	err = g.write(ctx, key,
		func(drawn uint64) (uint64, []string, error) {
			version, err := g.leases.Store(key, v, token, e, drawn)
			stored = version > 0
			if err != nil || !stored {
				return version, nil, err
			}
			return version, g.pushBackups(ctx, []string{key}), nil
		},
		func(ctx context.Context, st *view.MemberState, drawn uint64) (uint64, []string, error) {
			b, err := g.encoded(key, v, enc)
			if err != nil {
				return 0, nil, err
			}
			resp, err := g.env.Client.FillSet(ctx, st.PeerAddr, &peerpb.FillSetRequest{
				Header: g.env.Router.Header(ctx), Token: token,
				Entry: &peerpb.Entry{Group: g.name, Key: []byte(key), Value: b,
					FreshForNanos: int64(e.TTL), StaleForNanos: int64(e.SWR), Version: drawn, Tags: e.Tags},
			})
			stored = resp.GetStored()
			return resp.GetVersion(), resp.GetUnreached(), err
		})
	return stored, err
}

// ViewChanged follows a membership change to v: it ends the leases of keys whose owner
// changed, and has the entries and their backups follow the new view (see follow).
func (g *Group[V]) ViewChanged(v *view.View) {
	g.leases.Moved(v)
	g.viewChanged()
}

// ServeLease serves a peer's Lease, as the key's acting owner.
func (g *Group[V]) ServeLease(ctx context.Context, req *peerpb.LeaseRequest) (*peerpb.LeaseResponse, error) {
	key := string(req.GetKey())
	if err := g.env.Limits.Key(key); err != nil {
		return nil, route.ToWire(err)
	}
	fillFor, wait := time.Duration(req.GetFillNanos()), time.Duration(req.GetWaitNanos())
	if err := lease.Validate(fillFor, wait); err != nil {
		return nil, fmt.Errorf("%w: %v", transport.ErrInvalidArgument, err)
	}
	ans, err := g.leases.Acquire(ctx, key, fillFor, time.Now().Add(wait))
	switch {
	case errors.Is(err, view.ErrClosed):
		return nil, fmt.Errorf("%w: %s is closing", transport.ErrLeaving, g.env.Self)
	case errors.Is(err, lease.ErrArgument), errors.Is(err, lease.ErrTooMany):
		return nil, fmt.Errorf("%w: %v", transport.ErrInvalidArgument, err)
	case err != nil:
		return nil, route.ToWire(err)
	}
	resp := &peerpb.LeaseResponse{State: wireLeaseState(ans.State), Token: ans.Token}
	if ans.State == lease.Hit || ans.State == lease.Stale {
		if resp.Entry, err = g.encodeEntry(key, ans.Entry); err != nil {
			return nil, route.ToWire(err)
		}
	}
	return resp, nil
}

// ServeFillSet serves a peer's FillSet, as the key's acting owner.
func (g *Group[V]) ServeFillSet(ctx context.Context, req *peerpb.FillSetRequest) (*peerpb.FillSetResponse, error) {
	pe := req.GetEntry()
	key := string(pe.GetKey())
	if err := g.env.Limits.Key(key); err != nil {
		return nil, route.ToWire(err)
	}
	e := lease.Expiry{TTL: time.Duration(pe.GetFreshForNanos()), SWR: time.Duration(pe.GetStaleForNanos()), Tags: pe.GetTags()}
	if err := e.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %v", transport.ErrInvalidArgument, err)
	}
	if err := fill.CheckTags(e.Tags); err != nil {
		return nil, route.ToWire(err)
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
		return nil, route.ToWire(err)
	}
	var unreached []string
	if version > 0 {
		g.near.Invalidate(key, version)
		unreached = g.pushBackups(ctx, []string{key}) // before the writer returns
	}
	return &peerpb.FillSetResponse{Stored: version > 0, Version: version, Unreached: unreached}, nil
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
		g.env.Versions.Observe(pe.GetVersion())
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

// leaseStore is a group's store as its lease table sees it.
type leaseStore[V any] struct{ g *Group[V] }

func (s leaseStore[V]) Peek(key string) (fill.Entry[V], bool) { return s.g.local.Peek(key) }
func (s leaseStore[V]) Floor(key string) uint64               { return s.g.tombs.Floor(key) }

func (s leaseStore[V]) SetFor(key string, v V, fresh, swr time.Duration, floor, version uint64, tags ...string) (bool, error) {
	return s.g.local.SetFor(key, v, fresh, swr, floor, version, tags...)
}

// Take stores a copy another member still holds (a warm pull), unless a write overtook it;
// a remembered not-found is no value: the caller builds it.
func (s leaseStore[V]) Take(ctx context.Context, key string) bool {
	g := s.g
	e, found := handoff.Pull(ctx, g.env.Mover, g.name, key, g.tombs.Floor, g.decodeEntry)
	if !found || e.NotFound {
		return false
	}
	if stored, _ := g.local.Put(key, e); !stored {
		// A write overtook the copy, or a copy as new came meanwhile — its former owner gave
		// it after the membership change (moveOn) —, which the caller finds when it looks
		// again.
		held, ok := g.local.PeekAny(key)
		return ok && !held.NotFound && held.Version >= e.Version
	}
	g.env.Received()
	return true
}

var _ lease.Store[string] = leaseStore[string]{}
