package peer_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/corralcache/corral/peer"
)

// Every member leaving at once is a normal end: each Leave returns nil, before its context's
// deadline, although the last ones find nobody left to send their leave to. Without the fix
// most rounds have a Leave that waits out its whole context and fails with memberlist's
// "timeout waiting for leave broadcast" (8 of 9 Leaves in one run here); three rounds make
// that all but certain to show.
func TestEveryMemberLeavesAtOnce(t *testing.T) {
	const budget = 8 * time.Second // above the 2 s a leave with nobody to tell waits
	for round := range 3 {
		t.Run(fmt.Sprint("round ", round), func(t *testing.T) {
			var ms []*peer.Membership
			for _, name := range []string{"a", "b", "c"} {
				cfg := fastConfig(t, name)
				if len(ms) > 0 {
					cfg.Seeds = []string{ms[0].GossipAddr()}
				}
				ms = append(ms, start(t, cfg))
			}
			for _, m := range ms {
				waitFor(t, m.String()+" to see 3 members", hasNames(m, "a", "b", "c"))
			}
			type result struct {
				m    *peer.Membership
				err  error
				took time.Duration
			}
			results := make(chan result, len(ms))
			for _, m := range ms {
				go func() {
					ctx, cancel := context.WithTimeout(context.Background(), budget)
					defer cancel()
					began := time.Now()
					err := m.Leave(ctx)
					results <- result{m, err, time.Since(began)}
				}()
			}
			for range ms {
				r := <-results
				t.Logf("%v: Leave = %v after %v", r.m, r.err, r.took.Round(time.Millisecond))
				if r.err != nil || r.took >= budget {
					t.Errorf("%v: Leave = %v after %v; want nil within %v", r.m, r.err, r.took, budget)
				}
			}
		})
	}
}
