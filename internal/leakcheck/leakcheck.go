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
		err := goleak.Find()
		for deadline := time.Now().Add(Grace); err != nil && time.Now().Before(deadline); err = goleak.Find() {
			time.Sleep(50 * time.Millisecond)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "leakcheck:", err)
			code = 1
		}
	}
	os.Exit(code)
}
