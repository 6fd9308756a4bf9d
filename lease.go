package corral

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/corralcache/corral/internal/lease"
	"github.com/corralcache/corral/internal/tracing"
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

// Expiry is the lifetime of one written value, instead of the group's TTL, jitter and grace,
// and its tags.
type Expiry struct {
	TTL  time.Duration // how long it is fresh; 0 = it never expires
	SWR  time.Duration // then how long it is served stale while one caller refreshes it; 0 = none
	Tags []string      // the value's tags: RemoveByTag of one of them removes it; nil = none
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
func (g *Group[V]) Lease(ctx context.Context, key string, o LeaseOptions) (l Lease[V], err error) {
	if g.tr != nil {
		var span trace.Span
		ctx, span = g.tr.Start(ctx, "corral.Lease", g.g.Name(), key)
		defer func() {
			if err == nil {
				span.SetAttributes(attribute.String("corral.lease.state", string(l.State)))
			}
			tracing.End(span, err)
		}()
	}
	ans, err := g.g.Lease(ctx, key, o.Fill, o.Wait)
	if err != nil {
		return Lease[V]{}, publicErr(err)
	}
	return Lease[V]{State: LeaseState(ans.State), Value: ans.Entry.Value, Token: ans.Token}, nil
}

// FillSet stores v for key with lifetime e, but only while token is the key's live lease
// (from Lease): it reports false, and changes nothing, when the lease has lapsed, was
// revoked by a Set, Remove or FillSet, or the key's owner changed since it was granted.
// A stored value is a write like Set's: every member is told of it before FillSet returns,
// and an *UnreachedError (with stored true) names the members that could not be told.
//
// Errors: *LimitError for a bad key or value; an error wrapping ErrLeaseArgument for an
// empty token or a negative lifetime; ErrClosed after Close.
func (g *Group[V]) FillSet(ctx context.Context, key string, v V, token string, e Expiry) (stored bool, err error) {
	if g.tr != nil {
		var span trace.Span
		ctx, span = g.tr.Start(ctx, "corral.FillSet", g.g.Name(), key)
		defer func() {
			span.SetAttributes(attribute.Bool("corral.stored", stored))
			tracing.End(span, err)
		}()
	}
	stored, err = g.g.FillSet(ctx, key, v, token, lease.Expiry(e))
	return stored, publicErr(err)
}

// SetWithExpiry is Set with a lifetime of the caller's instead of the group's TTL, jitter
// and grace (Redis's SET … EX). It revokes the key's lease, as Set does.
func (g *Group[V]) SetWithExpiry(ctx context.Context, key string, v V, e Expiry) (err error) {
	if g.tr != nil {
		var span trace.Span
		ctx, span = g.tr.Start(ctx, "corral.Set", g.g.Name(), key)
		defer func() { tracing.End(span, err) }()
	}
	return publicErr(g.g.SetWithExpiry(ctx, key, v, lease.Expiry(e)))
}
