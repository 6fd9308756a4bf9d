package corral

import (
	"testing"
	"time"

	"github.com/corralcache/corral/peer"
	"github.com/corralcache/corral/ring"
)

func members(names ...string) []peer.Member {
	var ms []peer.Member
	for _, n := range names {
		ms = append(ms, peer.Member{Name: n, GossipAddr: n + ":1", Meta: peer.Meta{PeerAddr: n + ":2"}})
	}
	return ms
}

func TestPreviousOwners(t *testing.T) {
	rc := ring.DefaultConfig()
	solo, _ := ring.New([]string{"a"}, rc)
	v := &view{self: "a", ring: solo, members: map[string]*memberState{}}
	t0 := time.Unix(1000, 0)
	window := time.Minute

	// a joins b and c: keys a now owns were owned on the ring without a.
	v1, _, err := nextView(v, members("a", "b", "c"), rc, t0)
	if err != nil {
		t.Fatal(err)
	}
	without, _ := ring.New([]string{"b", "c"}, rc)
	checked := 0
	for i := range 2000 {
		key := string(rune('a'+i%26)) + string(rune(i))
		if v1.ring.Owner(key) != "a" {
			continue
		}
		got := v1.previousOwners(key, window, t0.Add(time.Second))
		if len(got) == 0 || got[len(got)-1] != without.Owner(key) {
			t.Fatalf("%q: previous owners %v, want to end with %s", key, got, without.Owner(key))
		}
		checked++
	}
	if checked == 0 {
		t.Fatal("a owns no key")
	}
	// Past the window: nobody is asked.
	if got := v1.previousOwners("x", window, t0.Add(2*time.Minute)); got != nil {
		t.Fatalf("past the window: %v", got)
	}

	// Long after joining, d joins: a asks only for keys whose owner changed, never for keys
	// it already owned.
	t1 := t0.Add(time.Hour)
	v2, _, _ := nextView(v1, members("a", "b", "c", "d"), rc, t1)
	for i := range 2000 {
		key := string(rune('a'+i%26)) + string(rune(i))
		got := v2.previousOwners(key, window, t1.Add(time.Second))
		if v1.ring.Owner(key) == "a" && len(got) != 0 {
			t.Fatalf("%q: a owned it before and still asks %v", key, got)
		}
	}
}
