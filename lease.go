package corral

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/corralcache/corral/fill"
	"github.com/corralcache/corral/internal/handoff"
	"github.com/corralcache/corral/internal/version"
	"github.com/corralcache/corral/internal/view"
	"github.com/corralcache/corral/transport"
	"github.com/corralcache/corral/transport/peerpb"
)

// Leases let a filler outside the process — a Python service with its own database access,
// a Node renderer — build a missing value itself, with one filler in the whole cluster and
// no polling: Group.Lease answers with the value, or makes this caller the filler (a
// token), or holds it until the filler's value is stored; Group.FillSet stores the value
// only while the token is live. corral serve speaks it over HTTP and the Redis protocol
// (FILLGET / FILLSET).
//
// The key's owner holds its lease, so there is one per key in the cluster. A lease ends
// when its value is stored, when it lapses (its Fill duration passed), when a write of the
// key lands (Set, Remove, or another FillSet: the lease is revoked and its FillSet stores
// nothing), or when the key's owner changes in the owner's view (the new owner grants a
// lease of its own: at most one extra filler per ownership change, as for fills). A value
// stored by FillSet is a write like Set's — a version from the owner's clock, remembered,
// told to every member — with the lifetime the FillSet gives.

// LeaseState says what Group.Lease answered.
type LeaseState string

const (
	LeaseHit   LeaseState = "hit"   // Value is fresh
	LeaseFill  LeaseState = "fill"  // nobody held the lease: this caller does (Token); it builds the value and calls FillSet
	LeaseStale LeaseState = "stale" // Value is stale, within its SWR window; with a Token, this caller refreshes it
	LeaseBusy  LeaseState = "busy"  // another caller holds the lease and no value arrived within Wait

	// leaseMoved is the owner's answer to a waiter whose lease ended because the key's owner
	// changed: the caller asks the new owner. It never leaves the package.
	leaseMoved LeaseState = "moved"
)

// Limits of a lease request.
const (
	MinLeaseFill = time.Millisecond // shortest LeaseOptions.Fill
	MaxLeaseFill = time.Hour        // longest LeaseOptions.Fill
	MaxLeaseWait = time.Minute      // longest LeaseOptions.Wait

	// maxLeases bounds the leases one group holds on one node at once: each costs a timer
	// and a map entry until it ends, and a key without a value must not be a way to pin
	// memory for an hour each.
	maxLeases = 1 << 16
	// maxLeaseMoves bounds how often one Lease call follows the key to a new owner before
	// it answers busy: views settle in a gossip round or two.
	maxLeaseMoves = 3
)

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

