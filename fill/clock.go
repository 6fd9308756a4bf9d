package fill

import (
	"sync/atomic"
	"time"

	"github.com/maypok86/otter/v2"
)

// Clock is the time source of a Cache: nanoseconds since a fixed but arbitrary point. It
// must be safe for concurrent use. Freshness is only ever compared against the same clock,
// so its origin does not matter; durations cross processes as durations.
type Clock interface {
	NowNano() int64
}

// CoarseClock reads the time once per resolution in a goroutine and returns the last
// reading: reading it costs about as much as reading a variable, which keeps time.Now
// (≈20 ns) off the hit path. It is the default Clock of a Cache. Stop it when done.
type CoarseClock struct{ c *otter.CoarseClock }

var _ Clock = (*CoarseClock)(nil)

// CoarseClockResolution is the resolution of a Cache's default clock.
const CoarseClockResolution = time.Millisecond

// NewCoarseClock returns a CoarseClock ticking every resolution.
func NewCoarseClock(resolution time.Duration) *CoarseClock {
	return &CoarseClock{c: otter.NewCoarseClock(resolution)}
}

// NowNano returns the last reading, in nanoseconds.
func (c *CoarseClock) NowNano() int64 { return c.c.NowNano() }

// Tick returns a channel that delivers the clock's ticks every d, so that other caches built
// on otter can run on this clock too.
func (c *CoarseClock) Tick(d time.Duration) <-chan time.Time { return c.c.Tick(d) }

// Stop stops the clock's goroutine. It is safe to call more than once.
func (c *CoarseClock) Stop() { c.c.Stop() }

// SystemClock reads time.Now's monotonic clock on every call: no goroutine and no ticks,
// for a process that would rather pay ≈20 ns per read than keep a ticker — a simulation in
// virtual time, where a ticker would wake every simulated node every millisecond. The zero
// value is not usable: create it with NewSystemClock.
type SystemClock struct{ start time.Time }

var _ Clock = SystemClock{}

// NewSystemClock returns a SystemClock.
func NewSystemClock() SystemClock { return SystemClock{start: time.Now()} }

// NowNano returns the nanoseconds since NewSystemClock.
func (c SystemClock) NowNano() int64 { return int64(time.Since(c.start)) }

// FakeClock is a Clock that only moves when told to. The zero value reads 0 and is ready to
// use. Tests drive TTL, grace, jitter and refresh-ahead with it instead of sleeping.
type FakeClock struct {
	now atomic.Int64
}

var _ Clock = (*FakeClock)(nil)

// NowNano returns the fake time.
func (c *FakeClock) NowNano() int64 { return c.now.Load() }

// Advance moves the fake time forward by d.
func (c *FakeClock) Advance(d time.Duration) { c.now.Add(int64(d)) }
