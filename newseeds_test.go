package corral_test

import (
	"strings"
	"testing"

	"github.com/corralcache/corral"
)

// What the README once showed: a Config with a service seed and zero ports. Every replica bound
// a random port and dialed 7946, where none listened, and stayed a cluster of one that reported
// ready. New refuses it now, and says what to set.
func TestServiceSeedWithARandomPortFailsNew(t *testing.T) {
	n, err := corral.New(corral.Config{
		Join: []string{"dns+myapp-corral-headless.default.svc.cluster.local:7946"},
	})
	if err == nil {
		n.Close(t.Context())
		t.Fatal("New accepted a dns+ seed with GossipPort 0")
	}
	for _, want := range []string{"GossipPort 0 picks a random port", "Set GossipPort to 7946", "corral.DefaultConfig()"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("New: %v\nwant it to say %q", err, want)
		}
	}
}
