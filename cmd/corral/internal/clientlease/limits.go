package clientlease

import (
	"fmt"
	"time"

	"github.com/corralcache/corral"
)

// Limits bound the leases granted through the fronts. A Limits written by hand must set
// MaxLease: zero is refused.
type Limits struct {
	// MaxLease is the longest fill time granted (--max-lease): a lease asked for longer is
	// refused. Within [corral.MinLeaseFill, corral.MaxLeaseFill].
	MaxLease time.Duration
	// MaxClientLeases is how many leases one client may hold at once through this node
	// (--max-client-leases); 0 = no bound.
	MaxClientLeases int
}

// DefaultLimits returns the production limits. A lease blocks every other caller of its key
// until it is stored or lapses, so a filler that crashed holds its key up for the whole of
// its fill time: one minute is far above a normal build (a page, a query) and the longest a
// waiter waits (WAIT). A client holds a lease per key it is building at once: 1024 is past
// any pool of workers in one pod, and 64 clients at the bound still leave room in a group's
// table (65,536).
func DefaultLimits() Limits {
	return Limits{MaxLease: time.Minute, MaxClientLeases: 1024}
}

// Validate returns an error, naming the flag, for a limit out of its range.
func (l Limits) Validate() error {
	switch {
	case l.MaxLease < corral.MinLeaseFill || l.MaxLease > corral.MaxLeaseFill:
		return fmt.Errorf("--max-lease %v: want [%v, %v]", l.MaxLease, corral.MinLeaseFill, corral.MaxLeaseFill)
	case l.MaxClientLeases < 0:
		return fmt.Errorf("--max-client-leases %d is negative", l.MaxClientLeases)
	}
	return nil
}
