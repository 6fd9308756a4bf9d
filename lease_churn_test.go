package corral_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/corralcache/corral"
)

// A stale value leased while its key changes owner (a join, under lease requests from every
// node) hands out at most two refresh tokens: one from the old owner, and one extra from the
// new owner. The old owner grants none once its view says the key is not its own.
func TestLeasesAcrossAJoinGrantOneExtraToken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ec := newECluster(t, eclusterConfig{nodes: 3, notFound: true})
		keys := keyList(60, "l")
		for _, k := range keys {
			err := ec.g("n0").SetWithExpiry(context.Background(), k, "v:"+k, corral.Expiry{TTL: 300 * time.Millisecond, SWR: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(400 * time.Millisecond)
		var mu sync.Mutex
		tokens := map[string]map[string]bool{}
		stop := make(chan struct{})
		var wg sync.WaitGroup
		lease := func(g *corral.Group[string], k string) {
			l, err := g.Lease(context.Background(), k, corral.LeaseOptions{Fill: time.Minute})
			if err != nil {
				if !errors.Is(err, corral.ErrClosed) {
					t.Errorf("Lease(%s): %v", k, err)
				}
				return
			}
			if l.Token != "" {
				mu.Lock()
				if tokens[k] == nil {
					tokens[k] = map[string]bool{}
				}
				tokens[k][l.Token] = true
				mu.Unlock()
			}
		}
		for _, name := range []string{"n0", "n1", "n2"} {
			g := ec.g(name)
			wg.Go(func() {
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					case <-time.After(time.Millisecond):
					}
					lease(g, keys[i%len(keys)])
				}
			})
		}
		time.Sleep(200 * time.Millisecond)
		joiner, err := ec.Add()
		if err != nil {
			t.Fatal(err)
		}
		ec.converge(t)
		time.Sleep(500 * time.Millisecond)
		close(stop)
		wg.Wait()
		var movedKeys int
		for _, k := range keys {
			for _, n := range ec.Nodes() {
				lease(ec.g(n.Name()), k)
			}
			max := 1
			if joiner.Owner(k).Name == joiner.Name() {
				max, movedKeys = 2, movedKeys+1
			}
			if got := len(tokens[k]); got > max || got == 0 {
				t.Errorf("%s: %d refresh tokens granted, want 1..%d", k, got, max)
			}
		}
		if movedKeys == 0 {
			t.Fatal("no key moved to the joiner")
		}
	})
}
