package peer

import (
	"context"
	"slices"
	"testing"
)

func TestParseSeed(t *testing.T) {
	tests := []struct {
		in, host string
		port     uint16
		isIP     bool
	}{
		{"10.0.0.1:7946", "10.0.0.1", 7946, true},
		{"[fd00::1]:7946", "fd00::1", 7946, true},
		{"corral-0.corral:7946", "corral-0.corral", 7946, false},
		{"dns+corral-headless.default.svc.cluster.local:7946", "corral-headless.default.svc.cluster.local", 7946, false},
		{"localhost:1", "localhost", 1, false},
	}
	for _, tt := range tests {
		sd, err := parseSeed(tt.in)
		if err != nil {
			t.Errorf("parseSeed(%q): %v", tt.in, err)
			continue
		}
		if sd.host != tt.host || sd.port != tt.port || sd.ip.IsValid() != tt.isIP || sd.raw != tt.in {
			t.Errorf("parseSeed(%q) = %+v", tt.in, sd)
		}
	}
	for _, bad := range []string{"", ":7946", "host", "host:", "host:x", "host:65536", "k8s://ns/svc", "http://x:1", "srv+x:1", "dns+", "dns+1.2.3.4:1"} {
		if sd, err := parseSeed(bad); err == nil {
			t.Errorf("parseSeed(%q) = %+v, want an error", bad, sd)
		}
	}
}

func TestResolveSeeds(t *testing.T) {
	r := &StaticResolver{}
	r.Set("svc", "10.0.0.2", "10.0.0.1", "not-an-ip", "fd00::1", "::ffff:10.0.0.3")
	r.Set("one", "10.0.0.1")
	seeds, err := parseSeeds([]string{"10.0.0.9:1", "dns+svc:7946", "one:7946", "missing:1", "10.0.0.9:1"})
	if err != nil {
		t.Fatal(err)
	}
	addrs, err := resolveSeeds(context.Background(), r, seeds, nil)
	want := []string{"10.0.0.9:1", "10.0.0.2:7946", "10.0.0.1:7946", "[fd00::1]:7946", "10.0.0.3:7946"}
	if !slices.Equal(addrs, want) {
		t.Errorf("addresses %v, want %v", addrs, want)
	}
	if err == nil {
		t.Error("the unknown name was not reported")
	}

	r.Set("svc") // the name disappears, as a Service's records do
	if _, err := r.LookupHost(context.Background(), "svc"); err == nil {
		t.Error("Set with no addresses did not remove the name")
	}
}
