package transport

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run if any test leaves a goroutine behind: every
// Server must be stopped and every Client closed.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
