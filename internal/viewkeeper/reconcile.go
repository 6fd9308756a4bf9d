package viewkeeper

import (
	"context"
	"time"

	"github.com/corralcache/corral/fill"
	"github.com/corralcache/corral/internal/view"
	"github.com/corralcache/corral/peer"
)

// A member declared dead by failure detection may not be dead: a partition, a one-way cut or
// a long pause looks the same from outside. While two sides were apart, each told its writes
// only to the members it saw, so when they meet again each may hold copies older than a write
// the other made. So a member that comes back after this node declared it dead is kept out
// of this node's ring — its keys are routed around it, as while it was gone — until the two
// have exchanged the writes they remember (Reconcile, one call per group, both ways) and each
// dropped its copies older than the other's writes. A member restarted under its old name
// goes through the same exchange: it starts empty, and learns which copies to refuse.

// reconcileWindow is how long after declaring a member dead this node reconciles with it when
// it comes back: as long as writes are remembered (fill.DefaultTombstoneTTL), beyond which
// there is nothing left to exchange.
const reconcileWindow = fill.DefaultTombstoneTTL

// memberFailed notes that a member was declared dead. Called from membership's goroutine,
// before the view change that drops it.
func (k *Keeper) memberFailed(name string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.failedAt == nil {
		k.failedAt = make(map[string]time.Time)
	}
	k.failedAt[name] = time.Now()
}

// reconcileNewcomersLocked starts an exchange with every member of ms that this node declared
// dead within reconcileWindow and that has none running, and returns the members to keep out
// of the ring meanwhile. k.mu must be held.
func (k *Keeper) reconcileNewcomersLocked(ms []peer.Member, now time.Time) map[string]string {
	live := make(map[string]bool, len(ms))
	for _, m := range ms {
		live[m.Name] = true
		at, failed := k.failedAt[m.Name]
		switch {
		case !failed || m.Name == k.cfg.Self:
		case now.Sub(at) > reconcileWindow:
			delete(k.failedAt, m.Name)
		case !k.pending[m.Name]:
			if k.pending == nil {
				k.pending = make(map[string]bool)
			}
			k.pending[m.Name] = true
			addr := m.Meta.PeerAddr
			name := m.Name
			k.wg.Go(func() { k.reconcile(name, addr) })
		}
	}
	for name := range k.pending {
		if !live[name] {
			delete(k.pending, name) // it left again; its exchange gives up
		}
	}
	out := make(map[string]string, len(k.pending))
	for name := range k.pending {
		out[name] = view.ExcludedReconciling
	}
	return out
}

// reconcile exchanges the remembered writes of every group with the member at addr until it
// succeeds, the member leaves the view, or the node closes; then lets the member into the
// ring.
func (k *Keeper) reconcile(name, addr string) {
	wait := 50 * time.Millisecond
	for {
		err := k.exchangeWrites(k.ctx, addr)
		if err == nil {
			break
		}
		k.cfg.Log.Info("corral: reconciling with a member that came back", "member", name, "err", err)
		if !k.pause(wait) {
			return
		}
		wait = min(2*wait, 2*time.Second)
		k.mu.Lock()
		gone := !k.pending[name]
		k.mu.Unlock()
		if gone {
			return
		}
	}
	k.cfg.Log.Info("corral: reconciled with a member that came back", "member", name)
	k.reconciled(name)
}

// reconciled lets name into the ring: the two have each other's writes.
func (k *Keeper) reconciled(name string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.pending[name] {
		return
	}
	delete(k.pending, name)
	delete(k.failedAt, name)
	k.rebuildLocked()
}

// exchangeWrites sends every group's remembered writes to the member at addr and applies
// the ones it answers with.
func (k *Keeper) exchangeWrites(ctx context.Context, addr string) error {
	return k.cfg.Writer.Exchange(ctx, addr, k.cfg.Groups())
}

// Reconciled notes that sender exchanged one group's writes with this node (the owner's side
// served its Reconcile); once it has exchanged every group this node has, it is let into the
// ring.
func (k *Keeper) Reconciled(sender, group string) {
	k.mu.Lock()
	pending := k.pending[sender]
	k.mu.Unlock()
	if !pending {
		return
	}
	k.recMu.Lock()
	if k.recGroups == nil {
		k.recGroups = make(map[string]map[string]bool)
	}
	if k.recGroups[sender] == nil {
		k.recGroups[sender] = make(map[string]bool)
	}
	k.recGroups[sender][group] = true
	done := true
	for _, g := range k.cfg.Groups() {
		if !k.recGroups[sender][g.Name()] {
			done = false
		}
	}
	if done {
		delete(k.recGroups, sender)
	}
	k.recMu.Unlock()
	if done {
		k.reconciled(sender)
	}
}
