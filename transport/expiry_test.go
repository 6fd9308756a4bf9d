package transport

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// fillLikeCtx is a context with a Canceller, as a fill's loader context is: it ends at its
// deadline or when its canceller ends, and says so through Err. Its Done counts the calls:
// a Get on a stream must not need it.
type fillLikeCtx struct {
	context.Context // the canceller
	deadline        time.Time
	dones           *atomic.Int32
}

func (c fillLikeCtx) Deadline() (time.Time, bool) {
	if d, ok := c.Context.Deadline(); ok && d.Before(c.deadline) {
		return d, true
	}
	return c.deadline, true
}

// Done is the canceller's: it does not close at the deadline, as it should — the test
// fails if it is asked for at all.
func (c fillLikeCtx) Done() <-chan struct{} {
	c.dones.Add(1)
	return c.Context.Done()
}

func (c fillLikeCtx) Err() error {
	if err := c.Context.Err(); err != nil {
		return err
	}
	if d, ok := c.Context.Deadline(); (!ok || d.After(c.deadline)) && !time.Now().Before(c.deadline) {
		return context.DeadlineExceeded // its own deadline; the canceller's ends the canceller
	}
	return nil
}

func (c fillLikeCtx) Canceller() context.Context { return c.Context }

// A Get under a context with a Canceller ends at its deadline — the stream ends it, and the
// owner is told to drop it — and when its canceller ends, or reaches its own earlier
// deadline (then not before the canceller's Err says so: a caller checks it), on both kinds
// of stream, for a caller reading its own answer and for one waiting on another's read; and
// it never waits on the context's Done, which would cost a fill's context a timer.
func TestStreamEndsACallAtItsDeadline(t *testing.T) {
	for _, path := range streamPaths {
		for _, callers := range []int{1, 2} {
			t.Run(fmt.Sprintf("%s/callers=%d", path.name, callers), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) { testStreamEndsACallAtItsDeadline(t, path, callers) })
			})
		}
	}
}

func testStreamEndsACallAtItsDeadline(t *testing.T, path streamPath, callers int) {
	h := newHitHandler()
	c, addr, b := serveOnMemnet(t, h, ClientConfig{SilentPeerTimeout: -1}, path)
	if _, err := getKey(c, context.Background(), addr, "k"); err != nil {
		t.Fatal(err) // the stream is open, and k held
	}
	s := streamOf(t, c, addr)

	var dones atomic.Int32
	const timeout = time.Second
	for _, end := range []string{"deadline", "cancel", "canceller's deadline"} {
		parent, cancel := context.WithCancel(context.Background())
		if end == "canceller's deadline" {
			parent, cancel = context.WithTimeout(context.Background(), timeout/2)
		}
		ctx := fillLikeCtx{Context: parent, deadline: time.Now().Add(timeout), dones: &dones}
		start := time.Now()
		errs := make(chan error, callers)
		for range callers {
			go func() {
				_, err := getKey(c, ctx, addr, "hang")
				errs <- err
			}()
		}
		synctest.Wait() // the Gets wait on the owner
		want, wantTook := context.DeadlineExceeded, timeout
		switch end {
		case "cancel":
			want, wantTook = context.Canceled, timeout/4
			time.AfterFunc(timeout/4, cancel)
		case "canceller's deadline":
			wantTook = timeout / 2
			fallthrough
		default:
			// The owner's answer at the deadline (the call carries it) is not what ends
			// the Gets: the owner is cut off.
			b.Pause()
		}
		for range callers {
			err := <-errs
			if took := time.Since(start); !errors.Is(err, want) || took != wantTook {
				t.Fatalf("ended by its %s: Get = %v after %v, want %v after %v", end, err, took, want, wantTook)
			}
			if end == "canceller's deadline" && parent.Err() == nil {
				t.Fatal("the Get ended at its canceller's deadline before the canceller did")
			}
		}
		b.Resume()
		for range callers {
			if err := <-h.hangDone; err == nil {
				t.Fatal("the owner's Get went on")
			}
		}
		cancel()
	}
	if n := dones.Load(); n != 0 {
		t.Fatalf("the Gets asked their context's Done %d times", n)
	}
	if s.broken() {
		t.Fatal("the stream broke")
	}
	if _, err := getKey(c, context.Background(), addr, "k"); err != nil {
		t.Fatalf("a Get after: %v", err)
	}
	if p := streamOf(t, c, addr); p != s {
		t.Fatal("a new stream was opened")
	}
}
