package corral

import (
	"context"

	"github.com/corralcache/corral/internal/crash"
	"github.com/corralcache/corral/internal/memhost"
	"github.com/corralcache/corral/internal/node"
	"github.com/corralcache/corral/memnet"
)

// Node is one member of a corral cluster: gossip membership, the peer gRPC server and client,
// and the groups registered on it. Create it with New and stop it with Close.
type Node struct {
	n node.Node
}

// New starts a node: it binds the peer gRPC port and the gossip port, and joins the seeds in
// cfg.Join (a node with no seeds is a one-node cluster that others may join). Joining is
// retried in the background when no seed answers at first.
func New(cfg Config) (*Node, error) { return newNode(cfg, nil) }

// newNode starts the node cfg describes, on the in-memory host h when it is not nil.
func newNode(cfg Config, h *memnet.Host) (*Node, error) {
	n := new(Node)
	c := cfg.internal(n)
	c.Host = h
	if err := n.n.Start(c); err != nil {
		return nil, publicErr(err)
	}
	return n, nil
}

// The module's own tools reach past the public API here: to stop a node as a crash would (no
// leave, no hand-off), and to start one on an in-memory host.
func init() {
	crash.Node = func(n any) { n.(*Node).n.Kill() }
	memhost.New = func(cfg any, h *memnet.Host) (any, error) {
		n, err := newNode(cfg.(Config), h)
		if err != nil {
			return nil, err
		}
		return n, nil
	}
}

// Name returns this member's name.
func (n *Node) Name() string { return n.n.Name() }

// GossipAddr returns the "ip:port" gossip actually bound and advertises, usable as another
// node's Join seed.
func (n *Node) GossipAddr() string { return n.n.GossipAddr() }

// PeerAddr returns the "ip:port" of the peer gRPC server.
func (n *Node) PeerAddr() string { return n.n.PeerAddr() }

// Members returns the current view, self included, sorted by Name.
func (n *Node) Members() []Member {
	ms := n.n.Members()
	out := make([]Member, len(ms))
	for i, m := range ms {
		out[i] = Member(m)
	}
	return out
}

// Owner returns the member this node's ring routes key to.
func (n *Node) Owner(key string) Member { return Member(n.n.Owner(key)) }

// Epoch identifies the member set of this node's view: equal views have equal epochs.
func (n *Node) Epoch() uint64 { return n.n.Epoch() }

// Shares returns the fraction of the ring each member owns in this node's view.
func (n *Node) Shares() map[string]float64 { return n.n.Shares() }

// Ready reports whether the node serves: not closing. (Joined-ness is the caller's policy:
// compare len(Members()) with what it expects.)
func (n *Node) Ready() bool { return n.n.Ready() }

// Stats returns the counters of every group on this node, by group name.
func (n *Node) Stats() map[string]GroupStats {
	stats := n.n.Stats()
	out := make(map[string]GroupStats, len(stats))
	for name, s := range stats {
		out[name] = GroupStats(s)
	}
	return out
}

// Close leaves the cluster gracefully: it stops being ready and takes no more writes, tells
// the cluster it is leaving, pushes every entry it holds that may still be served (fresh,
// stale within its grace, a remembered not-found) to the key's new owner (the owner once it
// is gone) while it still serves, stops serving from its stores (its own Gets ask the other
// members from then on), leaves the gossip cluster (peers record Left, not Dead, and route
// to the new owners), answers the new owners' warm pulls for Config.DrainTimeout, and stops;
// after that every call returns ErrClosed. ctx bounds the whole; when it ends, Close stops
// at once. Close is safe to call more than once; later calls return the first call's result.
func (n *Node) Close(ctx context.Context) error { return n.n.Close(ctx) }
