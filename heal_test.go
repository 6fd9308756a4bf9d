package corral_test

import (
	"context"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/corralcache/corral"
	"github.com/corralcache/corral/corraltest"
)

// TestLongPartitionHealsWithinSeconds cuts a 5-node cluster in two for 30 s, long enough for
// each side to declare the other dead, and checks that every view agrees again within 5 s of
// the heal, with seeds re-joined only every hour: the members that failed are tried again every
// second (ReconnectInterval). With that off, the views still disagree a minute after the heal,
// which is what the reconnects fix: memberlist probes and exchanges state only with members
// it holds live.
func TestLongPartitionHealsWithinSeconds(t *testing.T) {
	for _, tc := range []struct {
		name      string
		reconnect time.Duration
		within    time.Duration
		heals     bool
	}{
		{"reconnects", 0, 5 * time.Second, true},
		{"no reconnects", -1, time.Minute, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c, err := corraltest.New(corraltest.Config{
					Nodes: 5,
					Node: func(string) corral.Config {
						return corral.Config{
							Logger:            slog.New(slog.DiscardHandler),
							RejoinInterval:    time.Hour,
							ReconnectInterval: tc.reconnect,
						}
					},
					Seed: 7,
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
				c.Partition([]string{"n0", "n1"}, []string{"n2", "n3", "n4"})
				time.Sleep(30 * time.Second)
				if n := len(c.Node("n0").Members()); n != 2 {
					t.Fatalf("n0 lists %d members 30 s into the partition, want 2 (its side)", n)
				}
				c.Heal()
				hctx, hcancel := context.WithTimeout(ctx, tc.within)
				defer hcancel()
				err = c.WaitConverged(hctx)
				switch {
				case tc.heals && err != nil:
					t.Fatalf("views disagree %v after the heal: %v", tc.within, err)
				case !tc.heals && err == nil:
					t.Fatalf("views agree within %v of the heal with no reconnects and no re-joins: the reconnect loop is not what heals", tc.within)
				}
			})
		})
	}
}
