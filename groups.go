package corral

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/corralcache/corral/fill"
	"github.com/corralcache/corral/internal/group"
	"github.com/corralcache/corral/internal/handoff"
	"github.com/corralcache/corral/internal/limit"
	"github.com/corralcache/corral/internal/owner"
	"github.com/corralcache/corral/internal/view"
	"github.com/corralcache/corral/internal/write"
	"github.com/corralcache/corral/transport"
)

// groups are the groups registered on a node, by name: what its owner's side serves
// (owner.Groups), and what the node hands off, reconciles, counts and closes.
type groups struct {
	self    string
	auto    func(name string) error // Config.AutoGroup, bound to the node; nil = none
	leaving *atomic.Bool            // the node began to close: no more groups
	limits  *limit.Checker
	log     *slog.Logger

	clock fill.Clock // the early writes' clock

	mu sync.RWMutex
	// guards byName and early
	byName map[string]handle
	early  map[string]*fill.Tombstones // writes of groups not registered yet (Remember)
}

// maxEarlyGroups bounds the groups whose writes are remembered before they are registered.
const maxEarlyGroups = 64

// handle is a group whatever its value type (a *group.Group[V]): what the node needs of it.
type handle interface {
	owner.Group
	handoff.Group
	// ViewChanged follows a membership change to v (its leases, its backups).
	ViewChanged(v *view.View)
	Stats() group.Stats
	Close(ctx context.Context) error
}

var (
	_ owner.Groups = (*groups)(nil)
	_ handle       = (*group.Group[string])(nil)
)

func (gs *groups) init(self string, auto func(name string) error, leaving *atomic.Bool, limits *limit.Checker, clock fill.Clock, log *slog.Logger) {
	gs.self, gs.auto, gs.leaving, gs.limits, gs.clock, gs.log = self, auto, leaving, limits, clock, log
	gs.byName = make(map[string]handle)
}

// Remember keeps a write of a group not registered yet, for register.
func (gs *groups) Remember(name, key string, version uint64) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	if g, ok := gs.byName[name]; ok { // registered meanwhile
		g.Invalidate(key, version)
		return
	}
	t := gs.early[name]
	if t == nil {
		if len(gs.early) >= maxEarlyGroups {
			gs.log.Warn("corral: a write of a group not registered here is forgotten: too many such groups",
				"group", name, "at_most", maxEarlyGroups)
			return
		}
		if gs.early == nil {
			gs.early = make(map[string]*fill.Tombstones)
		}
		t = fill.NewTombstones(fill.TombstoneConfig{Clock: gs.clock})
		gs.early[name] = t
	}
	t.Record(key, version)
}

// register adds g under name. It fails once the node is leaving, or when name is taken.
func (gs *groups) register(name string, g handle) error {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	if gs.leaving.Load() {
		return ErrClosed
	}
	if _, dup := gs.byName[name]; dup {
		return fmt.Errorf("corral: group %q is already registered on this node", name)
	}
	// The writes this node was told of before the group was registered: none of its
	// stores takes a copy older than them.
	if t := gs.early[name]; t != nil {
		for key, version := range t.All() {
			g.Invalidate(key, version)
		}
		delete(gs.early, name)
	}
	gs.byName[name] = g
	return nil
}

// Lookup returns the group registered as name.
func (gs *groups) Lookup(name string) (owner.Group, bool) {
	g, ok := gs.get(name)
	return g, ok
}

func (gs *groups) get(name string) (handle, bool) {
	gs.mu.RLock()
	defer gs.mu.RUnlock()
	g, ok := gs.byName[name]
	return g, ok
}

// Serve returns the group a peer's request names, registering it first with Config.AutoGroup
// when there is one and the name is valid.
func (gs *groups) Serve(name string) (owner.Group, error) {
	if g, ok := gs.get(name); ok {
		return g, nil
	}
	if fill.CheckName(name) != nil {
		gs.limits.Count(limit.GroupName)
	} else if gs.auto != nil && !gs.leaving.Load() {
		if err := gs.auto(name); err != nil {
			gs.log.Warn("corral: AutoGroup failed", "group", name, "err", err)
		}
		if g, ok := gs.get(name); ok {
			return g, nil
		}
	}
	return nil, fmt.Errorf("%w: %q on %s", transport.ErrUnknownGroup, name, gs.self)
}

// list returns the groups, in no order.
func (gs *groups) list() []handle {
	gs.mu.RLock()
	defer gs.mu.RUnlock()
	out := make([]handle, 0, len(gs.byName))
	for _, g := range gs.byName {
		out = append(out, g)
	}
	return out
}

// forWrites returns the groups as the writer exchanges their writes with a member back.
func (gs *groups) forWrites() []write.Group {
	var out []write.Group
	for _, g := range gs.list() {
		out = append(out, g)
	}
	return out
}

// forHandoff returns the groups as a hand-off reads their entries.
func (gs *groups) forHandoff() []handoff.Group {
	var out []handoff.Group
	for _, g := range gs.list() {
		out = append(out, g)
	}
	return out
}

// viewChanged tells every group of the membership change to v.
func (gs *groups) viewChanged(v *view.View) {
	for _, g := range gs.list() {
		g.ViewChanged(v)
	}
}

// stats returns the counters of every group, by name.
func (gs *groups) stats() map[string]GroupStats {
	gs.mu.RLock()
	defer gs.mu.RUnlock()
	out := make(map[string]GroupStats, len(gs.byName))
	for name, g := range gs.byName {
		out[name] = statsOf(g.Stats())
	}
	return out
}

// close closes every group, and returns what failed.
func (gs *groups) close(ctx context.Context) []error {
	var errs []error
	for _, g := range gs.list() {
		if err := g.Close(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}
