package objects

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/corralcache/corral"
)

// ErrTooManyGroups is wrapped by the error of Groups.Group for a new group past MaxGroups.
var ErrTooManyGroups = errors.New("too many groups")

// GroupsConfig is how Groups makes each group.
type GroupsConfig struct {
	// Load returns the loader of the named group (the origin's). Nil: a key nobody wrote is
	// not found.
	Load func(group string) corral.LoadFunc[Object]
	// Options are every group's options (--ttl, --jitter, …); Groups adds Codec.
	Options []corral.GroupOption
	// MaxGroups bounds the groups that count (--max-groups): those in Configured and those
	// that hold a value on this node. Must be positive.
	MaxGroups int
	// Configured are the groups served from the start (--group): they always count.
	Configured []string
}

// Groups are the groups of objects on a node, each registered on first use. At most
// MaxGroups of them count: those configured, and those that hold a value on this node; a
// group that holds nothing (a read of a new name made it) does not keep another out. corral
// cannot drop a group once registered, and each costs about 100 KiB and three goroutines, so
// at most as many again that hold nothing may exist. It is safe for concurrent use.
type Groups struct {
	cfg        GroupsConfig
	opts       []corral.GroupOption // cfg.Options and Codec; written by NewGroups only
	configured map[string]bool      // written by NewGroups only

	mu     sync.Mutex // guards groups
	groups map[string]*corral.Group[Object]
}

// NewGroups returns an empty set of groups; Group registers them.
func NewGroups(cfg GroupsConfig) (*Groups, error) {
	if cfg.MaxGroups <= 0 {
		return nil, fmt.Errorf("objects: MaxGroups %d: want at least 1", cfg.MaxGroups)
	}
	gs := &Groups{cfg: cfg, configured: map[string]bool{}, groups: map[string]*corral.Group[Object]{},
		opts: append(slices.Clip(cfg.Options), corral.WithCodec[Object](Codec{}))}
	for _, name := range cfg.Configured {
		gs.configured[name] = true
	}
	return gs, nil
}

// Group returns the named group of n, registering it on first use. Past the bound the error
// wraps ErrTooManyGroups; a name corral refuses is corral's error. It takes the node, not
// one given to NewGroups, because a node asks for groups (Config.AutoGroup) before New
// returns it.
func (gs *Groups) Group(n *corral.Node, name string) (*corral.Group[Object], error) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	if g, ok := gs.groups[name]; ok {
		return g, nil
	}
	if max := gs.cfg.MaxGroups; len(gs.groups) >= max {
		counted := 0
		for gname, g := range gs.groups {
			if gs.configured[gname] || g.Stats().Entries > 0 {
				counted++
			}
		}
		if counted >= max || len(gs.groups) >= 2*max {
			return nil, fmt.Errorf("%w: this node serves at most %d that hold values (--max-groups), and as many again that hold nothing", ErrTooManyGroups, max)
		}
	}
	load := func(context.Context, string) (Object, error) { return Object{}, corral.ErrNotFound }
	if gs.cfg.Load != nil {
		load = gs.cfg.Load(name)
	}
	g, err := corral.NewGroup(n, name, load, gs.opts...)
	if err != nil {
		return nil, err
	}
	gs.groups[name] = g
	return g, nil
}

// Existing returns the named group if it is registered.
func (gs *Groups) Existing(name string) (*corral.Group[Object], bool) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	g, ok := gs.groups[name]
	return g, ok
}

// All returns the registered groups by name: a copy, the caller's.
func (gs *Groups) All() map[string]*corral.Group[Object] {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	all := make(map[string]*corral.Group[Object], len(gs.groups))
	for name, g := range gs.groups {
		all[name] = g
	}
	return all
}