func (o LeaseOptions) validate() error {
	switch {
	case o.Fill < MinLeaseFill || o.Fill > MaxLeaseFill:
		return fmt.Errorf("%w: fill %v out of [%v, %v]", ErrLeaseArgument, o.Fill, MinLeaseFill, MaxLeaseFill)
	case o.Wait < 0 || o.Wait > MaxLeaseWait:
		return fmt.Errorf("%w: wait %v out of [0, %v]", ErrLeaseArgument, o.Wait, MaxLeaseWait)
	}
	return nil
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

func (e Expiry) validate() error {
	if e.TTL < 0 || e.SWR < 0 {
		return fmt.Errorf("%w: negative TTL %v or SWR %v", ErrLeaseArgument, e.TTL, e.SWR)
	}
	return nil
}

func (e Expiry) fresh() time.Duration {
	if e.TTL == 0 {
		return fill.Never
	}
	return e.TTL
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
	if err := o.validate(); err != nil {
		return Lease[V]{}, err
	}
	n := g.node
	if n.closed.Load() {
		return Lease[V]{}, ErrClosed
	}
	until := time.Now().Add(o.Wait)
	for range maxLeaseMoves {
		var ans leaseAnswer[V]
		_, err := n.router.OnOwner(ctx, key, false,
			func() error {
				var err error
				ans, err = g.acquire(ctx, key, o.Fill, until)
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
		if ans.state != leaseMoved {
			return Lease[V]{State: ans.state, Value: ans.entry.Value, Token: ans.token}, nil
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
	if err := e.validate(); err != nil {
		return false, err
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
			version, err := g.storeLocal(key, v, token, e, drawn)
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

// leaseAnswer is what the owner answers a Lease with.
type leaseAnswer[V any] struct {
	state LeaseState
	entry fill.Entry[V] // for hit and stale
	token string
}

// leaseEnd says why a lease ended.
type leaseEnd int

const (
	leaseLive    leaseEnd = iota
	leaseStored           // its FillSet stored the value
	leaseLapsed           // its Fill duration passed
	leaseRevoked          // a write of the key landed
	leaseMovedTo          // the key's owner changed in this node's view
	leaseClosed           // the group closed
	leaseDropped          // a warm pull's placeholder whose caller left
)

// lease is one key's lease on its owner.
type lease struct {
	token   string    // "" for a placeholder: the owner looks for a copy elsewhere first (a warm pull)
	version uint64    // the key's write floor at grant: a later write revokes the lease
	owner   string    // the key's owner in this node's view at grant
	expires time.Time // when it lapses; timer may fire early for an earlier expiry, see lapse
	timer   *time.Timer
	done    chan struct{} // closed when the lease ends
	end     leaseEnd      // written under leases.mu before done is closed, read after
}

// leases holds a group's leases on this node.
type leases struct {
	mu sync.Mutex
	// guards byKey, movedAway and closed
	byKey map[string]*lease // live leases only
	// movedAway holds the keys whose lease ended here because the key moved to another
	// owner, until that lease would have lapsed: this node grants none of them again
	// meanwhile — a caller whose view is behind still asks it, and the new owner grants its
	// own, so one ownership change costs one extra filler, not two.
	movedAway map[string]time.Time
	closed    bool

	granted  atomic.Uint64 // tokens handed out (fill and refresh)
	lapsed   atomic.Uint64 // leases whose Fill duration passed without a FillSet
	rejected atomic.Uint64 // FillSets whose token was not live
}

func newLeases() *leases {
	return &leases{byKey: make(map[string]*lease), movedAway: make(map[string]time.Time)}
}

// grantLocked makes a live lease of key for d. A token of 64 random bits: a FillSet that
// reaches an owner holding another lease of the key never passes for its holder.
func (t *leases) grantLocked(key string, placeholder bool, version uint64, owner string, d time.Duration) *lease {
	l := &lease{version: version, owner: owner, expires: time.Now().Add(d), done: make(chan struct{})}
	if !placeholder {
		l.token = newToken()
		t.granted.Add(1)
	}
	l.timer = time.AfterFunc(d, func() { t.lapse(key, l) })
	t.byKey[key] = l
	return l
}

func newToken() string { return fmt.Sprintf("%016x", rand.Uint64()) }

// endLocked ends l, if it is still key's live lease, and wakes its waiters.
func (t *leases) endLocked(key string, l *lease, why leaseEnd) {
	if t.byKey[key] != l {
		return
	}
	delete(t.byKey, key)
	l.timer.Stop()
	l.end = why
	close(l.done)
}

// lapse ends l when its time is up.
func (t *leases) lapse(key string, l *lease) {
	t.mu.Lock()
	defer t.mu.Unlock()
	// A placeholder turned into a lease has its timer reset; a firing of the old timer that
	// raced with the reset finds its expiry not reached yet and does nothing.
	if t.byKey[key] == l && !time.Now().Before(l.expires) {
		if l.token != "" {
			t.lapsed.Add(1)
		}
		t.endLocked(key, l, leaseLapsed)
	}
}

// revoke ends key's lease if it was granted before the write of version.
func (t *leases) revoke(key string, version uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if l, ok := t.byKey[key]; ok && l.version < version {
		t.endLocked(key, l, leaseRevoked)
	}
}

// moved ends the leases of the keys whose owner in v is another member than their owner at
// grant. A lease this node granted as acting owner (the owner did not answer, or was
// leaving) stays live when the key is now its own: its holder builds the value here.
func (t *leases) moved(v *view.View) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := time.Now()
	for key, until := range t.movedAway {
		if !now.Before(until) || v.Owner(key) == v.Self {
			delete(t.movedAway, key)
		}
	}
	for key, l := range t.byKey {
		switch owner := v.Owner(key); owner {
		case l.owner:
		case v.Self:
			l.owner = owner
		default:
			t.endLocked(key, l, leaseMovedTo)
			if l.token != "" {
				t.movedAway[key] = l.expires
			}
		}
	}
}

// movedAwayLocked reports whether key's lease moved away from this node lately (see
// leases.movedAway).
func (t *leases) movedAwayLocked(key string) bool {
	until, ok := t.movedAway[key]
	if ok && !time.Now().Before(until) {
		delete(t.movedAway, key)
		return false
	}
	return ok
}

func (t *leases) close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed = true
	for key, l := range t.byKey {
		t.endLocked(key, l, leaseClosed)
	}
}

// acquire is the owner's side of Lease (see Group.Lease): answers from the store, grants,
// or waits until until for the lease's holder.
func (g *Group[V]) acquire(ctx context.Context, key string, fillFor time.Duration, until time.Time) (leaseAnswer[V], error) {
	t := g.leases
	for {
		if err := ctx.Err(); err != nil {
			// A caller that has gone (its client hung up while it waited) is granted nothing:
			// a lease nobody builds would hold the others up for its whole Fill.
			return leaseAnswer[V]{}, err
		}
		t.mu.Lock()
		if t.closed {
			t.mu.Unlock()
			return leaseAnswer[V]{}, ErrClosed
		}
		// The view is read under t.mu: a membership change stores its view before it ends
		// the leases it moved (moved takes t.mu), so a lease granted on an older view than
		// the newest is ended by that sweep.
		v := g.node.view.Load()
		// The store is read under t.mu, where FillSet stores: a waiter woken by a stored
		// lease finds the value here. A Set or Remove stores before it revokes the lease.
		e, ok := g.local.Peek(key)
		if ok && e.FreshFor > 0 {
			t.mu.Unlock()
			return leaseAnswer[V]{state: LeaseHit, entry: e}, nil
		}
		l := t.byKey[key]
		if l == nil && len(t.byKey) >= maxLeases {
			t.mu.Unlock()
			return leaseAnswer[V]{}, fmt.Errorf("%w: %d in group %q on this node, the limit", ErrTooManyLeases, maxLeases, g.name)
		}
		movedAway := l == nil && t.movedAwayLocked(key)
		if ok { // stale, within its SWR window
			ans := leaseAnswer[V]{state: LeaseStale, entry: e}
			if l == nil && !movedAway {
				ans.token = t.grantLocked(key, false, max(e.Version, g.tombs.Floor(key)), v.Owner(key), fillFor).token
			}
			t.mu.Unlock()
			return ans, nil
		}
		if movedAway {
			t.mu.Unlock()
			return leaseAnswer[V]{state: leaseMoved}, nil // the new owner grants it
		}
		if l == nil {
			floor := g.tombs.Floor(key)
			if _, movedHere := v.PeekCandidates(key, g.node.cfg.PeekWindow, time.Now(), g.node.askedAt()); movedHere {
				// The key's owner changed lately: a member may still hold it. One caller looks
				// (a warm pull) under a placeholder that keeps the others waiting.
				ph := t.grantLocked(key, true, floor, v.Owner(key), 2*g.node.cfg.PeekTimeout+time.Second)
				t.mu.Unlock()
				if ans, ok, err := g.pullOrGrant(ctx, key, ph, fillFor); ok || err != nil {
					return ans, err
				}
				continue
			}
			token := t.grantLocked(key, false, floor, v.Owner(key), fillFor).token
			t.mu.Unlock()
			return leaseAnswer[V]{state: LeaseFill, token: token}, nil
		}
		wait := time.Until(until)
		if wait <= 0 {
			t.mu.Unlock()
			return leaseAnswer[V]{state: LeaseBusy}, nil
		}
		done := l.done
		t.mu.Unlock()
		timer := time.NewTimer(wait)
		select {
		case <-done:
			timer.Stop()
			if l.end == leaseMovedTo {
				return leaseAnswer[V]{state: leaseMoved}, nil
			}
			// Stored, lapsed or revoked: look again (a hit, or this caller may fill).
		case <-timer.C:
			return leaseAnswer[V]{state: LeaseBusy}, nil
		case <-ctx.Done():
			timer.Stop()
			return leaseAnswer[V]{}, ctx.Err()
		}
	}
}

// pullOrGrant runs the warm pull of placeholder ph: a copy found elsewhere is stored and
// ends ph (the caller looks again and finds it); none found turns ph into this caller's
// lease. ok reports that ans is the answer; otherwise the caller looks again.
func (g *Group[V]) pullOrGrant(ctx context.Context, key string, ph *lease, fillFor time.Duration) (ans leaseAnswer[V], ok bool, err error) {
	t := g.leases
	e, found := handoff.Pull(ctx, g.node.mover, g.name, key, g.tombs.Floor, g.decodeEntry)
	found = found && !e.NotFound // a remembered not-found: the value is missing, and this caller builds it
	if found {
		if stored, _ := g.local.Put(key, e); stored {
			g.node.metrics.handoff.WithLabelValues("received").Inc()
		} else {
			found = false // a write overtook the copy
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case ctx.Err() != nil:
		t.endLocked(key, ph, leaseDropped) // nobody would build it: let the next caller
		return ans, false, ctx.Err()
	case found:
		t.endLocked(key, ph, leaseStored)
		return ans, false, nil
	case t.byKey[key] != ph: // revoked, moved or closed while pulling
		if ph.end == leaseMovedTo {
			return leaseAnswer[V]{state: leaseMoved}, true, nil
		}
		return ans, false, nil
	}
	ph.token = newToken()
	t.granted.Add(1)
	ph.expires = time.Now().Add(fillFor)
	ph.timer.Reset(fillFor)
	return leaseAnswer[V]{state: LeaseFill, token: ph.token}, true, nil
}

// storeLocal is store on the owner: it returns the write's version, or 0 when token is not
// key's live lease (nothing changes then). Without a token the write is a Set with a
// lifetime, at drawn, the writer's version (see Group.write); under a lease it takes a
// version of the owner's, larger than the grant's: the lease, which ends once it stored,
// keeps a late duplicate out.
func (g *Group[V]) storeLocal(key string, v V, token string, e Expiry, drawn uint64) (uint64, error) {
	if token == "" {
		version := g.writeVersion(drawn)
		_, err := g.local.SetFor(key, v, e.fresh(), e.SWR, math.MaxUint64, version)
		return version, err
	}
	t := g.leases
	t.mu.Lock()
	defer t.mu.Unlock()
	cur := g.node.view.Load()
	l := t.byKey[key]
	if l == nil || l.token != token || cur.Owner(key) != l.owner {
		t.rejected.Add(1)
		return 0, nil
	}
	version := g.node.versions.Next()
	ok, err := g.local.SetFor(key, v, e.fresh(), e.SWR, l.version, version)
	switch {
	case err != nil:
		return 0, err
	case !ok: // a write landed since the grant, and its revocation is on its way
		t.rejected.Add(1)
		t.endLocked(key, l, leaseRevoked)
		return 0, nil
	}
	t.endLocked(key, l, leaseStored)
	return version, nil
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

func (g *Group[V]) leasesMoved(v *view.View) { g.leases.moved(v) }

func (g *Group[V]) serveLease(ctx context.Context, req *peerpb.LeaseRequest) (*peerpb.LeaseResponse, error) {
	key := string(req.GetKey())
	if err := g.node.checkKey(key); err != nil {
		return nil, toWire(err)
	}
	o := LeaseOptions{Fill: time.Duration(req.GetFillNanos()), Wait: time.Duration(req.GetWaitNanos())}
	if err := o.validate(); err != nil {
		return nil, fmt.Errorf("%w: %v", transport.ErrInvalidArgument, err)
	}
	ans, err := g.acquire(ctx, key, o.Fill, time.Now().Add(o.Wait))
	switch {
	case errors.Is(err, ErrClosed):
		return nil, fmt.Errorf("%w: %s is closing", transport.ErrLeaving, g.node.cfg.Name)
	case errors.Is(err, ErrLeaseArgument), errors.Is(err, ErrTooManyLeases):
		return nil, fmt.Errorf("%w: %v", transport.ErrInvalidArgument, err)
	case err != nil:
		return nil, toWire(err)
	}
	resp := &peerpb.LeaseResponse{State: wireLeaseState(ans.state), Token: ans.token}
	if ans.state == LeaseHit || ans.state == LeaseStale {
		if resp.Entry, err = g.encodeEntry(key, ans.entry); err != nil {
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
	e := Expiry{TTL: time.Duration(pe.GetFreshForNanos()), SWR: time.Duration(pe.GetStaleForNanos())}
	if err := e.validate(); err != nil {
		return nil, fmt.Errorf("%w: %v", transport.ErrInvalidArgument, err)
	}
	if err := version.Check(pe.GetVersion()); err != nil {
		return nil, fmt.Errorf("%w: %v", transport.ErrInvalidArgument, err)
	}
	v, err := g.codec.Decode(pe.GetValue())
	if err != nil {
		return nil, fmt.Errorf("%w: %v", transport.ErrInvalidArgument, err)
	}
	version, err := g.storeLocal(key, v, req.GetToken(), e, pe.GetVersion())
	if err != nil {
		return nil, toWire(err)
	}
	if version > 0 {
		g.near.Invalidate(key, version)
	}
	return &peerpb.FillSetResponse{Stored: version > 0, Version: version}, nil
}

func (g *Group[V]) leaseFromWire(resp *peerpb.LeaseResponse) (leaseAnswer[V], error) {
	ans := leaseAnswer[V]{token: resp.GetToken()}
	switch resp.GetState() {
	case peerpb.LeaseState_LEASE_STATE_HIT:
		ans.state = LeaseHit
	case peerpb.LeaseState_LEASE_STATE_FILL:
		ans.state = LeaseFill
	case peerpb.LeaseState_LEASE_STATE_STALE:
		ans.state = LeaseStale
	case peerpb.LeaseState_LEASE_STATE_BUSY:
		ans.state = LeaseBusy
	case peerpb.LeaseState_LEASE_STATE_MOVED:
		ans.state = leaseMoved
	default:
		return ans, fmt.Errorf("corral: lease answer of unknown state %v", resp.GetState())
	}
	if ans.state == LeaseHit || ans.state == LeaseStale {
		pe := resp.GetEntry()
		if err := version.Check(pe.GetVersion()); err != nil {
			return ans, fmt.Errorf("corral: value of %s/%q from its owner: %w", g.name, pe.GetKey(), err)
		}
		g.node.versions.Observe(pe.GetVersion())
		e, err := g.decodeEntry(pe)
		if err != nil {
			return ans, fmt.Errorf("corral: value of %s/%q from its owner: %w", g.name, pe.GetKey(), err)
		}
		ans.entry = e
	}
	return ans, nil
}

func wireLeaseState(s LeaseState) peerpb.LeaseState {
	switch s {
	case LeaseHit:
		return peerpb.LeaseState_LEASE_STATE_HIT
	case LeaseFill:
		return peerpb.LeaseState_LEASE_STATE_FILL
	case LeaseStale:
		return peerpb.LeaseState_LEASE_STATE_STALE
	case LeaseBusy:
		return peerpb.LeaseState_LEASE_STATE_BUSY
	}
	return peerpb.LeaseState_LEASE_STATE_MOVED
}
