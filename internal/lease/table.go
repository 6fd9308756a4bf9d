package lease

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/corralcache/corral/internal/view"
)

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
	end     leaseEnd      // written under Table.mu before done is closed, read after
}

// Table holds a group's leases on this node, as the owner of their keys, and answers the
// owner's side of Lease and FillSet (Acquire, Store). Its methods are safe for concurrent
// use.
type Table[V any] struct {
	cfg   Config
	store Store[V]

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

// NewTable returns the lease table of a group whose keys are in store.
func NewTable[V any](cfg Config, store Store[V]) *Table[V] {
	return &Table[V]{cfg: cfg, store: store, byKey: make(map[string]*lease), movedAway: make(map[string]time.Time)}
}

// grantLocked makes a live lease of key for d. A token of 64 random bits: a FillSet that
// reaches an owner holding another lease of the key never passes for its holder.
func (t *Table[V]) grantLocked(key string, placeholder bool, version uint64, owner string, d time.Duration) *lease {
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
func (t *Table[V]) endLocked(key string, l *lease, why leaseEnd) {
	if t.byKey[key] != l {
		return
	}
	delete(t.byKey, key)
	l.timer.Stop()
	l.end = why
	close(l.done)
}

// lapse ends l when its time is up.
func (t *Table[V]) lapse(key string, l *lease) {
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

// Revoke ends key's lease if it was granted before the write of version.
func (t *Table[V]) Revoke(key string, version uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if l, ok := t.byKey[key]; ok && l.version < version {
		t.endLocked(key, l, leaseRevoked)
	}
}

// Moved ends the leases of the keys whose owner in v is another member than their owner at
// grant. A lease this node granted as acting owner (the owner did not answer, or was
// leaving) stays live when the key is now its own: its holder builds the value here.
func (t *Table[V]) Moved(v *view.View) {
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
// Table.movedAway).
func (t *Table[V]) movedAwayLocked(key string) bool {
	until, ok := t.movedAway[key]
	if ok && !time.Now().Before(until) {
		delete(t.movedAway, key)
		return false
	}
	return ok
}

// Close ends every lease: the group closes. Acquire answers view.ErrClosed after it.
func (t *Table[V]) Close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed = true
	for key, l := range t.byKey {
		t.endLocked(key, l, leaseClosed)
	}
}

// Stats returns the table's counters: tokens granted (fill and refresh), leases that lapsed
// without a FillSet, and FillSets whose token was not live.
func (t *Table[V]) Stats() (granted, lapsed, rejected uint64) {
	return t.granted.Load(), t.lapsed.Load(), t.rejected.Load()
}
