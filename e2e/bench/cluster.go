package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/corralcache/corral/internal/testpki"
)

// nodes is the size of every cluster.
const nodes = 3

// bed is the test bed: Redis, three corral workers (each a node of the near-off cluster "raw"
// and of the default cluster "def"), three groupcache workers, the echo and raw TCP servers
// in c1 and the Redis, echo and TCP clients in c0.
type bed struct {
	redis  *redisServer
	c, g   [nodes]*worker
	gcURLs []string
	formed time.Time // when both corral clusters had all their members
	log    io.Writer
}

// corral member names: raw-c0 … and def-c0 …
func rawNode(i int) string { return fmt.Sprint("raw-c", i) }
func defNode(i int) string { return fmt.Sprint("def-c", i) }

func startBed(ctx context.Context, p plan, log io.Writer) (b *bed, err error) {
	b = &bed{log: log}
	defer func() {
		if err != nil {
			b.stop()
		}
	}()
	if b.redis, err = startRedis(ctx); err != nil {
		return b, err
	}
	fmt.Fprintf(log, "· redis-server on %s\n", b.redis.Addr)
	var wg sync.WaitGroup
	errs := make([]error, 2*nodes)
	for i := range nodes {
		wg.Go(func() { b.c[i], errs[i] = launch(fmt.Sprint("c", i)) })
		wg.Go(func() { b.g[i], errs[nodes+i] = launch(fmt.Sprint("g", i)) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return b, err
	}

	// Two corral clusters over the same three processes.
	var ca *testpki.CA
	if p.TLS {
		if ca, err = testpki.MakeCA("corral bench CA"); err != nil {
			return b, err
		}
	}
	for _, cl := range []struct {
		label   string
		name    func(int) string
		nearOff bool
	}{{"raw", rawNode, true}, {"def", defNode, false}} {
		var seed corralStarted
		for i := range nodes {
			args := corralStartArgs{ID: cl.name(i), Label: cl.label, NearOff: cl.nearOff}
			if ca != nil {
				if args.TLS, err = issuePeerTLS(ca, cl.name(i)); err != nil {
					return b, err
				}
			}
			if i > 0 {
				args.Seeds = []string{seed.Gossip}
			}
			var st corralStarted
			if err := b.c[i].call(ctx, "corral.start", args, &st); err != nil {
				return b, err
			}
			if i == 0 {
				seed = st
			}
		}
		if err := b.waitMembers(ctx, cl.name); err != nil {
			return b, err
		}
	}
	b.formed = time.Now()
	fmt.Fprintf(log, "· corral: clusters raw (near cache off) and def (defaults), %d nodes each, in c0..c%d\n", nodes, nodes-1)

	for i := range nodes {
		var url string
		if err := b.g[i].call(ctx, "gc.listen", nil, &url); err != nil {
			return b, err
		}
		b.gcURLs = append(b.gcURLs, url)
	}
	for i := range nodes {
		if err := b.g[i].call(ctx, "gc.peers", b.gcURLs, nil); err != nil {
			return b, err
		}
	}
	fmt.Fprintf(log, "· groupcache: %d nodes in g0..g%d, HTTPPool on %s\n", nodes, nodes-1, strings.Join(b.gcURLs, " "))

	var echo string
	if err := b.c[1].call(ctx, "echo.start", p.ValueSize, &echo); err != nil {
		return b, err
	}
	if err := b.c[0].call(ctx, "echo.dial", echo, nil); err != nil {
		return b, err
	}
	var stream string
	if err := b.c[1].call(ctx, "stream.start", p.ValueSize, &stream); err != nil {
		return b, err
	}
	if err := b.c[0].call(ctx, "stream.dial", stream, nil); err != nil {
		return b, err
	}
	var tcp string
	if err := b.c[1].call(ctx, "tcp.start", p.ValueSize, &tcp); err != nil {
		return b, err
	}
	if err := b.c[0].call(ctx, "tcp.dial", tcp, nil); err != nil {
		return b, err
	}
	// A pool as large as the most concurrent callers, so no caller waits for a connection.
	if err := b.c[0].call(ctx, "redis.dial", redisDialArgs{Name: "main", Addr: b.redis.Addr, PoolSize: 128}, nil); err != nil {
		return b, err
	}
	return b, nil
}

func (b *bed) waitMembers(ctx context.Context, name func(int) string) error {
	deadline := time.Now().Add(20 * time.Second)
	for {
		all := true
		for i := range nodes {
			var n int
			if err := b.c[i].call(ctx, "corral.members", name(i), &n); err != nil {
				return err
			}
			all = all && n == nodes
		}
		if all {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("corral nodes %s… did not see %d members within 20s", name(0), nodes)
		}
		if err := sleep(ctx, 20*time.Millisecond); err != nil {
			return err
		}
	}
}

// workers returns every worker still running.
func (b *bed) workers() []*worker {
	var ws []*worker
	for _, w := range append(b.c[:], b.g[:]...) {
		if w != nil && !w.dead.Load() {
			ws = append(ws, w)
		}
	}
	return ws
}

// procIO is a process's read and write system calls so far, and the bytes they moved
// (/proc/PID/io's syscr, syscw, rchar and wchar).
type procIO struct{ reads, writes, rbytes, wbytes int64 }

// syscalls returns the read and write system calls of every process of the bed so far, by
// name (c0, c1, ..., g0, ..., redis).
func (b *bed) syscalls() map[string]procIO {
	pids := map[string]int{}
	for _, w := range b.workers() {
		pids[w.name] = w.Pid()
	}
	if b.redis != nil {
		pids["redis"] = b.redis.Pid()
	}
	out := map[string]procIO{}
	for name, pid := range pids {
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
		if err != nil {
			continue
		}
		var io procIO
		for _, line := range strings.Split(string(raw), "\n") {
			k, v, _ := strings.Cut(line, ": ")
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			switch k {
			case "syscr":
				io.reads = n
			case "syscw":
				io.writes = n
			case "rchar":
				io.rbytes = n
			case "wchar":
				io.wbytes = n
			}
		}
		out[name] = io
	}
	return out
}

// printSyscalls prints, for each process that made any, the read and write system calls per
// Get of a run.
func printSyscalls(run string, before, after map[string]procIO, ops int64) {
	names := make([]string, 0, len(after))
	for name := range after {
		names = append(names, name)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, name := range names {
		r := after[name].reads - before[name].reads
		w := after[name].writes - before[name].writes
		if r+w < ops/100 {
			continue
		}
		fmt.Fprintf(&b, " %s %.2f r + %.2f w", name, float64(r)/float64(ops), float64(w)/float64(ops))
	}
	fmt.Fprintf(os.Stderr, "syscalls per Get, %s:%s\n", run, b.String())
}

// cpu returns the CPU time used so far by every process of the bed, Redis included.
func (b *bed) cpu() time.Duration {
	var pids []int
	for _, w := range b.workers() {
		pids = append(pids, w.Pid())
	}
	if b.redis != nil {
		pids = append(pids, b.redis.Pid())
	}
	var total time.Duration
	for _, pid := range pids {
		total += processCPU(pid)
	}
	return total
}

// processCPU returns a process's user and system time from /proc (0 if it cannot be read).
func processCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command name (field 2) is in parentheses and may hold spaces: count from after it.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	const clockTicks = 100 // USER_HZ, 100 on every Linux architecture Go runs on
	return time.Duration(utime+stime) * time.Second / clockTicks
}

// stopWorkers stops every worker; Redis keeps running.
func (b *bed) stopWorkers() {
	var wg sync.WaitGroup
	for _, w := range b.workers() {
		wg.Go(w.stop)
	}
	wg.Wait()
	for i := range nodes {
		b.c[i], b.g[i] = nil, nil
	}
}

// stop stops the workers and Redis. It is safe to call twice.
func (b *bed) stop() {
	b.stopWorkers()
	if b.redis != nil {
		b.redis.stop()
		b.redis = nil
	}
}

// loads sums a loader counter over workers.
func loads(ctx context.Context, ws []*worker, counter func(i int) string) (int64, error) {
	var total int64
	for i, w := range ws {
		var n int64
		if err := w.call(ctx, "loads", counter(i), &n); err != nil {
			return 0, err
		}
		total += n
	}
	return total, nil
}
