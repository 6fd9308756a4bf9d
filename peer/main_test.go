package peer

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them: every Membership must stop
// its own goroutines and memberlist's. goleak retries for a while (about 2s) before it reports,
// which covers memberlist's connection handlers that finish shortly after Shutdown; nothing is
// ignored.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
