package fill

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"weak"
)

// Clock is the time source of a Cache: nanoseconds since a fixed but arbitrary point. It
// must be safe for concurrent use. Freshness is only ever compared against the same clock,
// so its origin does not matter; durations cross processes as durations.
type Clock interface {
	NowNano() int64
}

// CoarseClock reads the time once per resolution in a goroutine and returns the last
// reading: reading it costs about as much as reading a variable, which keeps time.Now
// (≈20–50 ns) off the hit path. It is the default Clock of a Cache. Stop it when done.
//
// It ticks only while it is read: once nobody has read it for idleTicks ticks, its goroutine
// stops, and the reads that come before it ticks again read the time themselves (as
// SystemClock does) and wake it. A process that serves nothing does not wake up a thousand
// times a second for a clock nobody reads (an idle corral serve took 30–34 ms of CPU a second
// with a clock that always ticked, 1 ms with this one, on a 2-core VM).
type CoarseClock struct{ c *coarse }

var _ Clock = (*CoarseClock)(nil)

// CoarseClockResolution is the resolution of a Cache's default clock.
const CoarseClockResolution = time.Millisecond

// idleTicks is how many ticks without a read a CoarseClock's goroutine waits before it stops.
const idleTicks = 16

// NewCoarseClock returns a CoarseClock ticking every resolution while it is read. It panics
// if resolution is not positive.
func NewCoarseClock(resolution time.Duration) *CoarseClock {
	if resolution <= 0 {
		panic("fill: NewCoarseClock of a non-positive resolution")
	}
	c := &coarse{start: time.Now(), wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	c.startNanos = c.start.UnixNano()
	c.advance(c.precise())
	// The goroutine holds the clock through a weak pointer, and gone is closed once the clock
	// is collected: it stops then even if nobody stopped it, asleep or ticking.
	gone := make(chan struct{})
	runtime.AddCleanup(c, func(gone chan struct{}) { close(gone) }, gone)
	go tickCoarse(weak.Make(c), resolution, c.stop, gone, c.wake, c.done)
	return &CoarseClock{c: c}
}

// NowNano returns the last reading, in nanoseconds since the Unix epoch (counted on the
// monotonic clock from NewCoarseClock on).
func (c *CoarseClock) NowNano() int64 { return c.c.NowNano() }

// Tick returns a channel that delivers ticks every d, so that other caches built on otter can
// run on this clock too.
func (c *CoarseClock) Tick(d time.Duration) <-chan time.Time { return time.Tick(d) }

// Stop stops the clock's goroutine; reads go on, reading the time themselves. It is safe to
// call more than once.
func (c *CoarseClock) Stop() {
	c.c.stopOnce.Do(func() {
		close(c.c.stop)
		<-c.c.done
		c.c.state.Store(asleep | waking) // for good: reads read the time, and wake nobody
	})
}

// coarse is a CoarseClock's state. A read looks at state and now, which the goroutine writes
// once a tick at most.
type coarse struct {
	now   atomic.Int64  // the last reading
	state atomic.Uint32 // read, asleep, waking

	start      time.Time
	startNanos int64
	wake       chan struct{} // (1) a read wakes the sleeping goroutine
	stopOnce   sync.Once
	stop, done chan struct{}
}

// A coarse clock's states: 0 (ticking, not read since the last tick), read (ticking, and
// read since), asleep (not ticking: reads read the time themselves), asleep|waking (a read
// has woken the goroutine, which has not started ticking yet; or stopped).
const (
	read uint32 = 1 << iota
	asleep
	waking
)

// NowNano is CoarseClock.NowNano: on the hit path, one flag and the reading.
func (c *coarse) NowNano() int64 {
	if c.state.Load() != read {
		return c.firstRead()
	}
	return c.now.Load()
}

// firstRead is the first read since a tick, or a read of a clock whose goroutine sleeps.
func (c *coarse) firstRead() int64 {
	for {
		switch st := c.state.Load(); st {
		case read:
			return c.now.Load()
		case 0:
			if c.state.CompareAndSwap(0, read) {
				return c.now.Load()
			}
		case asleep:
			if c.state.CompareAndSwap(asleep, asleep|waking) {
				select {
				case c.wake <- struct{}{}:
				default:
				}
			}
			return c.advance(c.precise())
		default: // woken, not ticking yet; or stopped
			return c.advance(c.precise())
		}
	}
}

// precise reads the time.
func (c *coarse) precise() int64 { return c.startNanos + int64(time.Since(c.start)) }

// advance moves the last reading to t, unless it is past t already, and returns it: the
// clock never goes back, though reads of a sleeping clock and the goroutine's ticks race.
func (c *coarse) advance(t int64) int64 {
	for {
		last := c.now.Load()
		if t <= last || c.now.CompareAndSwap(last, t) {
			return max(t, last)
		}
	}
}

// tickCoarse is a CoarseClock's goroutine: it stores the time every resolution while the clock
// is read, and sleeps, until a read wakes it, once it was not read for idleTicks ticks.
func tickCoarse(wc weak.Pointer[coarse], resolution time.Duration, stop, gone, wake, done chan struct{}) {
	defer close(done)
	ticker := time.NewTicker(resolution)
	defer ticker.Stop()
	idle := 0
	for {
		select {
		case <-stop:
			return
		case <-gone:
			return
		case <-ticker.C:
		}
		c := wc.Value()
		if c == nil {
			return
		}
		c.advance(c.precise())
		if c.state.CompareAndSwap(read, 0) {
			idle = 0
			continue
		}
		if idle++; idle < idleTicks || !c.state.CompareAndSwap(0, asleep) {
			continue // not idle long enough, or read since the CompareAndSwap above
		}
		// From here on reads read the time themselves, and the first wakes the goroutine.
		ticker.Stop()
		c = nil // not held while asleep
		select {
		case <-stop:
			return
		case <-gone:
			return
		case <-wake:
		}
		if c = wc.Value(); c == nil {
			return
		}
		c.advance(c.precise())
		ticker.Reset(resolution)
		c.state.Store(read) // the read that woke it
		idle = 0
	}
}

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
