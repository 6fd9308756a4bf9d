package node

import (
	"context"
	"time"

	"github.com/corralcache/corral/fill"
	"github.com/corralcache/corral/internal/view"
	"github.com/corralcache/corral/internal/write"
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
func (n *Node) memberFailed(name string) {
	n.viewMu.Lock()
	defer n.viewMu.Unlock()
	if n.failedAt == nil {
		n.failedAt = make(map[string]time.Time)
	}
	n.failedAt[name] = time.Now()
}

// reconcileNewcomersLocked starts an exchange with every member of ms that this node declared
// dead within reconcileWindow and that has none running, and returns the members to keep out
// of the ring meanwhile. n.viewMu must be held.
func (n *Node) reconcileNewcomersLocked(ms []peer.Member, now time.Time) map[string]string {
	live := make(map[string]bool, len(ms))
	for _, m := range ms {
		live[m.Name] = true
		at, failed := n.failedAt[m.Name]
		switch {
		case !failed || m.Name == n.cfg.Name:
		case now.Sub(at) > reconcileWindow:
			delete(n.failedAt, m.Name)
		case !n.pending[m.Name]:
			if n.pending == nil {
				n.pending = make(map[string]bool)
			}
			n.pending[m.Name] = true
			addr := m.Meta.PeerAddr
			name := m.Name
			n.recWG.Go(func() { n.reconcile(name, addr) })
		}
	}
	for name := range n.pending {
		if !live[name] {
			delete(n.pending, name) // it left again; its exchange gives up
		}
	}
	out := make(map[string]string, len(n.pending))
	for name := range n.pending {
		out[name] = view.ExcludedReconciling
	}
	return out
}

// reconcile exchanges the remembered writes of every group with the member at addr until it
// succeeds, the member leaves the view, or the node closes; then lets the member into the
// ring.
func (n *Node) reconcile(name, addr string) {
	wait := 50 * time.Millisecond
	for {
		err := n.exchangeWrites(n.recCtx, addr)
		if err == nil {
			break
		}
		n.log.Info("corral: reconciling with a member that came back", "member", name, "err", err)
		if !n.pause(wait) {
			return
		}
		wait = min(2*wait, 2*time.Second)
		n.viewMu.Lock()
		gone := !n.pending[name]
		n.viewMu.Unlock()
		if gone {
			return
		}
	}
	n.log.Info("corral: reconciled with a member that came back", "member", name)
	n.reconciled(name)
}

// reconciled lets name into the ring: the two have each other's writes.
func (n *Node) reconciled(name string) {
	n.viewMu.Lock()
	defer n.viewMu.Unlock()
	if !n.pending[name] {
		return
	}
	delete(n.pending, name)
	delete(n.failedAt, name)
	n.rebuildLocked()
}

// exchangeWrites sends every group's remembered writes to the member at addr and applies
// the ones it answers with.
func (n *Node) exchangeWrites(ctx context.Context, addr string) error {
	var groups []write.Group
	for _, g := range n.groupList() {
		groups = append(groups, g)
	}
	return n.writer.Exchange(ctx, addr, groups)
}

// reconciledGroup notes that sender exchanged one group's writes with this node; once it has
// exchanged every group this node has, it is let into the ring.
func (n *Node) reconciledGroup(sender, group string) {
	n.viewMu.Lock()
	pending := n.pending[sender]
	n.viewMu.Unlock()
	if !pending {
		return
	}
	n.recMu.Lock()
	if n.recGroups == nil {
		n.recGroups = make(map[string]map[string]bool)
	}
	if n.recGroups[sender] == nil {
		n.recGroups[sender] = make(map[string]bool)
	}
	n.recGroups[sender][group] = true
	done := true
	for _, g := range n.groupList() {
		if !n.recGroups[sender][g.Name()] {
			done = false
		}
	}
	if done {
		delete(n.recGroups, sender)
	}
	n.recMu.Unlock()
	if done {
		n.reconciled(sender)
	}
}

// pause waits d before a check of a member is tried again, and reports false when the node
// closes meanwhile.
func (n *Node) pause(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-n.recCtx.Done():
		return false
	case <-t.C:
		return true
	}
}
