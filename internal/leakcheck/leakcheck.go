// Package leakcheck runs a package's tests and then checks for leaked goroutines, like
// goleak.VerifyTestMain, but gives goroutines that end a little after their owner stopped
// them time to go.
//
// memberlist's probe goroutine outlives Shutdown by up to a probe timeout (500 ms with the LAN
// defaults the demo and the examples use), longer than goleak's own retries; without the grace
// period a clean shutdown would be reported as a leak.
package leakcheck

import (
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// Grace is how long goroutines left after the tests get to end.
const Grace = 5 * time.Second

// Main runs m and exits: non-zero when a test failed or a goroutine is still running after
// Grace.
func Main(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if err := Check(); err != nil {
			fmt.Fprintln(os.Stderr, "leakcheck:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// Check waits up to Grace for the goroutines other than the caller's to end, and returns an
// error naming those still running then. It is for a TestMain that must tear down what its
// tests shared (a control plane, say) before it checks; opts are goleak's, for goroutines a
// dependency keeps on purpose.
func Check(opts ...goleak.Option) error {
	err := goleak.Find(opts...)
	for deadline := time.Now().Add(Grace); err != nil && time.Now().Before(deadline); err = goleak.Find(opts...) {
		time.Sleep(50 * time.Millisecond)
	}
	return err
}
