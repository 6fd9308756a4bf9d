package ring_test

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/corralcache/corral/ring"
)

// mustNew builds a ring or fails the test.
func mustNew(tb testing.TB, members []string, cfg ring.Config) *ring.Ring {
	tb.Helper()
	r, err := ring.New(members, cfg)
	if err != nil {
		tb.Fatalf("New(%q): %v", members, err)
	}
	return r
}

// names returns "node-0" … "node-(n-1)".
func names(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("node-%d", i)
	}
	return out
}

func TestNewErrors(t *testing.T) {
	tests := []struct {
		name    string
		members []string
		cfg     ring.Config
		want    error // nil: New must succeed
	}{
		{"empty list", nil, ring.Config{}, nil},
		{"zero config takes defaults", []string{"a"}, ring.Config{}, nil},
		{"one partition", []string{"a", "b"}, ring.Config{PartitionCount: 1}, nil},
		{"load exactly 1", []string{"a", "b", "c"}, ring.Config{Load: 1}, nil},
		{"max replication", []string{"a", "b"}, ring.Config{ReplicationFactor: ring.MaxReplicationFactor}, nil},
		{"empty name", []string{"a", ""}, ring.Config{}, ring.ErrInvalidMember},
		{"NUL in name", []string{"a\x00b"}, ring.Config{}, ring.ErrInvalidMember},
		{"duplicate", []string{"a", "b", "a"}, ring.Config{}, ring.ErrInvalidMember},
		{"negative partitions", []string{"a"}, ring.Config{PartitionCount: -1}, ring.ErrInvalidConfig},
		{"too many partitions", []string{"a"}, ring.Config{PartitionCount: ring.MaxPartitionCount + 1}, ring.ErrInvalidConfig},
		{"negative replication", []string{"a"}, ring.Config{ReplicationFactor: -3}, ring.ErrInvalidConfig},
		{"too much replication", []string{"a"}, ring.Config{ReplicationFactor: ring.MaxReplicationFactor + 1}, ring.ErrInvalidConfig},
		{"load below 1", []string{"a", "b"}, ring.Config{Load: 0.9}, ring.ErrInvalidConfig},
		{"negative load", []string{"a"}, ring.Config{Load: -1}, ring.ErrInvalidConfig},
		{"NaN load", []string{"a"}, ring.Config{Load: math.NaN()}, ring.ErrInvalidConfig},
		{"infinite load", []string{"a"}, ring.Config{Load: math.Inf(1)}, ring.ErrInvalidConfig},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := ring.New(tt.members, tt.cfg)
			if tt.want == nil {
				if err != nil || r == nil {
					t.Fatalf("New = %v, %v; want a ring", r, err)
				}
				return
			}
			if !errors.Is(err, tt.want) || r != nil {
				t.Fatalf("New = %v, %v; want nil, %v", r, err, tt.want)
			}
		})
	}
}

func TestNewDoesNotKeepOrSortCallerSlice(t *testing.T) {
	in := []string{"c", "a", "b"}
	r := mustNew(t, in, ring.Config{})
	if !slices.Equal(in, []string{"c", "a", "b"}) {
		t.Fatalf("New reordered its argument: %q", in)
	}
	in[0] = "z"
	if got := r.Members(); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("Members = %q after caller edit", got)
	}
	got := r.Members()
	got[0] = "z"
	if r.Members()[0] != "a" {
		t.Fatal("Members returned the ring's own slice")
	}
}

func TestEmptyRing(t *testing.T) {
	var nilRing *ring.Ring
	tests := []struct {
		name string
		r    *ring.Ring
	}{
		{"New(nil)", mustNew(t, nil, ring.Config{})},
		{"New(empty)", mustNew(t, []string{}, ring.DefaultConfig())},
		{"last member removed", mustNew(t, []string{"a"}, ring.Config{}).Without("a")},
		{"nil *Ring", nilRing},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := tt.r
			if got := r.Owner("k"); got != "" {
				t.Errorf("Owner = %q, want \"\"", got)
			}
			if got := r.Successor("k", "a"); got != "" {
				t.Errorf("Successor = %q, want \"\"", got)
			}
			if r.Epoch() != 0 || r.Len() != 0 || r.Contains("a") || len(r.Members()) != 0 || len(r.Shares()) != 0 {
				t.Errorf("Epoch %d, Len %d, Members %q, Shares %v; want all empty",
					r.Epoch(), r.Len(), r.Members(), r.Shares())
			}
			if r.Without("a") != r {
				t.Error("Without on an empty ring did not return the ring itself")
			}
			if got := r.Moved(nilRing); got != 0 {
				t.Errorf("Moved(empty) = %v, want 0", got)
			}
			if got := r.Moved(mustNew(t, []string{"a"}, ring.Config{})); got != 1 {
				t.Errorf("Moved(non-empty) = %v, want 1", got)
			}
		})
	}
}

func TestOwnerIsAMember(t *testing.T) {
	r := mustNew(t, names(7), ring.Config{})
	seen := map[string]bool{}
	for i := range 10000 {
		o := r.Owner(fmt.Sprintf("key-%d", i))
		if !r.Contains(o) {
			t.Fatalf("Owner = %q, not a member", o)
		}
		seen[o] = true
	}
	if len(seen) != 7 {
		t.Fatalf("10000 keys reached %d of 7 members", len(seen))
	}
}

func TestOwnerAllocatesNothing(t *testing.T) {
	r := mustNew(t, names(5), ring.Config{})
	var sink string
	if n := testing.AllocsPerRun(1000, func() { sink = r.Owner("user:12345") }); n != 0 {
		t.Fatalf("Owner: %v allocs/op, want 0", n)
	}
	// Warm the memo, then Successor must not allocate either: it runs on
	// the failover path of every request to a dead owner.
	failed := []string{"node-3", "node-1"}
	r.Successor("k", failed...)
	if n := testing.AllocsPerRun(1000, func() { sink = r.Successor("user:12345", failed...) }); n != 0 {
		t.Fatalf("Successor (memoized): %v allocs/op, want 0", n)
	}
	_ = sink
}

func TestEpoch(t *testing.T) {
	base := mustNew(t, []string{"a", "b", "c"}, ring.Config{})
	tests := []struct {
		name    string
		members []string
		cfg     ring.Config
		same    bool
	}{
		{"same order", []string{"a", "b", "c"}, ring.Config{}, true},
		{"permuted", []string{"c", "a", "b"}, ring.Config{}, true},
		{"defaults spelled out", []string{"b", "c", "a"}, ring.DefaultConfig(), true},
		{"subset", []string{"a", "b"}, ring.Config{}, false},
		{"superset", []string{"a", "b", "c", "d"}, ring.Config{}, false},
		{"other names", []string{"a", "b", "x"}, ring.Config{}, false},
		{"names regrouped", []string{"ab", "c"}, ring.Config{}, false},
		{"other partition count", []string{"a", "b", "c"}, ring.Config{PartitionCount: 271}, false},
		{"other replication", []string{"a", "b", "c"}, ring.Config{ReplicationFactor: 21}, false},
		{"other load", []string{"a", "b", "c"}, ring.Config{Load: 1.5}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := mustNew(t, tt.members, tt.cfg).Epoch()
			if e == 0 {
				t.Fatal("Epoch = 0 for a non-empty ring")
			}
			if (e == base.Epoch()) != tt.same {
				t.Fatalf("Epoch %#x vs base %#x: same = %v, want %v", e, base.Epoch(), !tt.same, tt.same)
			}
		})
	}
}
