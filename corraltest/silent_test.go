package corraltest_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/corralcache/corral"
	"github.com/corralcache/corral/corraltest"
)

// A write tells every member of it; a member that has gone silent (paused, cut off) is not
// waited on for a whole call timeout but given up like a silent owner of a Get — after about
// twice SilentPeerTimeout — and named in the *UnreachedError.
func TestWritesDoNotWaitOnASilentMember(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		groups := map[string]*corral.Group[string]{}
		c, err := corraltest.New(corraltest.Config{
			Nodes: 4,
			Setup: func(n *corral.Node) error {
				g, err := corral.NewGroup(n, "g", func(ctx context.Context, key string) (string, error) {
					return "v:" + key, nil
				}, corral.WithTTL(time.Hour))
				groups[n.Name()] = g
				return err
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(context.Background())
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		if err := c.WaitConverged(ctx); err != nil {
			t.Fatal(err)
		}
		n0 := c.Node("n0")
		var key string // owned by neither the writer nor the silent member
		for i := 0; key == "" && i < 10000; i++ {
			if k := fmt.Sprint("k", i); n0.Owner(k).Name != "n0" && n0.Owner(k).Name != "n3" {
				key = k
			}
		}
		c.Pause("n3")
		defer c.Resume("n3")
		bound := 2*corral.DefaultConfig().SilentPeerTimeout + 100*time.Millisecond
		writes := []struct {
			name  string
			write func() error
		}{
			{"Set", func() error { return groups["n0"].Set(ctx, key, "new") }},
			{"Remove", func() error { return groups["n0"].Remove(ctx, key) }},
		}
		for _, w := range writes {
			start := time.Now()
			err := w.write()
			took := time.Since(start)
			var ue *corral.UnreachedError
			if !errors.As(err, &ue) || len(ue.Members) != 1 || ue.Members[0] != "n3" {
				t.Fatalf("%s with n3 paused = %v, want an *UnreachedError naming n3", w.name, err)
			}
			if took > bound {
				t.Fatalf("%s with n3 paused took %v, want ≤ %v", w.name, took, bound)
			}
		}
	})
}
