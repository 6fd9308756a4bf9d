package peer_test

import (
	"log/slog"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/corralcache/corral/peer"
)

// TestReconnectReachesAFailedMemberBack kills b, starts it again at its address with no seeds,
// and checks that a, which re-joins no seed, finds it again through its reconnects; and that
// when another process (c, a one-member cluster of its own) has taken a failed member's address
// instead, a's reconnects reach it but c does not answer a ping for b, so a sends it nothing and
// neither view changes.
func TestReconnectReachesAFailedMemberBack(t *testing.T) {
	for _, back := range []string{"b", "c"} {
		t.Run(back+" at b's address", func(t *testing.T) {
			cfgB := fastConfig(t, "b")
			cfgB.RejoinInterval = -1
			b, err := peer.New(cfgB)
			if err != nil {
				t.Fatal(err)
			}
			cfgA := fastConfig(t, "a")
			cfgA.Seeds = []string{b.GossipAddr()}
			cfgA.RejoinInterval = -1 // only reconnects can find b again
			cfgA.ReconnectInterval = 50 * time.Millisecond
			logA := testLog(t, "a")
			cfgA.Logger = slog.New(logA)
			a := start(t, cfgA)
			waitFor(t, "a and b to see each other", hasNames(a, "a", "b"))

			_, port, _ := net.SplitHostPort(b.GossipAddr())
			if err := b.Close(); err != nil { // no leave: a finds b dead
				t.Fatal(err)
			}
			waitFor(t, "a to find b dead", hasNames(a, "a"))

			cfg := fastConfig(t, back)
			cfg.BindPort, _ = strconv.Atoi(port)
			cfg.RejoinInterval = -1
			cfg.ReconnectInterval = -1
			logAgain := testLog(t, back)
			cfg.Logger = slog.New(logAgain)
			again := start(t, cfg)
			if back == "b" {
				waitFor(t, "a to reach b again", hasNames(a, "a", "b"))
				waitFor(t, "b to see a", hasNames(again, "a", "b"))
				return
			}
			waitFor(t, "a's reconnects to reach c", func() bool {
				return strings.Count(logAgain.String(), "Got ping for unexpected node 'b'") >= 3
			})
			time.Sleep(10 * cfgA.ReconnectInterval) // more attempts, all refused
			if got := names(a.Members()); len(got) != 1 {
				t.Errorf("a sees %v after reaching c at b's address, want only itself", got)
			}
			if got := names(again.Members()); len(got) != 1 {
				t.Errorf("c sees %v, want only itself", got)
			}
		})
	}
}
