package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/corralcache/corral/fill"
	"github.com/corralcache/corral/internal/handoff"
	"github.com/corralcache/corral/internal/lease"
	"github.com/corralcache/corral/internal/limit"
	"github.com/corralcache/corral/internal/owner"
	"github.com/corralcache/corral/internal/route"
	"github.com/corralcache/corral/internal/version"
	"github.com/corralcache/corral/internal/view"
	"github.com/corralcache/corral/internal/write"
	"github.com/corralcache/corral/transport"
)

// Group is what the node needs of a group, whatever its value type: serving peers as their
// acting owner (and exchanging writes), handing off, ending moved leases, counting and
// closing. Package group implements it.
type Group interface {
	owner.Group
	handoff.Group
	// LeasesMoved ends the leases of keys whose owner changed in v.
	LeasesMoved(v *view.View)
	Stats() GroupStats
	Close(ctx context.Context) error
}

// ErrClosed is the error of a call on a node, or its groups, after Close began (package
// corral answers corral.ErrClosed for it).
var ErrClosed = errors.New("corral: node closed")

// Register adds g to the groups this node serves, under name.
func (n *Node) Register(name string, g Group) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.leaving.Load() {
		return ErrClosed
	}
	if _, dup := n.groups[name]; dup {
		return fmt.Errorf("corral: group %q is already registered on this node", name)
	}
	n.groups[name] = g
	return nil
}

// CheckKey returns a *limit.Error for a bad key, and counts it in corral_limit_hits_total.
func (n *Node) CheckKey(key string) error {
	err := limit.CheckKey(key)
	if err != nil {
		n.metrics.limits.hit(limit.Key)
	}
	return err
}

// CheckValue returns a *limit.Error for a value over Config.MaxValueBytes, and counts it.
func (n *Node) CheckValue(size int) error {
	err := limit.CheckValue(size, n.cfg.MaxValueBytes)
	if err != nil {
		n.metrics.limits.hit(limit.Value)
	}
	return err
}

// The node's parts that its groups use. Each is set by Start and never changes.

// View returns this node's current view: one atomic load.
func (n *Node) View() *view.View { return n.view.Load() }

// Config returns the configuration the node runs with, defaults filled in.
func (n *Node) Config() *Config { return &n.cfg }

func (n *Node) Log() *slog.Logger          { return n.log }
func (n *Node) Router() *route.Router      { return n.router }
func (n *Node) Writer() *write.Writer      { return n.writer }
func (n *Node) Mover() *handoff.Mover      { return n.mover }
func (n *Node) Client() *transport.Client  { return n.client }
func (n *Node) Versions() *version.Clock   { return n.versions }
func (n *Node) WaitGraph() *fill.WaitGraph { return n.waits }
func (n *Node) Refreshes() *fill.Limiter   { return n.refreshes }
func (n *Node) Fills() *fill.Limiter       { return n.fills }
func (n *Node) Clock() fill.Clock          { return n.clock }
func (n *Node) Tags() *fill.Tags           { return n.tags }
func (n *Node) Leaving() bool              { return n.leaving.Load() }
func (n *Node) Closed() bool               { return n.closed.Load() }

// EnterWrite reports whether a write may be applied on this node as the key's owner: not
// once it has stopped serving. If so, the caller applies it and then calls ExitWrite.
func (n *Node) EnterWrite() bool { return n.writes.Enter() }

// ExitWrite ends a write that EnterWrite let in.
func (n *Node) ExitWrite() { n.writes.Exit() }

// RandFloat returns fill.Config.Rand for this node's groups: Config.Rand's, or nil for the
// fill package's default.
func (n *Node) RandFloat() func() float64 {
	if n.rand == nil {
		return nil
	}
	return n.rand.Float64
}

// OwnerAddr returns the peer address of key's owner, or "" when this node owns it: where the
// fill of a key that the near cache waits on runs.
func (n *Node) OwnerAddr(key string) string {
	v := n.view.Load()
	if st, ok := v.Members[v.Owner(key)]; ok && st.Name != v.Self {
		return st.PeerAddr
	}
	return ""
}

// LeaseConfig returns the configuration of the lease table of the group called name.
func (n *Node) LeaseConfig(name string) lease.Config {
	return lease.Config{Group: name, View: &n.view, Clock: n.versions,
		PeekWindow: n.cfg.PeekWindow, PeekTimeout: n.cfg.PeekTimeout, AskedAt: n.owner.AskedAt}
}

// FillObserved records a run of a group's loader (corral_fill_duration_seconds).
func (n *Node) FillObserved(group string, d time.Duration) {
	n.metrics.fillDuration.WithLabelValues(group).Observe(d.Seconds())
}

// HandoffSent and HandoffReceived count entries handed over (corral_handoff_keys_total).
func (n *Node) HandoffSent(k int) { n.metrics.handoff.WithLabelValues("sent").Add(float64(k)) }
func (n *Node) HandoffReceived()  { n.metrics.handoff.WithLabelValues("received").Inc() }

// RemoveByTag purges tag on every member this node knows of (write.Writer.Purge). The tag is
// well formed (package corral checks it first).
func (n *Node) RemoveByTag(ctx context.Context, tag string) error {
	if n.leaving.Load() {
		return ErrClosed
	}
	return n.writer.Purge(ctx, tag)
}
