package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestLeasePerformance measures the lease row of docs/performance.md: 300 concurrent
// callers on one expired key, one of them builds it for 50 ms; corral's FILLGET … WAIT (3
// nodes, 100 callers each, the server holds the waiters) against the same flow on one
// redis-server with SET NX and 10 ms polling. It measures and prints; it asserts only the
// structure (one build per trial), never a time. It runs only when asked:
//
//	cd e2e && CORRAL_LEASE_BENCH=1 go test -run TestLeasePerformance -v -count=1 .
//
// and needs redis-server (Debian: redis-server). corral runs as a binary built without
// -race here, unlike the rest of the suite.
func TestLeasePerformance(t *testing.T) {
	if os.Getenv("CORRAL_LEASE_BENCH") == "" {
		t.Skip("a measurement: CORRAL_LEASE_BENCH=1 runs it")
	}
	server, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server is not installed (Debian: redis-server)")
	}
	bin := filepath.Join(t.TempDir(), "corral")
	build := exec.Command("go", "build", "-o", bin, "./cmd/corral")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	raced := corralBin
	corralBin = bin
	t.Cleanup(func() { corralBin = raced })

	const callers, trials, work = 300, 3, 50 * time.Millisecond
	nodes := startLeaseCluster(t, 3)
	clients := clientsOf(t, nodes, callers/3+10)
	warm(t, clients, callers/3+1)
	rdb := startRedisServer(t, server, callers+10)
	var corralRows, redisRows []string
	for trial := range trials {
		key := fmt.Sprint("perf:", trial)
		b := stampede(t, clients, key, callers, 10_000, work)
		if b.answers["FILL"] != 1 || b.answers["HIT"] != callers-1 {
			t.Fatalf("corral trial %d: %v", trial, b.answers)
		}
		corralRows = append(corralRows, fmt.Sprintf("1 build, %d commands · p50 %v, p99 %v (the filler's FILLSET answered at %v)",
			callers+1, ms(percentile(b.waited, 0.5)), ms(percentile(b.waited, 0.99)), ms(b.filled)))

		builds, commands, lat := redisLockStampede(t, rdb, key, callers, work, 10*time.Millisecond)
		if builds != 1 {
			t.Fatalf("redis trial %d: %d builds", trial, builds)
		}
		redisRows = append(redisRows, fmt.Sprintf("1 build, %d commands · p50 %v, p99 %v", commands, ms(percentile(lat, 0.5)), ms(percentile(lat, 0.99))))
	}
	for i := range trials {
		t.Logf("trial %d: corral FILLGET WAIT (3 nodes): %s | Redis SET NX + 10 ms polling: %s", i+1, corralRows[i], redisRows[i])
	}
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }

// redisLockStampede is the cache-aside flow on Redis that leases replace: every caller GETs;
// on a miss it tries SET lock NX; the winner looks again, builds the value for work, SETs it
// and deletes the lock; the others poll GET every poll (as e2e/bench's "SET NX lock"). It returns the builds and each caller's time to its value.
func redisLockStampede(t *testing.T, rdb *redis.Client, key string, callers int, work, poll time.Duration) (builds, commands int64, lat []time.Duration) {
	t.Helper()
	ctx := withTimeout(t, time.Minute)
	var nBuilds, nCommands atomic.Int64
	lat = make([]time.Duration, callers)
	start := make(chan struct{})
	var t0 time.Time
	var wg sync.WaitGroup
	var failed atomic.Value
	for i := range callers {
		wg.Go(func() {
			<-start
			for n := 0; ; n++ {
				if n > 10_000 {
					failed.Store(errors.New("no value after 10000 polls"))
					return
				}
				nCommands.Add(1)
				if _, err := rdb.Get(ctx, key).Result(); err == nil {
					lat[i] = time.Since(t0)
					return
				} else if !errors.Is(err, redis.Nil) {
					failed.Store(err)
					return
				}
				nCommands.Add(1)
				if ok, err := rdb.SetNX(ctx, "lock:"+key, "x", 5*time.Second).Result(); err == nil && ok {
					// Look again under the lock: the holder before may have stored the value
					// and released the lock between this caller's GET and its SET NX.
					nCommands.Add(1)
					if _, err := rdb.Get(ctx, key).Result(); err == nil {
						nCommands.Add(1)
						rdb.Del(ctx, "lock:"+key)
						lat[i] = time.Since(t0)
						return
					}
					nBuilds.Add(1)
					nCommands.Add(2)
					time.Sleep(work)
					rdb.Set(ctx, key, "built", time.Minute)
					rdb.Del(ctx, "lock:"+key)
					lat[i] = time.Since(t0)
					return
				}
				time.Sleep(poll)
			}
		})
	}
	t0 = time.Now()
	close(start)
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		t.Fatal(err)
	}
	return nBuilds.Load(), nCommands.Load(), lat
}

// startRedisServer runs redis-server on a free loopback port, persistence off, until the
// test ends, and returns a client with a pool of pool connections.
func startRedisServer(t *testing.T, bin string, pool int) *redis.Client {
	t.Helper()
	port := freePort(t)
	cmd := exec.Command(bin, "--bind", "127.0.0.1", "--port", strconv.Itoa(port), "--save", "",
		"--appendonly", "no", "--dir", t.TempDir(), "--loglevel", "warning")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() { cmd.Process.Kill(); <-done })
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	rdb := redis.NewClient(&redis.Options{Addr: addr, PoolSize: pool, MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	waitFor(t, "redis-server", 10*time.Second, func() bool { return rdb.Ping(context.Background()).Err() == nil })
	var wg sync.WaitGroup
	for range pool { // open the pool's connections before measuring: a blocking command holds one
		wg.Go(func() { rdb.BLPop(context.Background(), 50*time.Millisecond, "warm-up") })
	}
	wg.Wait()
	return rdb
}
