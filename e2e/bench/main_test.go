package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestMain lets the test binary serve as a worker too, as the bench binary does: launch
// re-executes the running binary with CORRAL_BENCH_WORKER set.
func TestMain(m *testing.M) {
	if os.Getenv(workerEnv) != "" {
		if err := serveWorker(context.Background(), os.Stdin, os.Stdout); err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	}
	code := m.Run()
	if n := workerRaces.Load(); n > 0 {
		os.Stderr.WriteString("FAIL: workers reported data races (see WARNING: DATA RACE above)\n")
		code = 1
	}
	os.Exit(code)
}

// needRedis skips a test on a machine without redis-server.
func needRedis(tb testing.TB) {
	tb.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		tb.Skip("redis-server is not installed: apt-get install -y redis-server (make bench-compare does it)")
	}
}

func testContext(tb testing.TB, d time.Duration) context.Context {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	tb.Cleanup(cancel)
	return ctx
}

func launchT(tb testing.TB, name string) *worker {
	tb.Helper()
	w, err := launch(name)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(w.stop)
	return w
}

func TestStartRedisWithoutServer(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	if _, err := startRedis(context.Background()); !errors.Is(err, ErrNoRedis) {
		t.Fatalf("startRedis without redis-server = %v, want ErrNoRedis", err)
	}
}

