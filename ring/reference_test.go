package ring_test

import (
	"fmt"
	"math/rand"
	"reflect"
	"slices"
	"testing"
	"testing/quick"

	"github.com/buraksezer/consistent"
	"github.com/cespare/xxhash/v2"

	"github.com/corralcache/corral/ring"
)

// The tests in this file check Ring against a deliberately naive reference:
// consistent itself, with members added one by one in a random order, asked
// through LocateKey. If Ring ever disagrees, either the precomputed owner
// table or the claim that join order does not matter is wrong.

type refMember string

func (m refMember) String() string { return string(m) }

type refHasher struct{}

func (refHasher) Sum64(b []byte) uint64 { return xxhash.Sum64(b) }

// reference builds consistent's ring by adding members in the order given,
// redistributing after each one, as a replica that saw them join would.
func reference(order []string, cfg ring.Config) *consistent.Consistent {
	c := consistent.New(nil, consistent.Config{
		Hasher:            refHasher{},
		PartitionCount:    cfg.PartitionCount,
		ReplicationFactor: cfg.ReplicationFactor,
		Load:              cfg.Load,
	})
	for _, m := range order {
		c.Add(refMember(m))
	}
	return c
}

// scenario is a random member set, join order, config and keys.
type scenario struct {
	Members []string // unique, non-empty, in join order
	Config  ring.Config
	Keys    []string
}

// GoString keeps quick's failure report short: the failing key is already
// logged, and the 200 keys would bury the members and config.
func (s scenario) GoString() string {
	return fmt.Sprintf("scenario{Members: %q, Config: %+v, Keys: %d keys}", s.Members, s.Config, len(s.Keys))
}

// Generate implements quick.Generator.
func (scenario) Generate(rnd *rand.Rand, _ int) reflect.Value {
	randString := func(minLen int) string {
		b := make([]byte, minLen+rnd.Intn(16))
		for i := range b {
			b[i] = byte(1 + rnd.Intn(255)) // any byte but NUL, ':' included
		}
		return string(b)
	}
	var s scenario
	seen := map[string]bool{}
	for n := 1 + rnd.Intn(12); len(s.Members) < n; {
		name := randString(1)
		if rnd.Intn(2) == 0 {
			name = fmt.Sprintf("pod-%d", rnd.Intn(100)) // realistic, similar names
		}
		if !seen[name] {
			seen[name] = true
			s.Members = append(s.Members, name)
		}
	}
	// Mostly the defaults, sometimes odd shapes: few partitions, tight or
	// loose bounds, few virtual nodes.
	if rnd.Intn(2) == 0 {
		s.Config = ring.Config{
			PartitionCount:    1 + rnd.Intn(2000),
			ReplicationFactor: 1 + rnd.Intn(40),
			Load:              1 + 2*rnd.Float64(),
		}
	}
	for range 200 {
		s.Keys = append(s.Keys, randString(0))
	}
	return reflect.ValueOf(s)
}

func TestOwnerMatchesLocateKeyInAnyJoinOrder(t *testing.T) {
	check := func(s scenario) bool {
		r, err := ring.New(s.Members, s.Config)
		if err != nil {
			t.Logf("New(%q, %+v): %v", s.Members, s.Config, err)
			return false
		}
		ref := reference(s.Members, r.Config())
		for _, k := range s.Keys {
			if got, want := r.Owner(k), ref.LocateKey([]byte(k)).String(); got != want {
				t.Logf("members %q, config %+v: Owner(%q) = %q, LocateKey = %q",
					s.Members, r.Config(), k, got, want)
				return false
			}
		}
		return true
	}
	if err := quick.Check(check, &quick.Config{MaxCount: 150}); err != nil {
		t.Fatal(err)
	}
}

func TestWithoutMatchesFreshRing(t *testing.T) {
	check := func(s scenario, pick uint) bool {
		r, err := ring.New(s.Members, s.Config)
		if err != nil {
			t.Logf("New: %v", err)
			return false
		}
		drop := s.Members[pick%uint(len(s.Members))]
		rest := slices.DeleteFunc(slices.Clone(s.Members), func(m string) bool { return m == drop })
		fresh, err := ring.New(rest, s.Config)
		if err != nil {
			t.Logf("New(rest): %v", err)
			return false
		}
		w := r.Without(drop)
		if w.Epoch() != fresh.Epoch() || !slices.Equal(w.Members(), fresh.Members()) || w.Moved(fresh) != 0 {
			t.Logf("Without(%q) of %q: epoch %#x, members %q; fresh: %#x, %q, moved %v",
				drop, s.Members, w.Epoch(), w.Members(), fresh.Epoch(), fresh.Members(), w.Moved(fresh))
			return false
		}
		// And against two references: one where the remaining members
		// joined in the scenario's order and the dropped one was never
		// seen, one where all joined and the dropped one then left.
		joined := reference(rest, r.Config())
		left := reference(s.Members, r.Config())
		left.Remove(drop)
		for _, k := range s.Keys {
			got := w.Owner(k)
			for _, ref := range []*consistent.Consistent{joined, left} {
				want := ""
				if len(rest) > 0 {
					want = ref.LocateKey([]byte(k)).String()
				}
				if got != want {
					t.Logf("Without(%q).Owner(%q) = %q, reference %q", drop, k, got, want)
					return false
				}
			}
		}
		return true
	}
	if err := quick.Check(check, &quick.Config{MaxCount: 100}); err != nil {
		t.Fatal(err)
	}
}
