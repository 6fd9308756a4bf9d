package corraltest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/corralcache/corral"
	"github.com/corralcache/corral/internal/crash"
	"github.com/corralcache/corral/internal/memhost"
	"github.com/corralcache/corral/memnet"
)

// Config configures New. The zero value is a 3-node cluster with corral's production
// timings over a network that delivers at once.
type Config struct {
	// Nodes is how many nodes New starts. 0 = 3.
	Nodes int
	// Node returns the configuration of the node called name, before the cluster sets its
	// Name, Join and Rand and starts it on its host (so a test can change timings, limits,
	// the logger, metrics).
	// nil = corral's zero Config.
	Node func(name string) corral.Config
	// Setup runs on every node as soon as it is created — at New, Add and Restart — to
	// register the application's groups, as the application's main would. An error stops
	// the node.
	Setup func(n *corral.Node) error
	// Join returns the names of the members the node called name joins through, from the
	// others running when it starts (sorted); the rest learn of it by gossip a moment
	// later, as the members a real seed list leaves out do. nil = all of them.
	Join func(name string, others []string) []string
	// Link is every link's delay, jitter and loss (see memnet.Link).
	Link memnet.Link
	// Seed seeds the network's random choices and every node's Config.Rand, so that a test
	// replays. 0 = 1.
	Seed uint64
	// GossipPort and PeerPort are the ports every node binds on its host. 0 = 7946 and 7947.
	GossipPort, PeerPort int
}

// Cluster is a cluster of real corral nodes over an in-memory network.
type Cluster struct {
	// Network is the in-memory network the nodes run on, for faults beyond the Cluster's own
	// methods (one-way cuts, per-link delays).
	Network *memnet.Network

	cfg  Config
	rand *rand.Rand // seeds each node's Rand; used under mu

	mu sync.Mutex
	// guards everything below
	byName map[string]*member
	next   int // index of the next new node's name
}

// member is one node of the cluster and the host it runs on, across restarts.
type member struct {
	name    string
	host    *memnet.Host
	node    *corral.Node // nil while crashed or after it left
	crashed bool
}

// New starts cfg.Nodes nodes, n0 … n(k-1), each on a host of its own, the first alone and
// the others joining it, and returns once all of them have started (not necessarily once
// their views agree: see WaitConverged).
func New(cfg Config) (*Cluster, error) {
	if cfg.Nodes <= 0 {
		cfg.Nodes = 3
	}
	if cfg.Seed == 0 {
		cfg.Seed = 1
	}
	if cfg.GossipPort == 0 {
		cfg.GossipPort = 7946
	}
	if cfg.PeerPort == 0 {
		cfg.PeerPort = 7947
	}
	r := rand.New(rand.NewPCG(cfg.Seed, 0x636f7272616c)) // "corral"
	network, err := memnet.New(memnet.Config{Rand: rand.New(rand.NewPCG(r.Uint64(), r.Uint64())), Link: cfg.Link})
	if err != nil {
		return nil, err
	}
	c := &Cluster{Network: network, cfg: cfg, rand: r, byName: make(map[string]*member)}
	for range cfg.Nodes {
		if _, err := c.Add(); err != nil {
			c.Close(context.Background())
			return nil, err
		}
	}
	return c, nil
}

// Add starts a new node on a new host, joining the cluster through its live members, and
// returns it.
func (c *Cluster) Add() (*corral.Node, error) {
	c.mu.Lock()
	m := &member{name: fmt.Sprint("n", c.next), host: c.Network.NewHost()}
	c.next++
	c.byName[m.name] = m
	c.mu.Unlock()
	return c.start(m)
}

// start creates m's node on its host.
func (c *Cluster) start(m *member) (*corral.Node, error) {
	var cfg corral.Config
	if c.cfg.Node != nil {
		cfg = c.cfg.Node(m.name)
	}
	c.mu.Lock()
	cfg.Name = m.name
	host := m.host
	cfg.GossipPort, cfg.PeerPort = c.cfg.GossipPort, c.cfg.PeerPort
	cfg.Rand = rand.New(rand.NewPCG(c.rand.Uint64(), c.rand.Uint64()))
	cfg.Join = nil
	var others []string
	for _, name := range c.namesLocked() {
		if o := c.byName[name]; o != m && o.node != nil {
			others = append(others, name)
		}
	}
	if c.cfg.Join != nil {
		others = c.cfg.Join(m.name, slices.Clone(others))
	}
	for _, name := range others {
		if o := c.byName[name]; o != nil && o != m && o.node != nil {
			cfg.Join = append(cfg.Join, o.node.GossipAddr())
		}
	}
	c.mu.Unlock()
	started, err := memhost.New(cfg, hostNetwork{host})
	if err != nil {
		return nil, fmt.Errorf("corraltest: start %s: %w", m.name, err)
	}
	n := started.(*corral.Node)
	if c.cfg.Setup != nil {
		if err := c.cfg.Setup(n); err != nil {
			crash.Node(n)
			return nil, fmt.Errorf("corraltest: set up %s: %w", m.name, err)
		}
	}
	c.mu.Lock()
	m.node, m.crashed = n, false
	c.mu.Unlock()
	return n, nil
}

