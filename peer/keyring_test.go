package peer_test

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corralcache/corral/peer"
)

var (
	oldKey = []byte("old-key-0123456789abcdef")         // 24 bytes
	newKey = []byte("new-key-0123456789abcdef01234567") // 32 bytes
)

// The modes of a member while a running cluster turns gossip encryption on, in the order of
// the rolling sequence: every member moves one mode to the right, one member at a time.
// Members in neighbouring modes must hear each other, or the cluster splits during the step;
// members two modes apart need not (the sequence never makes them meet).
func TestGossipEncryptionModesThatMeet(t *testing.T) {
	modes := []struct {
		name string
		set  func(*peer.Config)
	}{
		{"plaintext", func(*peer.Config) {}},
		{"key, sends and accepts plaintext", func(c *peer.Config) {
			c.SecretKey, c.AcceptPlaintext, c.SendPlaintext = oldKey, true, true
		}},
		{"key, sends encrypted, accepts plaintext", func(c *peer.Config) {
			c.SecretKey, c.AcceptPlaintext = oldKey, true
		}},
		{"key, encrypted only", func(c *peer.Config) { c.SecretKey = oldKey }},
	}
	for i := range modes {
		for j := i + 1; j < len(modes); j++ {
			a, b := modes[i], modes[j]
			t.Run(a.name+" with "+b.name, func(t *testing.T) {
				cfgA := fastConfig(t, "a")
				a.set(&cfgA)
				ma := start(t, cfgA)
				cfgB := fastConfig(t, "b")
				b.set(&cfgB)
				mb := start(t, cfgB)
				n, err := mb.Join(testCtx(t), []string{ma.GossipAddr()})
				if j == i+1 {
					if err != nil {
						t.Fatalf("neighbouring modes do not meet: %v", err)
					}
					waitFor(t, "a to see b", hasNames(ma, "a", "b"))
					waitFor(t, "b to see a", hasNames(mb, "a", "b"))
					return
				}
				if err == nil {
					t.Errorf("modes two steps apart met (%d reached)", n)
				}
			})
		}
	}
}

// A running cluster rotates its key with SetKeys — the new key accepted everywhere, then
// primary everywhere, then the old one dropped — and no member's view loses anyone on the
// way. Afterwards a member with only the old key cannot join, and one with the new key can.
func TestSetKeysRotatesWithoutASplit(t *testing.T) {
	var ms []*peer.Membership
	for i, name := range []string{"a", "b", "c"} {
		cfg := fastConfig(t, name)
		cfg.SecretKey = slices.Clone(oldKey)
		if i > 0 {
			cfg.Seeds = []string{ms[0].GossipAddr()}
		}
		ms = append(ms, start(t, cfg))
	}
	for _, m := range ms {
		waitFor(t, "three members", hasNames(m, "a", "b", "c"))
	}

	// Every view is checked continuously until the rotation is over.
	var lost atomic.Value
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			for i, m := range ms {
				if got := names(m.Members()); len(got) != 3 {
					lost.CompareAndSwap(nil, fmt.Sprintf("member %d sees %v", i, got))
				}
			}
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	})
	steps := []struct {
		primary   []byte
		secondary [][]byte
	}{
		{oldKey, [][]byte{newKey}},
		{newKey, [][]byte{oldKey}},
		{newKey, nil},
	}
	for _, st := range steps {
		for _, m := range ms {
			if err := m.SetKeys(st.primary, st.secondary); err != nil {
				t.Fatal(err)
			}
			if got := m.KeyCount(); got != 1+len(st.secondary) {
				t.Fatalf("KeyCount %d after SetKeys of %d keys", got, 1+len(st.secondary))
			}
		}
		// Not a wait for something to happen: the time each step's keys are watched at work,
		// several gossip rounds, probes and a full state exchange (500 ms). A split would show
		// as failed probes, a suspicion and a member gone from a view.
		time.Sleep(time.Second)
	}
	close(stop)
	wg.Wait()
	if l := lost.Load(); l != nil {
		t.Fatalf("a view lost a member during the rotation: %v", l)
	}

	for key, wantJoin := range map[string]bool{string(oldKey): false, string(newKey): true} {
		name := "d"
		if !wantJoin {
			name = "e"
		}
		cfg := fastConfig(t, name)
		cfg.SecretKey = []byte(key)
		m := start(t, cfg)
		_, err := m.Join(testCtx(t), []string{ms[0].GossipAddr()})
		if (err == nil) != wantJoin {
			t.Errorf("a member with key %q joined: %v, want %v (%v)", key, err == nil, wantJoin, err)
		}
	}
}

// SetKeys refuses, changing nothing, on a plaintext member and with keys that break the rules.
func TestSetKeysRefuses(t *testing.T) {
	plain := start(t, fastConfig(t, "p"))
	if err := plain.SetKeys(newKey, nil); err == nil {
		t.Error("SetKeys turned encryption on in a running plaintext member")
	}
	cfg := fastConfig(t, "k")
	cfg.SecretKey = slices.Clone(oldKey)
	m := start(t, cfg)
	for _, bad := range [][][]byte{
		{[]byte("short")},
		{newKey, newKey},
		{newKey, []byte("x")},
		slices.Repeat([][]byte{newKey}, peer.MaxKeys+1),
	} {
		if err := m.SetKeys(bad[0], bad[1:]); err == nil {
			t.Errorf("SetKeys accepted %d keys %q", len(bad), bad)
		}
	}
	if m.KeyCount() != 1 {
		t.Errorf("KeyCount %d after refused SetKeys", m.KeyCount())
	}
}