func TestRedisStartsAndStops(t *testing.T) {
	needRedis(t)
	r, err := startRedis(testContext(t, 20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := redisPing(r.Addr); err != nil {
		r.stop()
		t.Fatal(err)
	}
	r.stop()
	if err := redisPing(r.Addr); err == nil {
		t.Fatal("redis-server still answers after stop")
	}
	r.stop() // twice is fine
}

func TestWorkerCallsAndKill(t *testing.T) {
	ctx := testContext(t, 30*time.Second)
	w := launchT(t, "w")
	var pid int
	if err := w.call(ctx, "ping", nil, &pid); err != nil || pid != w.Pid() {
		t.Fatalf("ping = %d, %v; want %d", pid, err, w.Pid())
	}
	if err := w.call(ctx, "no-such-op", nil, nil); err == nil {
		t.Fatal("unknown op answered without error")
	}
	if err := w.call(ctx, "ping", nil, nil); err != nil {
		t.Fatalf("worker broken by an unknown op: %v", err)
	}
	w.kill()
	if err := w.call(ctx, "ping", nil, nil); err == nil {
		t.Fatal("a killed worker answered")
	}
	if processCPU(w.Pid()) != 0 {
		t.Fatal("the killed worker's process is still there")
	}
}

// Two groupcache nodes in two processes: a Get of a key the other node owns loads there, over
// HTTP; once that node is killed, the survivor loads the key itself.
func TestGroupcacheProcesses(t *testing.T) {
	ctx := testContext(t, 60*time.Second)
	ws := []*worker{launchT(t, "g0"), launchT(t, "g1")}
	var urls []string
	for _, w := range ws {
		var url string
		if err := w.call(ctx, "gc.listen", nil, &url); err != nil {
			t.Fatal(err)
		}
		urls = append(urls, url)
	}
	for _, w := range ws {
		if err := w.call(ctx, "gc.peers", urls, nil); err != nil {
			t.Fatal(err)
		}
		if err := w.call(ctx, "gc.group", gcGroupArgs{Group: "g", CacheBytes: 1 << 20, ValueSize: 100}, nil); err != nil {
			t.Fatal(err)
		}
	}
	keys := gcKeys(urls, urls[1], "k", 2)
	var n int
	if err := ws[0].call(ctx, "gc.get", gcGetArgs{Group: "g", Key: keys[0]}, &n); err != nil || n != 100 {
		t.Fatalf("gc.get = %d bytes, %v", n, err)
	}
	counts := func() (int64, int64) {
		var a, b int64
		if err := ws[0].call(ctx, "loads", "gc/g", &a); err != nil {
			t.Fatal(err)
		}
		if !ws[1].dead.Load() {
			if err := ws[1].call(ctx, "loads", "gc/g", &b); err != nil {
				t.Fatal(err)
			}
		}
		return a, b
	}
	if a, b := counts(); a != 0 || b != 1 {
		t.Fatalf("loads: g0 %d, g1 %d; want 0 and 1 (the owner)", a, b)
	}
	ws[1].kill()
	if err := ws[0].call(ctx, "gc.get", gcGetArgs{Group: "g", Key: keys[1]}, &n); err != nil || n != 100 {
		t.Fatalf("gc.get after the owner's death = %d bytes, %v", n, err)
	}
	if a, _ := counts(); a != 1 {
		t.Fatalf("g0 loaded %d times after g1 died, want 1", a)
	}
}

// A corral cluster of two processes: a stampede on both counts one loader call in all, and
// a load of remote keys reports every call.
func TestCorralProcessesStampede(t *testing.T) {
	ctx := testContext(t, 60*time.Second)
	ws := []*worker{launchT(t, "c0"), launchT(t, "c1")}
	var seed corralStarted
	for i, w := range ws {
		args := corralStartArgs{ID: defNode(i), Label: "t"}
		if i > 0 {
			args.Seeds = []string{seed.Gossip}
		}
		var st corralStarted
		if err := w.call(ctx, "corral.start", args, &st); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			seed = st
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for i := 0; i < len(ws); {
		var n int
		if err := ws[i].call(ctx, "corral.members", defNode(i), &n); err != nil {
			t.Fatal(err)
		}
		if n == len(ws) {
			i++
			continue
		}
		if time.Now().After(deadline) {
			t.Fatal("the two nodes did not see each other")
		}
		time.Sleep(10 * time.Millisecond)
	}
	for i, w := range ws {
		if err := w.call(ctx, "corral.group", corralGroupArgs{ID: defNode(i), Group: "s", TTL: time.Minute,
			ValueSize: 100, Delay: 20 * time.Millisecond}, nil); err != nil {
			t.Fatal(err)
		}
	}
	st := &stampedeStat{}
	tg := func(i int) target { return target{System: "corral", Node: defNode(i), Group: "s"} }
	if err := fire(ctx, ws, tg, "hot", 50, 100*time.Millisecond, st); err != nil {
		t.Fatal(err)
	}
	calls, err := loads(ctx, ws, func(i int) string { return defNode(i) + "/s" })
	if err != nil {
		t.Fatal(err)
	}
	if calls != 1 || st.errs != 0 || len(st.lat) != 100 {
		t.Fatalf("stampede: %d loader calls, %d errors (%s), %d latencies; want 1, 0, 100", calls, st.errs, st.firstErr, len(st.lat))
	}
	if p := quantileOf(st.lat, 0.5); p < 20*time.Millisecond {
		t.Fatalf("median waiter %v, shorter than the loader", p)
	}

	var keys []string
	if err := ws[0].call(ctx, "corral.keys", corralKeysArgs{ID: defNode(0), Owner: defNode(1), Prefix: "r", N: 8}, &keys); err != nil {
		t.Fatal(err)
	}
	var res loadResult
	if err := ws[0].call(ctx, "load", loadArgs{target: tg(0), Keys: partition(keys, 4), Callers: 4, MaxOps: 40,
		Duration: 10 * time.Second, WantLen: 100}, &res); err != nil {
		t.Fatal(err)
	}
	if res.Ops != 40 || res.Errors != 0 || res.Lat.N != 40 {
		t.Fatalf("load: %d calls, %d errors (%s), %d samples; want 40, 0, 40", res.Ops, res.Errors, res.FirstErr, res.Lat.N)
	}
}

// The Redis cache-aside strategies count their loader calls: naive loads once per caller,
// the lock once in all.
func TestRedisAsideCounts(t *testing.T) {
	needRedis(t)
	ctx := testContext(t, 60*time.Second)
	r, err := startRedis(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.stop)
	w := launchT(t, "r")
	if err := w.call(ctx, "redis.dial", redisDialArgs{Name: "st", Addr: r.Addr, PoolSize: 40}, nil); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		strategy string
		want     func(callers int64) bool
	}{
		{"redis-naive", func(c int64) bool { return c == 40 }},
		{"redis-lock", func(c int64) bool { return c == 1 }},
	} {
		t.Run(tt.strategy, func(t *testing.T) {
			st := &stampedeStat{}
			tg := func(int) target {
				return target{System: tt.strategy, Node: "st", Group: tt.strategy, Delay: 50 * time.Millisecond,
					ValueSize: 100, TTL: time.Minute, Poll: 5 * time.Millisecond}
			}
			if err := fire(ctx, []*worker{w}, tg, "k:"+tt.strategy, 40, 100*time.Millisecond, st); err != nil {
				t.Fatal(err)
			}
			calls, err := loads(ctx, []*worker{w}, func(int) string { return "redis/" + tt.strategy })
			if err != nil {
				t.Fatal(err)
			}
			if !tt.want(calls) || st.errs != 0 {
				t.Fatalf("%d loader calls for 40 callers, %d errors (%s)", calls, st.errs, st.firstErr)
			}
		})
	}
}

func TestHistQuantiles(t *testing.T) {
	h := newHist()
	for i := 1; i <= 10000; i++ {
		h.record(time.Duration(i) * time.Microsecond)
	}
	for _, tt := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 5 * time.Millisecond}, {0.99, 9900 * time.Microsecond}, {1, 10 * time.Millisecond}} {
		got := h.quantile(tt.q)
		if d := float64(got-tt.want) / float64(tt.want); d < -0.035 || d > 0.035 {
			t.Errorf("quantile(%v) = %v, want %v ± 3.5 %%", tt.q, got, tt.want)
		}
	}
	for ns := int64(0); ns < 1<<20; ns = ns*9/8 + 1 {
		if v := bucketValue(bucketOf(ns)); float64(v-ns) > float64(ns)/32+1 || v < ns-ns/32-1 {
			t.Fatalf("bucket of %d ns has value %d", ns, v)
		}
	}
}

