package corral

import (
	"context"
	"testing"
	"time"

	"github.com/maypok86/otter/v2"
)

// BenchmarkLocalHit compares a local hit through Group.Get (the key is owned here) with a raw
// otter GetIfPresent of the same value, in parallel on all cores, in one run.
// Goal: ≤ 1.5× otter and no allocation for string values.
func BenchmarkLocalHit(b *testing.B) {
	b.Run("otter", func(b *testing.B) {
		o := otter.Must(&otter.Options[string, string]{MaximumSize: 10_000})
		o.Set("hot", "value")
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				o.GetIfPresent("hot")
			}
		})
	})
	b.Run("group", func(b *testing.B) {
		n := newNode(b, testConfig("bench"))
		g, err := NewGroup(n, "g", func(context.Context, string) (string, error) { return "value", nil }, WithTTL(time.Hour))
		if err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		g.Get(ctx, "hot")
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := g.Get(ctx, "hot"); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
}
