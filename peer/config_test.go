package peer_test

import (
	"strings"
	"testing"
	"time"

	"github.com/corralcache/corral/peer"
)

func TestNewRejectsBadConfig(t *testing.T) {
	tests := []struct {
		name   string
		modify func(*peer.Config)
		want   string // in the error
	}{
		{"no name", func(c *peer.Config) { c.Name = "" }, "Name is required"},
		{"bind addr not an IP", func(c *peer.Config) { c.BindAddr = "localhost" }, "BindAddr"},
		{"advertise addr not an IP", func(c *peer.Config) { c.AdvertiseAddr = "pod-0" }, "AdvertiseAddr"},
		{"port too big", func(c *peer.Config) { c.BindPort = 70000 }, "BindPort"},
		{"negative advertise port", func(c *peer.Config) { c.AdvertisePort = -1 }, "AdvertisePort"},
		{"k8s seed", func(c *peer.Config) { c.Seeds = []string{"k8s://default/corral"} }, "k8s:// discovery is not linked in"},
		{"dnssrv seed", func(c *peer.Config) { c.Seeds = []string{"dnssrv+_gossip._tcp.corral:7946"} }, `scheme "dnssrv+" is not supported`},
		{"seed without port", func(c *peer.Config) { c.Seeds = []string{"corral-0"} }, "missing port"},
		{"seed port zero", func(c *peer.Config) { c.Seeds = []string{"10.0.0.1:0"} }, "not in 1-65535"},
		{"dns+ with an IP", func(c *peer.Config) { c.Seeds = []string{"dns+10.0.0.1:7946"} }, "dns+ needs a name"},
		{"dns+ without a name", func(c *peer.Config) { c.Seeds = []string{"dns+:7946"} }, "empty host"},
		{"short key", func(c *peer.Config) { c.SecretKey = []byte("0123456789") }, "SecretKey is 10 bytes"},
		{"long key", func(c *peer.Config) { c.SecretKey = make([]byte, 33) }, "SecretKey is 33 bytes"},
		{"short secondary key", func(c *peer.Config) {
			c.SecretKey, c.SecondaryKeys = make([]byte, 16), [][]byte{make([]byte, 5)}
		}, "gossip key 2 is 5 bytes"},
		{"key twice", func(c *peer.Config) {
			c.SecretKey, c.SecondaryKeys = make([]byte, 16), [][]byte{make([]byte, 16)}
		}, "gossip key 2 is given twice"},
		{"secondary keys without a key", func(c *peer.Config) { c.SecondaryKeys = [][]byte{make([]byte, 16)} }, "SecondaryKeys without SecretKey"},
		{"plaintext switches without a key", func(c *peer.Config) { c.AcceptPlaintext = true }, "without SecretKey"},
		{"send plaintext, refuse it", func(c *peer.Config) {
			c.SecretKey, c.SendPlaintext = make([]byte, 16), true
		}, "SendPlaintext needs AcceptPlaintext"},
		{"long label", func(c *peer.Config) { c.Label = strings.Repeat("x", 256) }, "Label is 256 bytes"},
		{"bad peer addr", func(c *peer.Config) { c.Meta.PeerAddr = "no-port" }, "Meta.PeerAddr"},
		{"long peer addr", func(c *peer.Config) { c.Meta.PeerAddr = strings.Repeat("x", 300) + ":1" }, "Meta.PeerAddr is 302 bytes"},
		{"negative probe interval", func(c *peer.Config) { c.ProbeInterval = -time.Second }, "ProbeInterval -1s is negative"},
		{"negative probe timeout", func(c *peer.Config) { c.ProbeTimeout = -1 }, "ProbeTimeout"},
		{"negative gossip interval", func(c *peer.Config) { c.GossipInterval = -1 }, "GossipInterval"},
		{"negative push/pull interval", func(c *peer.Config) { c.PushPullInterval = -1 }, "PushPullInterval"},
		{"negative suspicion", func(c *peer.Config) { c.SuspicionMult = -1 }, "SuspicionMult"},
		{"negative reclaim", func(c *peer.Config) { c.DeadNodeReclaimTime = -1 }, "DeadNodeReclaimTime"},
		{"negative stream timeout", func(c *peer.Config) { c.StreamTimeout = -1 }, "StreamTimeout"},
		{"negative join timeout", func(c *peer.Config) { c.JoinTimeout = -1 }, "JoinTimeout"},
		{"backoff min above max", func(c *peer.Config) { c.JoinBackoffMin, c.JoinBackoffMax = time.Minute, time.Second }, "JoinBackoffMin 1m0s is above"},
		{"negative backoff", func(c *peer.Config) { c.JoinBackoffMin = -1 }, "JoinBackoffMin"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := fastConfig(t, "a")
			tt.modify(&cfg)
			m, err := peer.New(cfg)
			if err == nil {
				m.Close()
				t.Fatal("New succeeded")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not contain %q", err, tt.want)
			}
		})
	}
}

func TestNewReportsEveryProblem(t *testing.T) {
	_, err := peer.New(peer.Config{SecretKey: []byte("x"), Seeds: []string{"k8s://a/b", "c"}})
	if err == nil {
		t.Fatal("New succeeded")
	}
	for _, want := range []string{"Name is required", "SecretKey is 1 bytes", "k8s://", `seed "c"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
}

func TestNewAcceptsGoodConfig(t *testing.T) {
	tests := []struct {
		name   string
		modify func(*peer.Config)
	}{
		{"zero timings", func(c *peer.Config) {
			*c = peer.Config{Name: c.Name, BindAddr: c.BindAddr}
		}},
		{"never rejoin", func(c *peer.Config) { c.RejoinInterval = -1 }},
		{"16-byte key", func(c *peer.Config) { c.SecretKey = make([]byte, 16) }},
		{"24-byte key", func(c *peer.Config) { c.SecretKey = make([]byte, 24) }},
		{"empty key", func(c *peer.Config) { c.SecretKey = []byte{} }},
		{"every seed form", func(c *peer.Config) {
			// Nothing listens there: the first attempt fails, and that is not an error.
			c.Seeds = []string{"127.0.0.1:1", "[::1]:1", "dns+localhost:1"}
			c.JoinTimeout = time.Second
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := fastConfig(t, "a")
			tt.modify(&cfg)
			start(t, cfg)
		})
	}
}

func TestDefaultConfig(t *testing.T) {
	c := peer.DefaultConfig()
	if c.BindPort != peer.DefaultPort || c.BindAddr != "0.0.0.0" || c.Meta.RingVersion != peer.RingVersion {
		t.Errorf("DefaultConfig() = %+v", c)
	}
	if c.ProbeInterval != time.Second || c.GossipInterval != 200*time.Millisecond || c.DeadNodeReclaimTime != 30*time.Second ||
		c.JoinTimeout != 5*time.Second || c.JoinBackoffMin != 200*time.Millisecond || c.JoinBackoffMax != 10*time.Second ||
		c.RejoinInterval != 30*time.Second {
		t.Errorf("DefaultConfig() timings = %+v", c)
	}
}
