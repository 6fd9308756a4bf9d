package corral_test

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/corralcache/corral"
)

// With MaxFills, a loader that reads another key of the cluster — on its own node or
// through a peer whose loader reads back on the first node — does not wait for the fill
// slot its own fill holds: a nested fill takes none.
func TestMaxFillsNestedFills(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ec := newECluster(t, eclusterConfig{
			nodes: 2,
			opts:  []corral.GroupOption{corral.WithTTL(time.Hour)},
			node:  func(string) corral.Config { return corral.Config{MaxFills: 1} },
			load: func(ctx context.Context, self func() *corral.Group[string], key string) (string, error) {
				if next, ok := strings.CutPrefix(key, "outer:"); ok {
					v, err := self().Get(ctx, next)
					return "outer(" + v + ")", err
				}
				return "v:" + key, nil
			},
		})
		n0 := ec.Node("n0")
		owner := func(k string) string { return n0.Owner(k).Name }
		cases := map[string]string{}
		for _, x := range keyList(5000, "k") {
			if owner(x) != "n0" {
				continue
			}
			if _, ok := cases["nested on one node"]; !ok && owner("outer:"+x) == "n0" {
				cases["nested on one node"] = "outer:" + x
			}
			if _, ok := cases["nested through a peer and back"]; !ok && owner("outer:"+x) == "n1" && owner("outer:outer:"+x) == "n0" {
				cases["nested through a peer and back"] = "outer:outer:" + x
			}
		}
		if len(cases) != 2 {
			t.Fatalf("keys for the cases not found: %v", cases)
		}
		for name, key := range cases {
			start := time.Now()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			v, err := ec.g("n0").Get(ctx, key)
			cancel()
			if err != nil || !strings.HasPrefix(v, "outer(") {
				t.Fatalf("%s: Get(%s) = %q, %v after %v", name, key, v, err, time.Since(start))
			}
			if d := time.Since(start); d > time.Second {
				t.Errorf("%s: Get(%s) took %v", name, key, d)
			}
		}
		// The slot is free again: an unrelated Get fills at once.
		start := time.Now()
		if _, err := ec.g("n0").Get(context.Background(), "unrelated"); err != nil || time.Since(start) > time.Second {
			t.Fatalf("unrelated Get after the nested fills: %v after %v", err, time.Since(start))
		}
	})
}
