package ring_test

import (
	"fmt"
	"testing"

	"github.com/corralcache/corral/ring"
)

func TestWithout(t *testing.T) {
	r := mustNew(t, names(5), ring.Config{})
	tests := []struct {
		name string
		drop string
		same bool // Without must return r itself
	}{
		{"non-member", "node-9", true},
		{"empty name", "", true},
		{"prefix of a member", "node", true},
		{"member", "node-2", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := r.Without(tt.drop)
			if (w == r) != tt.same {
				t.Fatalf("Without(%q) == r: %v, want %v", tt.drop, w == r, tt.same)
			}
			if tt.same {
				return
			}
			if w.Contains(tt.drop) || w.Len() != r.Len()-1 {
				t.Fatalf("Without(%q).Members = %q", tt.drop, w.Members())
			}
			if w2 := r.Without(tt.drop); w2 != w {
				t.Fatal("second Without returned a different ring; want the memoized one")
			}
		})
	}
}

func TestSuccessor(t *testing.T) {
	r := mustNew(t, names(6), ring.Config{})
	for i := range 2000 {
		key := fmt.Sprintf("key-%d", i)
		owner := r.Owner(key)
		if got := r.Successor(key); got != owner {
			t.Fatalf("Successor(%q) with no failures = %q, want Owner %q", key, got, owner)
		}
		next := r.Successor(key, owner)
		if next == owner || !r.Contains(next) {
			t.Fatalf("Successor(%q, %q) = %q", key, owner, next)
		}
		if want := r.Without(owner).Owner(key); next != want {
			t.Fatalf("Successor(%q, %q) = %q, want Without(owner).Owner = %q", key, owner, next, want)
		}
		// Order, repeats and non-members among the failed names do not matter.
		third := r.Successor(key, owner, next)
		for _, failed := range [][]string{
			{next, owner}, {owner, "ghost", next, owner}, {"", next, owner, next},
		} {
			if got := r.Successor(key, failed...); got != third {
				t.Fatalf("Successor(%q, %q) = %q, want %q", key, failed, got, third)
			}
		}
	}
	if got := r.Successor("k", r.Members()...); got != "" {
		t.Fatalf("Successor with every member failed = %q, want \"\"", got)
	}
}

func TestConcurrentUse(t *testing.T) {
	r := mustNew(t, names(8), ring.Config{})
	done := make(chan string)
	for g := range 8 {
		go func() {
			var last string
			for i := range 200 {
				key := fmt.Sprintf("k%d", i)
				last = r.Successor(key, fmt.Sprintf("node-%d", (g+i)%8), "node-0")
				_ = r.Without(fmt.Sprintf("node-%d", i%8)).Owner(key)
			}
			done <- last
		}()
	}
	for range 8 {
		<-done
	}
	// Every goroutine raced to build the same memoized rings: they must be
	// unique per name.
	for _, m := range r.Members() {
		if r.Without(m) != r.Without(m) {
			t.Fatalf("Without(%q) not memoized", m)
		}
	}
}
