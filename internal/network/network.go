// Package network is the seam between a node and the network it runs on: the operating
// system's (OS), or an in-memory one on which a whole cluster runs in one process, in
// virtual time (package corraltest adapts package memnet's hosts to it). A node is started
// with one and never asks which it has.
package network

import (
	"context"
	"net"
	"strconv"

	"github.com/hashicorp/memberlist"

	"github.com/corralcache/corral/fill"
)

// Network is what a node binds, dials and reads time through. Its methods are called while
// the node starts, but Dial, which its peer client calls for every connection.
type Network interface {
	// AdvertiseIP returns the IP the node advertises, or "" for the one its Config gives
	// (AdvertiseAddr, BindAddr, or an interface's).
	AdvertiseIP() string
	// ListenPeers binds the peer port (0: a free one) on bindAddr.
	ListenPeers(bindAddr string, port int) (net.Listener, error)
	// Dial connects to a peer's port; nil means TCP.
	Dial() func(ctx context.Context, addr string) (net.Conn, error)
	// Gossip returns the transport gossip runs on, bound to port (0: a free one), and the
	// port it bound; a nil transport means memberlist's own UDP and TCP sockets on
	// bindAddr:port.
	Gossip(bindAddr string, port int) (memberlist.NodeAwareTransport, int, error)
	// Clock returns the time source of the node's stores, and what stops it.
	Clock() (fill.Clock, func())
}

// OS is the operating system's network.
var OS Network = osNetwork{}

type osNetwork struct{}

func (osNetwork) AdvertiseIP() string { return "" }

func (osNetwork) ListenPeers(bindAddr string, port int) (net.Listener, error) {
	return net.Listen("tcp", net.JoinHostPort(bindAddr, strconv.Itoa(port)))
}

func (osNetwork) Dial() func(ctx context.Context, addr string) (net.Conn, error) { return nil }

func (osNetwork) Gossip(string, int) (memberlist.NodeAwareTransport, int, error) {
	return nil, 0, nil
}

// Clock is a coarse clock: reading it on every hit costs a variable's read, not time.Now's.
func (osNetwork) Clock() (fill.Clock, func()) {
	cc := fill.NewCoarseClock(fill.CoarseClockResolution)
	return cc, cc.Stop
}
