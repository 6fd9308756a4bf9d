package transport

import (
	"context"
	"net"
	"net/netip"
	"testing"

	"google.golang.org/grpc/peer"
)

type namedAddr string

func (a namedAddr) Network() string { return "mem" }
func (a namedAddr) String() string  { return string(a) }

func TestCallerAddr(t *testing.T) {
	for _, tc := range []struct {
		name string
		addr net.Addr // nil: no peer in the context
		want string   // "" = the zero Addr
		ip   string   // CallerIP's answer
	}{
		{"IPv4", &net.TCPAddr{IP: net.IPv4(10, 0, 0, 7), Port: 7946}, "10.0.0.7", "10.0.0.7"},
		{"IPv4 in 4 bytes", &net.TCPAddr{IP: net.IP{10, 0, 0, 7}, Port: 1}, "10.0.0.7", "10.0.0.7"},
		{"IPv6 with a zone", &net.TCPAddr{IP: net.ParseIP("fe80::1"), Port: 1, Zone: "eth0"}, "fe80::1", "fe80::1"},
		{"another net.Addr", namedAddr("10.1.2.3:7946"), "10.1.2.3", "10.1.2.3"},
		{"IPv4-mapped, another net.Addr", namedAddr("[::ffff:10.1.2.3]:7946"), "10.1.2.3", "::ffff:10.1.2.3"},
		{"a name", namedAddr("corral-0:7946"), "", "corral-0"},
		{"no port", namedAddr("10.1.2.3"), "", ""},
		{"no peer", nil, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			if tc.addr != nil {
				ctx = peer.NewContext(ctx, &peer.Peer{Addr: tc.addr})
			}
			got := CallerAddr(ctx)
			var want netip.Addr
			if tc.want != "" {
				want = netip.MustParseAddr(tc.want)
			}
			if got != want {
				t.Errorf("CallerAddr = %v, want %v", got, want)
			}
			if ip := CallerIP(ctx); ip != tc.ip {
				t.Errorf("CallerIP = %q, want %q", ip, tc.ip)
			}
		})
	}
}

// Every hit a peer asks for checks the caller's address: it must cost no allocation.
func TestCallerAddrAllocatesNothing(t *testing.T) {
	ctx := peer.NewContext(context.Background(), &peer.Peer{Addr: &net.TCPAddr{IP: net.IPv4(10, 0, 0, 7), Port: 7946}})
	if n := testing.AllocsPerRun(100, func() { CallerAddr(ctx) }); n != 0 {
		t.Fatalf("CallerAddr allocates %v times per call, want 0", n)
	}
}
