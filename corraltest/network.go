package corraltest

import (
	"context"
	"net"

	"github.com/hashicorp/memberlist"

	"github.com/corralcache/corral/fill"
	"github.com/corralcache/corral/internal/network"
	"github.com/corralcache/corral/memnet"
)

// hostNetwork runs a node on an in-memory host: it binds no port of the operating system's,
// advertises the host's address, reaches its peers and gossips through the host's network,
// and reads time without a ticker (a ticker per node would wake every simulated node every
// millisecond).
type hostNetwork struct{ h *memnet.Host }

var _ network.Network = hostNetwork{}

func (n hostNetwork) AdvertiseIP() string { return n.h.IP() }

func (n hostNetwork) ListenPeers(_ string, port int) (net.Listener, error) {
	l, err := n.h.Listen(port)
	if err != nil {
		return nil, err // not a nil *memnet.Listener in a non-nil net.Listener
	}
	return l, nil
}

func (n hostNetwork) Dial() func(ctx context.Context, addr string) (net.Conn, error) {
	return n.h.DialContext
}

func (n hostNetwork) Gossip(_ string, port int) (memberlist.NodeAwareTransport, int, error) {
	tr, err := n.h.NewTransport(port)
	if err != nil {
		return nil, 0, err
	}
	return tr, tr.Port(), nil
}

func (hostNetwork) Clock() (fill.Clock, func()) { return fill.NewSystemClock(), func() {} }
