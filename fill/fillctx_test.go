package fill

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

// A loader's context ends at its deadline, with its parent, and with the fill — whether or not
// its Done was asked for before — and its Err, Done and Cause agree.

// capture runs one fill of key on c and returns the loader's context, which the loader
// hands to use first (nil: nothing).
func capture(t *testing.T, cfg Config[string], rc ReplicaConfig, parent context.Context, use func(ctx context.Context)) context.Context {
	t.Helper()
	got := make(chan context.Context, 1)
	c, _ := newTest(t, func(ctx context.Context, key string) (string, error) {
		defer func() { got <- ctx }()
		if use != nil {
			use(ctx)
		}
		return "v", nil
	}, cfg, rc)
	c.Get(parent, "k") // may return before the loader does: at the fill timeout, on a worker
	return <-got
}

func checkEnded(t *testing.T, ctx context.Context, want error) {
	t.Helper()
	if err := ctx.Err(); !errors.Is(err, want) {
		t.Fatalf("Err = %v, want %v", err, want)
	}
	select {
	case <-ctx.Done():
	default:
		t.Fatal("Done is not closed though Err is not nil")
	}
	if err := ctx.Err(); !errors.Is(err, want) {
		t.Fatalf("Err after Done = %v, want %v (it changed)", err, want)
	}
	if cause := context.Cause(ctx); !errors.Is(cause, want) {
		t.Fatalf("Cause = %v, want %v", cause, want)
	}
}

func TestLoaderContextEndsAtItsDeadline(t *testing.T) {
	for _, inline := range []bool{false, true} {
		for _, doneFirst := range []bool{false, true} {
			synctest.Test(t, func(t *testing.T) {
				cfg, rc := Config[string]{FillTimeout: time.Second}, ReplicaConfig{InlineFill: inline}
				var d time.Time
				capture(t, cfg, rc, context.Background(), func(ctx context.Context) {
					var ok bool
					if d, ok = ctx.Deadline(); !ok || !d.Equal(time.Now().Add(time.Second)) {
						t.Errorf("Deadline = %v, %v; want now + FillTimeout", d, ok)
					}
					var child context.Context
					var cancel context.CancelFunc
					if doneFirst {
						child, cancel = context.WithCancel(ctx)
						<-ctx.Done()
					} else {
						time.Sleep(time.Second)
						if err := ctx.Err(); err != context.DeadlineExceeded {
							t.Errorf("Err at the deadline, Done never asked = %v", err)
						}
						child, cancel = context.WithCancel(ctx)
					}
					defer cancel()
					<-child.Done()
					if err := child.Err(); err != context.DeadlineExceeded {
						t.Errorf("a child's Err = %v", err)
					}
					checkEnded(t, ctx, context.DeadlineExceeded)
				})
			})
		}
	}
}

func TestLoaderContextEndsWithItsParent(t *testing.T) {
	for _, doneFirst := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			parent, cancel := context.WithCancel(context.Background())
			capture(t, Config[string]{FillTimeout: time.Minute}, ReplicaConfig{InlineFill: true}, parent, func(ctx context.Context) {
				if doneFirst {
					_ = ctx.Done()
				}
				cancel()
				if doneFirst {
					<-ctx.Done()
				}
				checkEnded(t, ctx, context.Canceled)
			})
		})
	}
}

func TestLoaderContextEndsWithTheFill(t *testing.T) {
	for _, doneFirst := range []bool{false, true} {
		ctx := capture(t, Config[string]{FillTimeout: time.Minute}, ReplicaConfig{}, context.Background(), func(ctx context.Context) {
			if doneFirst {
				_ = ctx.Done()
			}
			if err := ctx.Err(); err != nil {
				t.Errorf("Err while the loader runs = %v", err)
			}
		})
		checkEnded(t, ctx, context.Canceled)
	}
}

// The loader's context makes no timer while it is asked only what the near cache's loader
// asks: its deadline, its error, its fill chain, its canceller.
func TestLoaderContextMakesNoTimerUntilAsked(t *testing.T) {
	var fc *fillCtx
	capture(t, Config[string]{FillTimeout: time.Minute}, ReplicaConfig{}, context.Background(), func(ctx context.Context) {
		fc = ctx.(*fillCtx)
		ctx.Deadline()
		ctx.Err()
		SetExpiry(ctx, time.Second, 0)
		Chain(ctx)
		if c := fc.Canceller(); c.Done() != nil {
			t.Errorf("a worker fill's canceller has a Done channel: it should never end")
		}
	})
	if fc.real != nil {
		t.Fatal("the loader's context made its real context (and timer) though nobody asked for Done")
	}
	capture(t, Config[string]{FillTimeout: time.Minute}, ReplicaConfig{}, context.Background(), func(ctx context.Context) {
		fc = ctx.(*fillCtx)
		ctx.Done()
	})
	if fc.real == nil {
		t.Fatal("Done made no real context")
	}
}

// A nested fill's canceller is its outer fill's: waiting on it does not make the outer's timer.
func TestNestedLoaderContextCanceller(t *testing.T) {
	parent, cancel := context.WithCancel(context.Background())
	defer cancel()
	inner, _ := newTest(t, func(ctx context.Context, key string) (string, error) {
		if ctx.(*fillCtx).Canceller() != parent {
			t.Error("a nested inline fill's canceller is not the outermost caller's context")
		}
		return "i", nil
	}, Config[string]{Name: "inner"}, ReplicaConfig{InlineFill: true})
	outer, _ := newTest(t, func(ctx context.Context, key string) (string, error) {
		return inner.Get(ctx, key)
	}, Config[string]{Name: "outer"}, ReplicaConfig{InlineFill: true})
	if v, err := outer.Get(parent, "k"); err != nil || v != "i" {
		t.Fatalf("Get = %q, %v", v, err)
	}
}

// lateParent is a context at the instant its deadline has passed and its timer has not
// fired yet: Err is still nil.
type lateParent struct{ context.Context }

func (lateParent) Deadline() (time.Time, bool) { return time.Now().Add(-time.Second), true }

// A loader's context whose parent's deadline comes first ends when the parent does, not a
// moment before: a caller that sees the fill fail then finds its own ctx.Err() set.
func TestLoaderContextEndsWithItsParentsDeadline(t *testing.T) {
	capture(t, Config[string]{FillTimeout: time.Minute}, ReplicaConfig{InlineFill: true}, lateParent{context.Background()}, func(ctx context.Context) {
		if err := ctx.Err(); err != nil {
			t.Errorf("Err = %v while the parent's is nil", err)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		parent, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		capture(t, Config[string]{FillTimeout: time.Minute}, ReplicaConfig{InlineFill: true}, parent, func(ctx context.Context) {
			if d, _ := ctx.Deadline(); !d.Equal(time.Now().Add(time.Second)) {
				t.Errorf("Deadline = %v, want the parent's", d)
			}
			<-parent.Done()
			checkEnded(t, ctx, context.DeadlineExceeded)
		})
	})
}
