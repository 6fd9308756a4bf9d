package fill

import (
	"runtime"
	"sync"
	"testing"
	"time"
)

// waitState waits until c's clock is in state want: the goroutine's own pace, not a time.
func waitState(t *testing.T, c *CoarseClock, want uint32) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for c.c.state.Load() != want {
		if time.Now().After(deadline) {
			t.Fatalf("clock state %b, want %b", c.c.state.Load(), want)
		}
		time.Sleep(time.Millisecond)
	}
}

// A clock nobody reads stops ticking; the next read reads the time itself, and wakes it.
func TestCoarseClockSleepsUnreadAndWakesOnARead(t *testing.T) {
	c := NewCoarseClock(time.Millisecond)
	defer c.Stop()
	waitState(t, c, asleep)
	slept := c.c.now.Load()
	before := c.c.precise()
	got := c.NowNano()
	if got < before {
		t.Fatalf("a read of the sleeping clock = %d, before it the time was %d: not read afresh", got, before)
	}
	if got <= slept {
		t.Fatalf("a read of the sleeping clock = %d, its last tick %d", got, slept)
	}
	waitState(t, c, 0) // woken: it ticks again (and the tick clears the read)
	if now := c.NowNano(); now < got {
		t.Fatalf("after waking the clock read %d, before it %d", now, got)
	}
	waitState(t, c, asleep) // and sleeps again when unread
}

// Every reader sees the clock move forward only, through ticks, sleeps and wakes.
func TestCoarseClockNeverGoesBack(t *testing.T) {
	c := NewCoarseClock(time.Millisecond)
	defer c.Stop()
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			last := int64(0)
			for round := range 40 {
				for range 2000 {
					now := c.NowNano()
					if now < last {
						t.Errorf("the clock went back from %d to %d", last, now)
						return
					}
					last = now
				}
				if round%8 == 7 {
					waitState(t, c, asleep) // let it sleep, so that reads wake it
				}
			}
		})
	}
	wg.Wait()
}

// A stopped clock still reads the time, afresh.
func TestCoarseClockStopped(t *testing.T) {
	c := NewCoarseClock(time.Millisecond)
	c.Stop()
	c.Stop() // twice is fine
	a := c.NowNano()
	time.Sleep(2 * time.Millisecond)
	if b := c.NowNano(); b-a < int64(time.Millisecond) {
		t.Fatalf("a stopped clock read %d, then %d 2 ms later", a, b)
	}
}

// A clock dropped without Stop ends its goroutine once it is collected, asleep too.
func TestCoarseClockCollectedAsleep(t *testing.T) {
	c := NewCoarseClock(time.Millisecond)
	done := c.c.done
	waitState(t, c, asleep)
	c = nil
	deadline := time.Now().Add(20 * time.Second)
	for {
		runtime.GC()
		select {
		case <-done:
			return
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("the goroutine of a collected clock did not stop")
		}
	}
}
