package peer_test

import (
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/corralcache/corral/peer"
)

// A seed that will not let a member in — another label, another gossip key, encryption on one
// side only — says why in its own log only. The joiner says it too: Join's error, its
// JoinRefusals, its counts and a Warn in its log name the seed and the likely cause.
func TestJoinRefusalSaysWhy(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	other := []byte("fedcba9876543210fedcba9876543210")
	tests := []struct {
		name         string
		seed, joiner func(*peer.Config)
		reason       string
		diagnosis    string // a part of the diagnosis
	}{
		{"another label", func(c *peer.Config) { c.Label = "prod" }, func(c *peer.Config) { c.Label = "staging" },
			peer.RefusedLabel, `likely another cluster label (this member's is "staging")`},
		{"a label on the seed only", func(c *peer.Config) { c.Label = "prod" }, func(c *peer.Config) {},
			peer.RefusedLabel, "likely another cluster label (this member has none)"},
		{"a label on the joiner only", func(c *peer.Config) {}, func(c *peer.Config) { c.Label = "prod" },
			peer.RefusedLabel, "likely another cluster label"},
		{"another key", func(c *peer.Config) { c.SecretKey = key }, func(c *peer.Config) { c.SecretKey = other },
			peer.RefusedKey, "another gossip key"},
		{"a key on the seed only", func(c *peer.Config) { c.SecretKey = key }, func(c *peer.Config) {},
			peer.RefusedEncryption, "this member has no gossip key"},
		{"a key on the joiner only", func(c *peer.Config) {}, func(c *peer.Config) { c.SecretKey = key },
			peer.RefusedEncryption, "the seed sent plaintext"},
		{"a key on the joiner only, which reads plaintext", func(c *peer.Config) {},
			func(c *peer.Config) { c.SecretKey, c.AcceptPlaintext = key, true },
			peer.RefusedEncryption, "the seed has no gossip key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfgA := fastConfig(t, "a")
			tt.seed(&cfgA)
			a := start(t, cfgA)
			cfgB := fastConfig(t, "b")
			tt.joiner(&cfgB)
			log := testLog(t, "b")
			cfgB.Logger = slog.New(log)
			b := start(t, cfgB)

			_, err := b.Join(testCtx(t), []string{a.GossipAddr()})
			var re *peer.JoinRefusedError
			if !errors.As(err, &re) {
				t.Fatalf("Join: %v, want a *JoinRefusedError", err)
			}
			if re.Seed != a.GossipAddr() || re.Reason != tt.reason || !strings.Contains(re.Diagnosis, tt.diagnosis) {
				t.Errorf("refusal: seed %s, reason %q, diagnosis %q; want %s, %q, %q", re.Seed, re.Reason, re.Diagnosis, a.GossipAddr(), tt.reason, tt.diagnosis)
			}
			if !strings.Contains(err.Error(), "seed "+a.GossipAddr()+" refused the join: "+tt.diagnosis) {
				t.Errorf("Join's error %q does not name the seed and the cause", err)
			}
			if rs := b.JoinRefusals(); len(rs) != 1 || rs[0].Seed != a.GossipAddr() || rs[0].Reason != tt.reason {
				t.Errorf("JoinRefusals = %v", rs)
			}
			for _, r := range peer.RefusedReasons {
				want := uint64(0)
				if r == tt.reason {
					want = 1
				}
				if got := b.JoinRefusedCount(r); got != want {
					t.Errorf("JoinRefusedCount(%s) = %d, want %d", r, got, want)
				}
			}
			if line := logLine(log.String(), "seed refused this member's join"); !strings.Contains(line, "level=WARN") ||
				!strings.Contains(line, "seed="+a.GossipAddr()) || !strings.Contains(line, "reason="+tt.reason) {
				t.Errorf("b's log has no Warn naming the seed and the reason: %q", line)
			}
			if got := names(b.Members()); !slices.Equal(got, []string{"b"}) {
				t.Errorf("b sees %v", got)
			}
		})
	}
}

// A member whose seed refuses it from the start — New's attempt and the background loop's —
// keeps the refusal in JoinRefusals, says it at Warn once, and counts each attempt; a member
// that is refused nothing lists nothing.
func TestJoinRefusalOfTheBackgroundLoop(t *testing.T) {
	cfgA := fastConfig(t, "a")
	cfgA.Label = "prod"
	a := start(t, cfgA)

	cfgB := fastConfig(t, "b")
	cfgB.Label = "staging"
	cfgB.Seeds = []string{a.GossipAddr()}
	log := testLog(t, "b")
	cfgB.Logger = slog.New(log)
	b := start(t, cfgB)
	waitFor(t, "the loop's attempts to be refused too", func() bool { return b.JoinRefusedCount(peer.RefusedLabel) >= 3 })
	if rs := b.JoinRefusals(); len(rs) != 1 || rs[0].Reason != peer.RefusedLabel {
		t.Errorf("JoinRefusals = %v", rs)
	}
	if n := strings.Count(log.String(), "level=WARN msg=\"seed refused this member's join\""); n != 1 {
		t.Errorf("%d Warn lines for one seed's refusals, want 1:\n%s", n, log)
	}

	cfgC := fastConfig(t, "c")
	cfgC.Label = "prod"
	cfgC.Seeds = []string{a.GossipAddr()}
	c := start(t, cfgC)
	waitFor(t, "c to join", hasNames(c, "a", "c"))
	if rs := c.JoinRefusals(); len(rs) != 0 {
		t.Errorf("c, admitted, lists refusals %v", rs)
	}
}

// logLine returns the first line of log that holds s, or "".
func logLine(log, s string) string {
	for line := range strings.SplitSeq(log, "\n") {
		if strings.Contains(line, s) {
			return line
		}
	}
	return ""
}
