package transport

import (
	"context"
	"net"
	"net/netip"

	"google.golang.org/grpc/peer"
)

// CallerIP returns the IP address a Handler method's request came from (the remote end of
// its connection), or "" when ctx is not a request's. A Handler uses it to refuse requests
// from addresses that are not its cluster's members.
func CallerIP(ctx context.Context) string {
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return ""
	}
	switch a := p.Addr.(type) {
	case *net.TCPAddr:
		return a.IP.String()
	}
	host, _, err := net.SplitHostPort(p.Addr.String())
	if err != nil {
		return ""
	}
	return host
}

// CallerAddr is CallerIP as a netip.Addr, without allocating: IPv4 in its 4-byte form (an
// IPv4-mapped IPv6 address is unmapped) and no zone. It is the zero Addr when ctx is not a
// request's or its remote end is not an IP address.
func CallerAddr(ctx context.Context) netip.Addr {
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return netip.Addr{}
	}
	if a, ok := p.Addr.(*net.TCPAddr); ok {
		return a.AddrPort().Addr().Unmap().WithZone("")
	}
	return HostAddr(p.Addr.String())
}

// HostAddr is the IP address of host:port hostport in CallerAddr's form, or the zero Addr
// when its host is a name or hostport is malformed: what a member's advertised address is
// compared with.
func HostAddr(hostport string) netip.Addr {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return netip.Addr{}
	}
	addr, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}
	}
	return addr.Unmap().WithZone("")
}
