package corral

import (
	"strings"
	"testing"

	"github.com/corralcache/corral/internal/network"
)

func TestCheckSelfSeeds(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		wantErr string // "" = no error
	}{
		{"the README's old trap: a zero port and a dns+ seed",
			Config{Join: []string{"dns+shop-corral-headless.default.svc.cluster.local:7946"}},
			`seed "dns+shop-corral-headless.default.svc.cluster.local:7946" finds every member of its service at port 7946, this node included, but GossipPort 0 picks a random port`},
		{"a zero port and a k8s:// seed", Config{Join: []string{"", "k8s://shop-corral-headless"}},
			"at the gossip port of its EndpointSlices, this node included, but GossipPort 0 picks a random port"},
		{"a fixed port", Config{GossipPort: 7946, PeerPort: 7947, Join: []string{"dns+svc:7946"}}, ""},
		{"a zero port and host:port seeds", Config{Join: []string{"10.0.0.1:7946", "svc:7946"}}, ""},
		{"a zero port and no seed", Config{}, ""},
		{"loopback: nodes on one machine", Config{BindAddr: "127.0.0.1", Join: []string{"dns+localhost:7946"}}, ""},
		{"advertised on loopback", Config{AdvertiseAddr: "::1", Join: []string{"dns+localhost:7946"}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tt.cfg
			err := cfg.validateOn(network.OS)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("validate: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("validate = %v; want an error containing %q", err, tt.wantErr)
			case tt.wantErr != "" && !strings.Contains(err.Error(), "corral.DefaultConfig() sets GossipPort 7946 and PeerPort 7947"):
				t.Fatalf("validate = %v; the error does not say how to fix it", err)
			}
		})
	}
}
