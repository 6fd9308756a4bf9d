package fill

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/maypok86/otter/v2"
)

// BenchmarkHit compares a local hit through Cache.Get with a raw otter GetIfPresent of the
// same value, in parallel on all cores, in one run. Goal: ≤ 1.5× otter, 0 allocations.
func BenchmarkHit(b *testing.B) {
	b.Run("otter", func(b *testing.B) {
		o := otter.Must(&otter.Options[string, string]{MaximumSize: 10_000})
		o.Set("hot", "value")
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, ok := o.GetIfPresent("hot"); !ok {
					b.Fatal("miss")
				}
			}
		})
	})
	b.Run("fill", func(b *testing.B) {
		c, err := New(func(context.Context, string) (string, error) { return "value", nil },
			Config[string]{TTL: time.Hour})
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close(context.Background())
		ctx := context.Background()
		c.Get(ctx, "hot")
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := c.Get(ctx, "hot"); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
}

// BenchmarkCoalescedMiss measures one expiry of a key under 1000 concurrent Gets: one fill,
// 999 waiters. ns/op is per stampede.
func BenchmarkCoalescedMiss(b *testing.B) {
	const waiters = 1000
	clk := &FakeClock{}
	c, err := New(func(context.Context, string) (string, error) { return "value", nil },
		Config[string]{TTL: time.Second, Clock: clk})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close(context.Background())
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		clk.Advance(2 * time.Second)
		var wg sync.WaitGroup
		for range waiters {
			wg.Go(func() { c.Get(ctx, "hot") })
		}
		wg.Wait()
	}
	b.ReportMetric(float64(c.Stats().Fills)/float64(b.N), "fills/op")
}
