package peer_test

import (
	"fmt"
	"log/slog"
	"net"
	"strings"
	"testing"

	"github.com/corralcache/corral/peer"
)

// A member whose dns+ seed names its own address at another port than its own fails New,
// saying so; on loopback, where processes share an address, and with the right port, it starts.
func TestSeedNamingThisMemberAtAnotherPort(t *testing.T) {
	ip := privateIP(t)
	port := freePort(t, ip)
	res := &peer.StaticResolver{}
	res.Set("shop-corral-headless.default.svc.cluster.local", ip)
	res.Set("localhost.test", "127.0.0.1")
	// Port 1 is where the mistaken seeds point: nothing listens there, so no join goes anywhere.
	tests := []struct {
		name    string
		bind    string
		seed    string
		wantErr string // "" = New succeeds
	}{
		{"dns+ at another port", ip, "dns+shop-corral-headless.default.svc.cluster.local:1",
			fmt.Sprintf("names this member's own address at port 1 (%s:1), but it is reached at port %d", ip, port)},
		{"dns+ at its own port", ip, fmt.Sprintf("dns+shop-corral-headless.default.svc.cluster.local:%d", port), ""},
		{"a host:port seed of the same name", ip, "shop-corral-headless.default.svc.cluster.local:1", ""},
		{"loopback", "127.0.0.1", "dns+localhost.test:1", ""},
		{"k8s:// at another port", ip, "k8s://default/shop-corral-headless",
			fmt.Sprintf("names this member's own address at port 1 (%s:1), but it is reached at port %d", ip, port)},
	}
	// The EndpointSlices of the Service, as package peer/k8s would report them.
	peer.RegisterScheme("k8s", func(string) (peer.Discoverer, error) { return staticDiscoverer{ip + ":1"}, nil })
	t.Cleanup(func() { peer.RegisterScheme("k8s", nil) })
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := fastConfig(t, "a")
			cfg.BindAddr, cfg.BindPort, cfg.Resolver = tt.bind, port, res
			cfg.Seeds = []string{tt.seed}
			if tt.bind == "127.0.0.1" {
				cfg.BindPort = 0
			}
			m, err := peer.New(cfg)
			if err == nil {
				m.Close()
			}
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("New: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("New = %v; want an error containing %q", err, tt.wantErr)
			}
		})
	}
}

// privateIP returns an address of this machine's that is not loopback, or skips the test.
func privateIP(tb testing.TB) string {
	tb.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		tb.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() {
			return n.IP.String()
		}
	}
	tb.Skip("no IPv4 address but loopback on this machine")
	return ""
}

// A record of this member at another port that appears only after New (DNS caught up later) is
// logged once by the join loop, which goes on joining the other addresses.
func TestSeedNamingThisMemberLaterIsLogged(t *testing.T) {
	ip := privateIP(t)
	port := freePort(t, ip)
	res := &peer.StaticResolver{}
	logs := testLog(t, "a")
	cfg := fastConfig(t, "a")
	cfg.BindAddr, cfg.BindPort, cfg.Resolver, cfg.Logger = ip, port, res, slog.New(logs)
	cfg.Seeds = []string{"dns+late.test:1"}
	start(t, cfg) // late.test does not resolve yet: nothing to check
	res.Set("late.test", ip)
	const want = "a seed names this member at a port where it does not listen"
	waitFor(t, "the join loop to log the seed, then try twice more", func() bool {
		l := logs.String()
		i := strings.Index(l, want)
		return i >= 0 && strings.Count(l[i:], "join attempt failed") >= 2
	})
	if n := strings.Count(logs.String(), want); n != 1 {
		t.Fatalf("logged %d times, want once", n)
	}
}
