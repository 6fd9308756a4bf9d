package origin

import (
	"context"
	"fmt"
	"math/big"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corralcache/corral/fill"
	"github.com/corralcache/corral/internal/fuzzcorpus"
)

// FuzzCacheControl feeds an origin's Cache-Control header to applyCacheControl, inside a
// real fill on a fake clock, and checks the lifetime the value is stored with against a
// plain reading of the rule: a no-store directive anywhere keeps nothing; otherwise the last
// max-age=N whose N is digits (RFC 9111's delta-seconds) makes it fresh for N seconds, at
// most 2^31, and stale for the grace after; otherwise the group's TTL applies, without grace.
func FuzzCacheControl(f *testing.F) {
	const ttl, grace = time.Hour, 30 * time.Second
	var cc atomic.Pointer[string] // this input's header, for the loader
	clock := &fill.FakeClock{}
	c, err := fill.New(func(ctx context.Context, key string) (string, error) {
		applyCacheControl(ctx, *cc.Load(), grace)
		return "v", nil
	}, fill.Config[string]{TTL: ttl, Clock: clock})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { c.Close(context.Background()) })
	var seq atomic.Int64
	f.Fuzz(func(t *testing.T, header string) {
		cc.Store(&header)
		key := fmt.Sprint("k", seq.Add(1))
		e, _, err := c.GetEntry(context.Background(), key)
		if err != nil {
			t.Fatal(err)
		}
		fresh, stale := ttl, ttl
		for _, d := range strings.Split(header, ",") {
			d = strings.ToLower(strings.TrimSpace(d))
			if d == "no-store" {
				fresh, stale = 0, 0
				break
			}
			if n, ok := new(big.Int).SetString(strings.TrimPrefix(d, "max-age="), 10); ok && strings.HasPrefix(d, "max-age=") &&
				strings.Trim(strings.TrimPrefix(d, "max-age="), "0123456789") == "" {
				fresh = time.Duration(min(n.Int64(), maxAge)) * time.Second
				if !n.IsInt64() {
					fresh = maxAge * time.Second
				}
				stale = fresh + grace
			}
		}
		if e.FreshFor != fresh || e.StaleFor != stale {
			t.Fatalf("Cache-Control %q: fresh for %v, stale for %v; want %v, %v", header, e.FreshFor, e.StaleFor, fresh, stale)
		}
		c.Remove(key)
	})
}

// cacheControlSeeds are FuzzCacheControl's seed corpus: headers as origins send them, and
// ones no origin should.
func cacheControlSeeds() []fuzzcorpus.Seed {
	var seeds []fuzzcorpus.Seed
	for name, h := range map[string]string{
		"max-age":          "max-age=60",
		"public-max-age":   "public, max-age=300, stale-while-revalidate=30",
		"no-store":         "no-store",
		"no-store-late":    "max-age=60, No-Store",
		"no-cache":         "no-cache",
		"private":          "private, max-age=60",
		"s-maxage":         "s-maxage=600, max-age=60",
		"two-max-ages":     "max-age=60, max-age=5",
		"max-age-zero":     "max-age=0",
		"max-age-quoted":   `max-age="60"`,
		"max-age-negative": "max-age=-1",
		"max-age-plus":     "max-age=+60",
		"max-age-spaces":   "  MAX-AGE=60  ,",
		"max-age-year":     "max-age=31536000",
		"max-age-2^31":     "max-age=2147483648",
		"max-age-huge":     "max-age=18446744074",
		"max-age-overflow": "max-age=9223372036854775808",
		"max-age-empty":    "max-age=",
		"empty":            "",
		"commas":           ",,,",
	} {
		seeds = append(seeds, fuzzcorpus.Seed{Name: name, Values: []any{h}})
	}
	return seeds
}
