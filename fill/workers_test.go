package fill

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// Fills run on workers that outlive them: sequential fills reuse one goroutine; concurrent
// ones start as many as they need, and at most maxIdleWorkers stay to wait; idle workers end
// after workerIdle, and every worker ends at Close.
func TestFillWorkers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var (
			mu      sync.Mutex
			release = make(chan struct{})
			hold    bool
		)
		goroutines := map[uint64]bool{}
		c, err := New(func(ctx context.Context, key string) (string, error) {
			mu.Lock()
			goroutines[goid()] = true
			h := hold
			mu.Unlock()
			if h {
				<-release
			}
			return "v:" + key, nil
		}, Config[string]{Name: "w", MaxBytes: 1 << 20, TTL: time.Hour, Clock: NewSystemClock()})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(context.Background())
		if n := int(c.workers.Load()); n != 0 {
			t.Fatalf("%d workers before any fill", n)
		}
		// A Get whose ctx can end runs its fill on a worker, not on its own goroutine.
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		for i := range 50 {
			if v, err := c.Get(ctx, fmt.Sprint("seq", i)); err != nil || v != fmt.Sprint("v:seq", i) {
				t.Fatalf("Get %d = %q, %v", i, v, err)
			}
			synctest.Wait() // the worker is back waiting before the next fill
		}
		if len(goroutines) != 1 {
			t.Fatalf("50 sequential fills ran on %d goroutines, want 1 (one worker, reused)", len(goroutines))
		}
		if n := int(c.workers.Load()); n != 1 {
			t.Fatalf("%d workers after sequential fills, want 1 idle worker", n)
		}

		// 40 fills at once need 40 workers; when they end, maxIdleWorkers stay.
		mu.Lock()
		hold = true
		mu.Unlock()
		var wg sync.WaitGroup
		for i := range 40 {
			wg.Go(func() {
				if _, err := c.Get(ctx, fmt.Sprint("par", i)); err != nil {
					t.Errorf("Get par%d: %v", i, err)
				}
			})
		}
		synctest.Wait()
		if n := c.idleWorkers.Load(); n != 0 {
			t.Fatalf("%d idle workers while 40 fills run, want 0", n)
		}
		close(release)
		wg.Wait()
		synctest.Wait()
		if n := int(c.workers.Load()); n != maxIdleWorkers {
			t.Fatalf("%d workers after 40 concurrent fills ended, want %d idle workers", n, maxIdleWorkers)
		}

		// Idle for workerIdle, they end.
		time.Sleep(workerIdle + time.Second)
		synctest.Wait()
		if n := int(c.workers.Load()); n != 0 {
			t.Fatalf("%d workers after %v idle, want 0", n, workerIdle)
		}

		// A worker started again ends at Close.
		if _, err := c.Get(ctx, "again"); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if n := int(c.workers.Load()); n != 1 {
			t.Fatalf("%d workers after one more fill, want 1", n)
		}
		if err := c.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if n := int(c.workers.Load()); n > 0 {
			t.Fatalf("%d workers after Close, want none", n)
		}
	})
}

// goid is the calling goroutine's id, from its stack header ("goroutine 42 [running]:").
func goid() uint64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	var id uint64
	fmt.Sscanf(string(b), "goroutine %d ", &id)
	return id
}