// namesLocked returns the names of every member that ever started, sorted.
func (c *Cluster) namesLocked() []string {
	var out []string
	for name := range c.byName {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// Node returns the live node called name, or nil.
func (c *Cluster) Node(name string) *corral.Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	if m := c.byName[name]; m != nil {
		return m.node
	}
	return nil
}

// Host returns the host of the node called name (live or not), or nil.
func (c *Cluster) Host(name string) *memnet.Host {
	c.mu.Lock()
	defer c.mu.Unlock()
	if m := c.byName[name]; m != nil {
		return m.host
	}
	return nil
}

// Nodes returns the live nodes, sorted by name.
func (c *Cluster) Nodes() []*corral.Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*corral.Node
	for _, name := range c.namesLocked() {
		if n := c.byName[name].node; n != nil {
			out = append(out, n)
		}
	}
	return out
}

var errNoNode = errors.New("corraltest: no live node of that name")

// Leave closes the node called name gracefully (it leaves and hands its keys off); ctx
// bounds the Close.
func (c *Cluster) Leave(ctx context.Context, name string) error {
	n := c.take(name, false)
	if n == nil {
		return errNoNode
	}
	return n.Close(ctx)
}

// Crash stops the node called name as a crash would: its host drops off the network at once
// (peers' connections to it reset), and the node stops without leaving or handing off; peers
// find out through failure detection. Restart brings it back.
func (c *Cluster) Crash(name string) error {
	c.mu.Lock()
	m := c.byName[name]
	c.mu.Unlock()
	if m == nil {
		return errNoNode
	}
	m.host.Crash()
	if n := c.take(name, true); n != nil {
		crash.Node(n)
	}
	return nil
}

// take detaches the live node called name from its member.
func (c *Cluster) take(name string, crashed bool) *corral.Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.byName[name]
	if m == nil || m.node == nil {
		return nil
	}
	n := m.node
	m.node, m.crashed = nil, crashed
	return n
}

// Restart starts the crashed node called name again: the same name on the same address,
// with an empty store, as a StatefulSet pod that comes back.
func (c *Cluster) Restart(name string) (*corral.Node, error) {
	c.mu.Lock()
	m := c.byName[name]
	c.mu.Unlock()
	if m == nil || m.node != nil {
		return nil, fmt.Errorf("corraltest: Restart of %s: not a stopped node", name)
	}
	if m.crashed {
		if err := m.host.Restart(); err != nil {
			return nil, err
		}
	}
	return c.start(m)
}

// Move starts the crashed node called name again on a new host: the same name at a new
// address, with an empty store, as a pod rescheduled onto another IP (a Deployment's, or a
// StatefulSet's whose pod IP changed). Its old host stays down.
func (c *Cluster) Move(name string) (*corral.Node, error) {
	c.mu.Lock()
	m := c.byName[name]
	if m == nil || m.node != nil || !m.crashed {
		c.mu.Unlock()
		return nil, fmt.Errorf("corraltest: Move of %s: not a crashed node", name)
	}
	c.mu.Unlock()
	h := c.Network.NewHost()
	c.mu.Lock()
	m.host = h
	c.mu.Unlock()
	return c.start(m)
}

// Pause freezes the host of the node called name (see memnet.Host.Pause); Resume thaws it.
func (c *Cluster) Pause(name string) {
	if h := c.Host(name); h != nil {
		h.Pause()
	}
}

// Resume undoes Pause.
func (c *Cluster) Resume(name string) {
	if h := c.Host(name); h != nil {
		h.Resume()
	}
}

// Partition cuts the network into sides, each a list of node names: nodes on different sides
// cannot reach each other until Heal. Nodes on no side keep their links.
func (c *Cluster) Partition(sides ...[]string) {
	var hosts [][]*memnet.Host
	for _, side := range sides {
		var hs []*memnet.Host
		for _, name := range side {
			if h := c.Host(name); h != nil {
				hs = append(hs, h)
			}
		}
		hosts = append(hosts, hs)
	}
	c.Network.Partition(hosts...)
}

// Heal removes every partition and cut.
func (c *Cluster) Heal() { c.Network.Heal() }

// Converged reports whether every live node's view holds exactly the live nodes and every
// node routes by the same ring (a member back from a partition is kept out of the ring until
// it has reconciled with the others).
func (c *Cluster) Converged() bool {
	nodes := c.Nodes()
	want := make([]string, 0, len(nodes))
	for _, n := range nodes {
		want = append(want, n.Name())
	}
	for _, n := range nodes {
		var got []string
		for _, m := range n.Members() {
			got = append(got, m.Name)
		}
		if !slices.Equal(got, want) || n.Epoch() != nodes[0].Epoch() {
			return false
		}
	}
	return true
}

// WaitConverged polls Converged every 100 ms until it holds or ctx ends.
func (c *Cluster) WaitConverged(ctx context.Context) error {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for !c.Converged() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("corraltest: views did not converge: %w", ctx.Err())
		case <-t.C:
		}
	}
	return nil
}

// Linger is how long Close lets time pass after the nodes stopped: memberlist's probe
// goroutine outlives Shutdown by up to a few probe timeouts. In a synctest bubble it costs
// no wall-clock time.
const Linger = 10 * time.Second

// Close stops every live node — crashed, not gracefully: a test that wants leaves calls
// Leave — and then lets Linger pass (or ctx end) so that their goroutines are gone when it
// returns. It is safe to call more than once.
func (c *Cluster) Close(ctx context.Context) error {
	c.mu.Lock()
	var nodes []*corral.Node
	for _, name := range c.namesLocked() {
		m := c.byName[name]
		if m.node != nil {
			nodes = append(nodes, m.node)
			m.node = nil
		}
	}
	c.mu.Unlock()
	for _, n := range nodes {
		crash.Node(n)
	}
	t := time.NewTimer(Linger)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
	return nil
}
