package ring_test

import (
	"fmt"
	"testing"

	"github.com/corralcache/corral/ring"
)

// benchKeys are looked up in turn, so the benchmarks hash keys of realistic
// length and do not measure one cached branch.
var benchKeys = func() []string {
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = fmt.Sprintf("user:%d:profile", i*7919)
	}
	return keys
}()

var sink string

func BenchmarkOwner(b *testing.B) {
	r := mustNew(b, names(5), ring.Config{})
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		var s string
		for i := 0; b.Loop(); i++ {
			s = r.Owner(benchKeys[i&1023])
		}
		sink = s
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			var s string
			for i := 0; pb.Next(); i++ {
				s = r.Owner(benchKeys[i&1023])
			}
			_ = s
		})
	})
}

// BenchmarkLocateKey is consistent's own lookup over the same members and
// config, for comparison with BenchmarkOwner: it hashes the same way but
// takes a read lock and a map lookup, and the caller converts the key to
// []byte and the Member back to a name.
func BenchmarkLocateKey(b *testing.B) {
	members := names(5)
	cfg := ring.DefaultConfig()
	c := reference(members, cfg)
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		var s string
		for i := 0; b.Loop(); i++ {
			s = c.LocateKey([]byte(benchKeys[i&1023])).String()
		}
		sink = s
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			var s string
			for i := 0; pb.Next(); i++ {
				s = c.LocateKey([]byte(benchKeys[i&1023])).String()
			}
			_ = s
		})
	})
}

// BenchmarkSuccessor is the failover lookup once its ring is memoized.
func BenchmarkSuccessor(b *testing.B) {
	r := mustNew(b, names(5), ring.Config{})
	r.Successor("warm", "node-2")
	b.ReportAllocs()
	var s string
	for i := 0; b.Loop(); i++ {
		s = r.Successor(benchKeys[i&1023], "node-2")
	}
	sink = s
}

func BenchmarkNew(b *testing.B) {
	members := names(5)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ring.New(members, ring.Config{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSuccessorParallel(b *testing.B) {
	r := mustNew(b, names(5), ring.Config{})
	r.Successor("warm", "node-2")
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		var s string
		for i := 0; pb.Next(); i++ {
			s = r.Successor(benchKeys[i&1023], "node-2")
		}
		_ = s
	})
}
