package lease

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/corralcache/corral/internal/view"
)

// A lease granted as acting owner — the key's owner in this node's view did not answer, or
// was leaving — stays live when the view changes to make this node the owner: its holder's
// FillSet stores.
func TestActingOwnerLeaseSurvivesBecomingOwner(t *testing.T) {
	var vp atomic.Pointer[view.View]
	tab := newTable(t, &vp)
	tab.mu.Lock()
	l := tab.grantLocked("k", false, 0, "leaver", time.Minute)
	tab.mu.Unlock()
	tab.Moved(vp.Load())
	version, err := tab.Store("k", "built", l.token, Expiry{TTL: time.Hour}, 0)
	if stored := version > 0; err != nil || !stored {
		t.Fatalf("FillSet under the acting owner's lease = %v, %v; want stored", stored, err)
	}
}
