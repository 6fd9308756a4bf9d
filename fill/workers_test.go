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

// Replica.Go runs work a loader hands off on the cache's workers, the goroutine a fill
// before it ran on; Close waits for it as for a fill; once closed, Go runs it on the caller.
func TestReplicaGo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, err := NewReplica(plain(func(ctx context.Context, key string) (string, error) { return "v", nil }), nil,
			Config[string]{Name: "go", MaxBytes: 1 << 20, TTL: time.Hour, Clock: NewSystemClock()}, ReplicaConfig{})
		if err != nil {
			t.Fatal(err)
		}
		// A fill first, so that a worker waits: the handed-off work runs on it.
		var fillG uint64
		r.cfg.OnFill = func(time.Duration, error) { fillG = goid() }
		if _, err := r.Get(context.Background(), "k"); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		release, ran := make(chan struct{}), make(chan uint64, 1)
		r.Go(func() { ran <- goid(); <-release })
		if g := <-ran; g != fillG {
			t.Fatalf("Go ran on goroutine %d, not on the worker %d that filled", g, fillG)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := r.Close(ctx); err == nil {
			t.Fatal("Close returned while the handed-off work ran")
		}
		close(release)
		synctest.Wait()
		if n := r.workers.Load(); n != 0 {
			t.Fatalf("%d workers after Close and the work's end", n)
		}
		me, inline := goid(), uint64(0)
		r.Go(func() { inline = goid() })
		if inline != me {
			t.Fatalf("after Close, Go ran on goroutine %d, not on the caller %d", inline, me)
		}
	})
}
