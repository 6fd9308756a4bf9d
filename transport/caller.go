package transport

import (
	"context"
	"net"

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