// The whole harness, briefly: every step runs and the table has every row.
func TestQuickRun(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 8 processes and Redis; skipped with -short")
	}
	needRedis(t)
	// The steps on the bed, and the ring; TestQuickFronts runs the rest.
	steps := []string{"local", "remote", "stampede", "crash", "memory", "ring"}
	rep, err := run(testContext(t, 5*time.Minute), quickPlan(), steps, testWriter{t})
	if err != nil {
		t.Fatal(err)
	}
	// Rows 1 and 1b, one row 2 per number of callers, 2b and 2c, then 3, 4, 4b, 5 and 6.
	if rows := rep.rows(); len(rows) != 2+len(quickPlan().RemoteCallers)+2+5 {
		t.Fatalf("%d rows:\n%s", len(rows), rep.table())
	}
	if st := rep.stampede["corral"]; st == nil || st.calls[0] != 1 {
		t.Errorf("corral stampede: %+v", st)
	}
	// The owner's crash: one loader call without backups, none with one backup.
	if st := rep.crash["corral"]; st == nil || st.calls[0] != 1 {
		t.Errorf("corral crash: %+v", st)
	}
	if st := rep.crash["corral-backups"]; st == nil || st.calls[0] != 0 {
		t.Errorf("corral crash with a backup: %+v", st)
	}
	if f := rep.fillCost[1]; f == nil || f.sent != int64(len(f.lat)) {
		t.Errorf("fills with a backup gave their backups %+v entries, want one each", f)
	}
	t.Log("\n" + rep.markdown())
}

// The batch step, briefly: its rows are there, every page read without an error, and a cold
// page cost one batch loader call per owner (each key once), a query per key without one, and
// one query to the cache-aside of a lone caller.
func TestQuickBatch(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 6 processes and Redis; skipped with -short")
	}
	needRedis(t)
	p := quickPlan()
	rep, err := run(testContext(t, 5*time.Minute), p, []string{"batch"}, testWriter{t})
	if err != nil {
		t.Fatal(err)
	}
	if rows := rep.rows(); len(rows) != len(p.BatchCallers)+1 {
		t.Fatalf("%d rows:\n%s", len(rows), rep.table())
	}
	for key, st := range rep.batch {
		if st.ops == 0 || st.errs != 0 {
			t.Errorf("%s: %d pages, %d errors (%s)", key, st.ops, st.errs, st.firstErr)
		}
	}
	for _, sys := range pageSystems { // the raw TCP floor among them
		for _, c := range p.BatchCallers {
			if rep.batch[fmt.Sprintf("%s/%d", sys, c)] == nil {
				t.Errorf("no pages of %s with %d callers", sys, c)
			}
		}
	}
	for _, tt := range []struct {
		key           string
		queries, keys func(owners int) bool
	}{
		{"corral-batch/one", func(o int) bool { return o >= 1 && o <= 3 }, nil},
		{"corral-batch/all", func(o int) bool { return o >= 1 && o <= 3 }, nil},
		{"corral-single/one", func(int) bool { return true }, nil},
		{"redis-mget-fill/one", func(int) bool { return true }, nil},
	} {
		cs := rep.cold[tt.key]
		if cs == nil || cs.errs != 0 {
			t.Fatalf("%s: %+v", tt.key, cs)
		}
		want := map[string]int64{"corral-single/one": int64(p.BatchKeys), "redis-mget-fill/one": 1}
		switch {
		case strings.HasPrefix(tt.key, "corral-batch"):
			if cs.queries[0] > int64(cs.owners[0]) || cs.keys[0] != int64(p.BatchKeys) {
				t.Errorf("%s: %d queries for keys on %d owners, %d keys loaded", tt.key, cs.queries[0], cs.owners[0], cs.keys[0])
			}
		default:
			if cs.queries[0] != want[tt.key] || cs.keys[0] != int64(p.BatchKeys) {
				t.Errorf("%s: %d queries, %d keys loaded; want %d and %d", tt.key, cs.queries[0], cs.keys[0], want[tt.key], p.BatchKeys)
			}
		}
	}
	t.Log("\n" + rep.markdown())
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) { w.t.Log(string(b)); return len(b), nil }
