package lease

import (
	"context"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/corralcache/corral/fill"
	"github.com/corralcache/corral/internal/version"
	"github.com/corralcache/corral/internal/view"
)

// Config is what a Table needs of its node and group. Every field is required; the pointers
// are the node's.
type Config struct {
	Group string                     // the group's name, for errors
	View  *atomic.Pointer[view.View] // this node's current view
	Clock *version.Clock
	// PeekWindow and AskedAt say whether a key moved here lately (view.View.PeekCandidates);
	// PeekTimeout bounds each question of a warm pull.
	PeekWindow, PeekTimeout time.Duration
	AskedAt                 func() time.Time
}

// Store is what a Table needs of the group's store of the keys it owns.
type Store[V any] interface {
	// Peek returns the entry of key held, fresh or stale within its grace.
	Peek(key string) (fill.Entry[V], bool)
	// Floor returns the latest write of key known here (a tombstone's version).
	Floor(key string) uint64
	// SetFor stores v for key with the lifetime and tags given, at version, unless a write of
	// key at or above floor landed (fill.Cache.SetFor).
	SetFor(key string, v V, fresh, swr time.Duration, floor, version uint64, tags ...string) (bool, error)
	// Take looks for a copy of key that another member still holds (a warm pull) and stores
	// it; it reports whether it stored a value (a remembered not-found is no value).
	Take(ctx context.Context, key string) bool
}

// Answer is what the owner answers a Lease with.
type Answer[V any] struct {
	State State
	Entry fill.Entry[V] // for Hit and Stale
	Token string
}

// Acquire is the owner's side of a Lease of key (see corral.Group.Lease): it answers from the
// store, grants, or waits until until for the lease's holder.
func (t *Table[V]) Acquire(ctx context.Context, key string, fillFor time.Duration, until time.Time) (Answer[V], error) {
	for {
		if err := ctx.Err(); err != nil {
			// A caller that has gone (its client hung up while it waited) is granted nothing:
			// a lease nobody builds would hold the others up for its whole Fill.
			return Answer[V]{}, err
		}
		t.mu.Lock()
		if t.closed {
			t.mu.Unlock()
			return Answer[V]{}, view.ErrClosed
		}
		// The view is read under t.mu: a membership change stores its view before it ends
		// the leases it moved (moved takes t.mu), so a lease granted on an older view than
		// the newest is ended by that sweep.
		v := t.cfg.View.Load()
		// The store is read under t.mu, where FillSet stores: a waiter woken by a stored
		// lease finds the value here. A Set or Remove stores before it revokes the lease.
		e, ok := t.store.Peek(key)
		if ok && e.FreshFor > 0 {
			t.mu.Unlock()
			return Answer[V]{State: Hit, Entry: e}, nil
		}
		l := t.byKey[key]
		if l == nil && len(t.byKey) >= MaxHeld {
			t.mu.Unlock()
			return Answer[V]{}, fmt.Errorf("%w: %d in group %q on this node, the limit", ErrTooMany, MaxHeld, t.cfg.Group)
		}
		movedAway := l == nil && t.movedAwayLocked(key)
		if ok { // stale, within its SWR window
			ans := Answer[V]{State: Stale, Entry: e}
			if l == nil && !movedAway {
				ans.Token = t.grantLocked(key, false, max(e.Version, t.store.Floor(key)), v.Owner(key), fillFor).token
			}
			t.mu.Unlock()
			return ans, nil
		}
		if movedAway {
			t.mu.Unlock()
			return Answer[V]{State: Moved}, nil // the new owner grants it
		}
		if l == nil {
			floor := t.store.Floor(key)
			if _, movedHere := v.PeekCandidates(key, t.cfg.PeekWindow, time.Now(), t.cfg.AskedAt()); movedHere {
				// The key's owner changed lately: a member may still hold it. One caller looks
				// (a warm pull) under a placeholder that keeps the others waiting.
				ph := t.grantLocked(key, true, floor, v.Owner(key), 2*t.cfg.PeekTimeout+time.Second)
				t.mu.Unlock()
				if ans, ok, err := t.pullOrGrant(ctx, key, ph, fillFor); ok || err != nil {
					return ans, err
				}
				continue
			}
			token := t.grantLocked(key, false, floor, v.Owner(key), fillFor).token
			t.mu.Unlock()
			return Answer[V]{State: Fill, Token: token}, nil
		}
		wait := time.Until(until)
		if wait <= 0 {
			t.mu.Unlock()
			return Answer[V]{State: Busy}, nil
		}
		done := l.done
		t.mu.Unlock()
		timer := time.NewTimer(wait)
		select {
		case <-done:
			timer.Stop()
			if l.end == leaseMovedTo {
				return Answer[V]{State: Moved}, nil
			}
			// Stored, lapsed or revoked: look again (a hit, or this caller may fill).
		case <-timer.C:
			return Answer[V]{State: Busy}, nil
		case <-ctx.Done():
			timer.Stop()
			return Answer[V]{}, ctx.Err()
		}
	}
}

// pullOrGrant runs the warm pull of placeholder ph: a copy found elsewhere is stored and
// ends ph (the caller looks again and finds it); none found turns ph into this caller's
// lease. ok reports that ans is the answer; otherwise the caller looks again.
func (t *Table[V]) pullOrGrant(ctx context.Context, key string, ph *lease, fillFor time.Duration) (ans Answer[V], ok bool, err error) {
	found := t.store.Take(ctx, key)
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
			return Answer[V]{State: Moved}, true, nil
		}
		return ans, false, nil
	}
	ph.token = newToken()
	t.granted.Add(1)
	ph.expires = time.Now().Add(fillFor)
	ph.timer.Reset(fillFor)
	return Answer[V]{State: Fill, Token: ph.token}, true, nil
}

// Store is the owner's side of a FillSet or SetWithExpiry of key: it returns the write's
// version, or 0 when token is not key's live lease (nothing changes then). Without a token
// the write is a Set with a lifetime, at drawn, the writer's version (see write.Writer.Write);
// under a lease it takes a version of the owner's, larger than the grant's: the lease, which
// ends once it stored, keeps a late duplicate out.
func (t *Table[V]) Store(key string, v V, token string, e Expiry, drawn uint64) (uint64, error) {
	if token == "" {
		version := t.cfg.Clock.OrNext(drawn)
		_, err := t.store.SetFor(key, v, e.fresh(), e.SWR, math.MaxUint64, version, e.Tags...)
		return version, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	cur := t.cfg.View.Load()
	l := t.byKey[key]
	if l == nil || l.token != token || cur.Owner(key) != l.owner {
		t.rejected.Add(1)
		return 0, nil
	}
	version := t.cfg.Clock.Next()
	ok, err := t.store.SetFor(key, v, e.fresh(), e.SWR, l.version, version, e.Tags...)
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
