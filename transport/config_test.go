package transport

import (
	"testing"
	"time"
)

func TestConfigValidation(t *testing.T) {
	tests := []struct {
		name string
		err  func() error
	}{
		{"nil handler", func() error { _, err := NewServer(nil, ServerConfig{}); return err }},
		{"server negative size", func() error { _, err := NewServer(newFakeHandler(), ServerConfig{MaxMessageSize: -1}); return err }},
		{"server negative keepalive", func() error {
			_, err := NewServer(newFakeHandler(), ServerConfig{KeepaliveTime: -time.Second})
			return err
		}},
		{"server negative ping interval", func() error {
			_, err := NewServer(newFakeHandler(), ServerConfig{MinPingInterval: -time.Second})
			return err
		}},
		{"client negative size", func() error { _, err := NewClient(ClientConfig{MaxMessageSize: -1}); return err }},
		{"client negative timeout", func() error { _, err := NewClient(ClientConfig{CallTimeout: -time.Second}); return err }},
		{"client negative connect timeout", func() error { _, err := NewClient(ClientConfig{ConnectTimeout: -1}); return err }},
		{"client keepalive below floor", func() error { _, err := NewClient(ClientConfig{KeepaliveTime: time.Second}); return err }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.err()
			if err == nil {
				t.Fatal("no error")
			}
			t.Log(err)
		})
	}

	// The zero configs mean the defaults.
	sc, err := ServerConfig{}.validate()
	if err != nil {
		t.Fatal(err)
	}
	def := DefaultServerConfig()
	if sc.MaxMessageSize != def.MaxMessageSize || sc.KeepaliveTime != def.KeepaliveTime ||
		sc.KeepaliveTimeout != def.KeepaliveTimeout || sc.MinPingInterval != def.MinPingInterval || sc.Logger == nil {
		t.Fatalf("zero ServerConfig = %+v, want defaults %+v", sc, def)
	}
	cc, err := ClientConfig{}.validate()
	if err != nil {
		t.Fatal(err)
	}
	if cc.MaxMessageSize != DefaultMaxMessageSize || cc.CallTimeout != DefaultCallTimeout ||
		cc.ConnectTimeout != DefaultConnectTimeout || cc.KeepaliveTime != DefaultKeepaliveTime || cc.KeepaliveTimeout != DefaultKeepaliveTimeout {
		t.Fatalf("zero ClientConfig = %+v, want defaults", cc)
	}
	// Default client keepalive is accepted by the default server policy.
	if DefaultClientConfig().KeepaliveTime < DefaultServerConfig().MinPingInterval {
		t.Fatal("default client keepalive is faster than the default server allows")
	}
}
