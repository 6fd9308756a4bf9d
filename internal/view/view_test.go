package view

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/corralcache/corral/peer"
	"github.com/corralcache/corral/ring"
)

// members describes peers by name; each started at the given offset from the Unix epoch,
// in seconds (the order matters to who joined whom).
func members(names ...string) []peer.Member {
	var ms []peer.Member
	for i, n := range names {
		ms = append(ms, peer.Member{Name: n, GossipAddr: n + ":1",
			Meta: peer.Meta{PeerAddr: n + ":2", StartedAt: time.Unix(int64(i), 0)}})
	}
	return ms
}

func names2(sts []*MemberState) []string {
	var out []string
	for _, st := range sts {
		out = append(out, st.Name)
	}
	return out
}

func TestPeekCandidates(t *testing.T) {
	rc := ring.DefaultConfig()
	solo, _ := ring.New([]string{"d"}, rc)
	window := time.Minute
	keys := make([]string, 3000)
	for i := range keys {
		keys[i] = fmt.Sprint("k", i)
	}

	// d joins a, b and c, which started before it: keys d now owns were owned on the ring
	// without d.
	t0 := time.Unix(1000, 0)
	v0 := &View{Self: "d", Ring: solo, Members: map[string]*MemberState{}}
	v1, _, err := Next(v0, members("a", "b", "c", "d"), rc, t0, window, nil)
	if err != nil {
		t.Fatal(err)
	}
	without, _ := ring.New([]string{"a", "b", "c"}, rc)
	checked := 0
	for _, key := range keys {
		if v1.Ring.Owner(key) != "d" {
			continue
		}
		got, moved := v1.PeekCandidates(key, window, t0.Add(time.Second), time.Time{})
		if !moved || !slices.Contains(names2(got), without.Owner(key)) {
			t.Fatalf("%q: candidates %v (moved %v), want %s among them", key, names2(got), moved, without.Owner(key))
		}
		checked++
	}
	if checked == 0 {
		t.Fatal("d owns no key")
	}
	// Past the window: nobody is asked.
	if got, moved := v1.PeekCandidates(keys[0], window, t0.Add(2*time.Minute), time.Time{}); got != nil || moved {
		t.Fatalf("past the window: %v %v", names2(got), moved)
	}

	// Long after, e joins: d asks for no key it owned before and still owns.
	t1 := t0.Add(time.Hour)
	v2, _, _ := Next(v1, members("a", "b", "c", "d", "e"), rc, t1, window, nil)
	for _, key := range keys {
		if v1.Ring.Owner(key) == "d" && v2.Ring.Owner(key) == "d" {
			if got, moved := v2.PeekCandidates(key, window, t1.Add(time.Second), time.Time{}); len(got) != 0 || moved {
				t.Fatalf("%q: d owned it before and still asks %v", key, names2(got))
			}
		}
	}

	// Then a leaves: the keys d takes over from it name a — departed, still known, with its
	// address — and so do those of overlapping changes before it.
	t2 := t1.Add(10 * time.Second)
	v3, _, _ := Next(v2, members("b", "c", "d", "e"), rc, t2, window, nil)
	if _, ok := v3.Departed["a"]; !ok {
		t.Fatal("a is not remembered as departed")
	}
	checked = 0
	for _, key := range keys {
		if v2.Ring.Owner(key) != "a" || v3.Ring.Owner(key) != "d" {
			continue
		}
		got, moved := v3.PeekCandidates(key, window, t2.Add(time.Second), time.Time{})
		if !moved || !slices.Contains(names2(got), "a") || got[0].PeerAddr != "a:2" {
			t.Fatalf("%q: candidates %v, want a first", key, names2(got))
		}
		checked++
	}
	if checked == 0 {
		t.Fatal("no key moved from a to d")
	}
	// A departed member is forgotten after the window, and so are old rings.
	v4, _, _ := Next(v3, members("b", "c", "d", "e", "f"), rc, t2.Add(2*time.Minute), window, nil)
	if _, ok := v4.Departed["a"]; ok || len(v4.history) != 1 {
		t.Fatalf("after the window: departed %v, %d rings", v4.Departed, len(v4.history))
	}
}

// A founding member, the oldest, never counts as having joined a cluster that was there
// before it, so it asks no one for the keys it owned from the start.
func TestFoundingMemberHasNotJoined(t *testing.T) {
	rc := ring.DefaultConfig()
	solo, _ := ring.New([]string{"a"}, rc)
	v0 := &View{Self: "a", Ring: solo, Members: map[string]*MemberState{}}
	v1, _, _ := Next(v0, members("a", "b"), rc, time.Unix(1000, 0), time.Minute, nil)
	if !v1.joined.IsZero() {
		t.Fatal("the oldest member counts as joined")
	}
}

// A member that joined an older cluster asks the owner on the ring without it for PeekWindow
// after it joined — or after another member first asked it anything, when that is later: the
// others may admit it long after it saw them (a name back at a new address waits for
// memberlist to forget its old self), and it owns keys in their views only then.
func TestJoinedCountsFromFirstAsked(t *testing.T) {
	rc := ring.DefaultConfig()
	solo, _ := ring.New([]string{"c"}, rc)
	v0 := &View{Self: "c", Ring: solo, Members: map[string]*MemberState{}}
	t0 := time.Unix(1000, 0)
	v1, _, _ := Next(v0, members("a", "b", "c"), rc, t0, time.Minute, nil)
	if v1.joined != t0 {
		t.Fatalf("joined = %v, want %v", v1.joined, t0)
	}
	var key string
	for i := 0; key == "" && i < 10000; i++ {
		if k := fmt.Sprint("k", i); v1.Ring.Owner(k) == "c" {
			key = k
		}
	}
	later := t0.Add(90 * time.Second)
	if _, moved := v1.PeekCandidates(key, time.Minute, later, time.Time{}); moved {
		t.Fatal("a key asked for past the window, never asked by others, counts as moved")
	}
	got, moved := v1.PeekCandidates(key, time.Minute, later, t0.Add(80*time.Second))
	want := v1.Ring.Without("c").Owner(key)
	if !moved || len(got) != 1 || got[0].Name != want {
		t.Fatalf("asked 10s ago: candidates %v (moved %v), want [%s]", names2(got), moved, want)
	}
	if _, moved := v1.PeekCandidates(key, time.Minute, later.Add(time.Minute), t0.Add(80*time.Second)); moved {
		t.Fatal("past the window after the first ask, the key counts as moved")
	}
}
