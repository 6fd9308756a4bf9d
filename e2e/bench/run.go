package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// report is everything one run measured; table.go turns it into the table.
type report struct {
	plan     plan
	machine  machine
	took     time.Duration
	local    map[string]*localStat    // by system: "otter", "otter-get", "corral", "groupcache"
	remote   map[string]*remoteStat   // by row and callers: "corral/16", …
	stampede map[string]*stampedeStat // by strategy: "corral", "groupcache", "redis-naive", "redis-lock"
	crash    map[string]*stampedeStat // by system: "corral", "corral-backups", "groupcache"
	fillCost map[int]*fillCostStat    // by backups: 0, 1
	crashGap time.Duration            // from the kill to the start of corral-backups' burst
	memory   map[string]memoryResult  // by system (see memoryArgs)
	ring     ringResult
	fronts   map[string]*frontStat  // steps 7 and 8, by system and load: "http/corral/1", "resp/redis/get/16", "hops/three"
	batch    map[string]*remoteStat // row 9, by system and callers: "corral-many/16", …
	cold     map[string]*coldStat   // row 9b, by system and mode: "corral-batch/one", "redis-mget-fill/all", …
	commands [][2]string            // the command lines of steps 7 and 8: what, the line
	notes    []string               // what a reader should know about this run: errors, cache hits
	ran      map[string]bool        // steps that ran, by name (see allSteps)
}

// allSteps names the measurements, in the order they run; -steps picks a subset.
var allSteps = []string{"local", "remote", "stampede", "batch", "crash", "memory", "ring", "http", "resp"}

// bedSteps are the steps that use the bed (the workers and their Redis); the others start
// what they measure themselves.
var bedSteps = []string{"local", "remote", "stampede", "batch", "crash", "memory"}

type localStat struct {
	ns     []float64 // one per round
	allocs int64
}

type remoteStat struct {
	lat       *hist
	ops, errs int64
	firstErr  string
	elapsed   time.Duration
	cpu       time.Duration // CPU of every process of the bed while it ran
}

type stampedeStat struct {
	calls    []int64 // loader calls in the cluster, one per trial
	lat      []time.Duration
	byNode   map[int][]time.Duration // lat by the index of the worker the callers ran in
	errs     int
	firstErr string
}

func (r *report) note(format string, a ...any) { r.notes = append(r.notes, fmt.Sprintf(format, a...)) }

// run measures everything in p and returns the report. log gets progress lines.
// steps lists what runs; nil = allSteps.
func run(ctx context.Context, p plan, steps []string, log io.Writer) (*report, error) {
	start := time.Now()
	rep := &report{
		plan: p, machine: describeMachine(),
		local: map[string]*localStat{}, remote: map[string]*remoteStat{},
		stampede: map[string]*stampedeStat{}, crash: map[string]*stampedeStat{}, fillCost: map[int]*fillCostStat{},
		memory: map[string]memoryResult{}, fronts: map[string]*frontStat{}, ran: map[string]bool{},
		batch: map[string]*remoteStat{}, cold: map[string]*coldStat{},
	}
	if steps == nil {
		steps = allSteps
	}
	for _, s := range steps {
		if !slices.Contains(allSteps, s) {
			return nil, fmt.Errorf("unknown step %q (want some of %v)", s, allSteps)
		}
		rep.ran[s] = true
	}
	b := &bed{log: log}
	if slices.ContainsFunc(bedSteps, func(s string) bool { return rep.ran[s] }) {
		var err error
		if b, err = startBed(ctx, p, log); err != nil {
			return nil, err
		}
	}
	defer b.stop()
	for _, s := range []struct {
		name string
		f    func(context.Context, *bed, plan, *report) error
	}{
		{"local", measureLocal},
		{"remote", measureRemote},
		{"stampede", measureStampede},
		{"batch", measureBatch},
		{"crash", measureCrash}, // kills c2 and g2: last of the steps on the bed
		{"memory", measureMemory5},
		{"ring", measureRing},
		// Last, with the workers stopped: tail latency is what these rows measure, and idle
		// processes gossiping on 2 cores are not idle enough.
		{"http", measureHTTP},
		{"resp", measureRESP},
	} {
		if s.name == "memory" {
			b.stopWorkers() // each memory figure comes from a fresh process on an idle machine
		}
		if !rep.ran[s.name] {
			continue
		}
		t0 := time.Now()
		fmt.Fprintf(log, "· %s …\n", s.name)
		if err := s.f(ctx, b, p, rep); err != nil {
			return nil, fmt.Errorf("%s: %w", s.name, err)
		}
		fmt.Fprintf(log, "  done in %v\n", time.Since(t0).Round(time.Millisecond))
	}
	rep.took = time.Since(start)
	rep.machine.LoadEnd = loadAverage()
	return rep, nil
}

// 6. Ring: owner lookups, in a fresh process.
func measureRing(ctx context.Context, _ *bed, _ plan, rep *report) error {
	w, err := launch("ring")
	if err != nil {
		return err
	}
	defer w.stop()
	return w.call(ctx, "ring", nil, &rep.ring)
}

func callEach(ctx context.Context, ws []*worker, op string, args func(i int) any) error {
	for i, w := range ws {
		if err := w.call(ctx, op, args(i), nil); err != nil {
			return err
		}
	}
	return nil
}

// gcKeys returns n keys with prefix that groupcache's HTTPPool routes to owner.
func gcKeys(peers []string, owner, prefix string, n int) []string {
	var keys []string
	for i := 0; len(keys) < n; i++ {
		if k := fmt.Sprintf("%s%07d", prefix, i); gcOwner(peers, k) == owner {
			keys = append(keys, k)
		}
	}
	return keys
}

// 1. Local hit: Group.Get of a key this node owns, otter, and groupcache's local hit, each
// in parallel on all cores in a process that is a member of a 3-node cluster.
func measureLocal(ctx context.Context, b *bed, p plan, rep *report) error {
	if err := callEach(ctx, b.c[:], "corral.group", func(i int) any {
		return corralGroupArgs{ID: defNode(i), Group: "local", TTL: time.Hour, ValueSize: p.ValueSize}
	}); err != nil {
		return err
	}
	if err := callEach(ctx, b.c[:], "corral.group", func(i int) any {
		return corralGroupArgs{ID: defNode(i), Group: "local-tagged", TTL: time.Hour, ValueSize: p.ValueSize,
			Tags: []string{"customer:7", "tenant:a"}}
	}); err != nil {
		return err
	}
	if err := callEach(ctx, b.g[:], "gc.group", func(int) any {
		return gcGroupArgs{Group: "local", CacheBytes: 64 << 20, ValueSize: p.ValueSize}
	}); err != nil {
		return err
	}
	// A working set of 1024 keys, each owned by the node that reads them, cycled by every
	// goroutine: a single key measures a cache line that never leaves L1.
	const localKeys = 1024
	var ck []string
	if err := b.c[0].call(ctx, "corral.keys", corralKeysArgs{ID: defNode(0), Owner: defNode(0), Prefix: "local:", N: localKeys}, &ck); err != nil {
		return err
	}
	gk := gcKeys(b.gcURLs, b.gcURLs[0], "local:", localKeys)
	runs := []struct {
		system string
		w      *worker
		args   localHitArgs
	}{
		{"otter", b.c[0], localHitArgs{System: "otter", Keys: ck}},
		{"otter-get", b.c[0], localHitArgs{System: "otter-get", Keys: ck}},
		{"corral", b.c[0], localHitArgs{System: "corral", Node: defNode(0), Group: "local", Keys: ck}},
		{"corral-tagged", b.c[0], localHitArgs{System: "corral", Node: defNode(0), Group: "local-tagged", Keys: ck}},
		{"groupcache", b.g[0], localHitArgs{System: "groupcache", Group: "local", Keys: gk}},
	}
	for range p.LocalRounds {
		for _, r := range runs {
			var res benchResult
			if err := r.w.call(ctx, "localhit", r.args, &res); err != nil {
				return err
			}
			st := rep.local[r.system]
			if st == nil {
				st = &localStat{}
				rep.local[r.system] = st
			}
			st.ns = append(st.ns, res.NsPerOp)
			st.allocs = max(st.allocs, res.AllocsPerOp)
		}
	}
	return nil
}

// partition deals keys to callers: caller c cycles keys c, c+callers, c+2·callers, …, so no
// two callers ask for one key (which would coalesce on the caller's node).
func partition(keys []string, callers int) [][]string {
	out := make([][]string, callers)
	for i, k := range keys {
		out[i%callers] = append(out[i%callers], k)
	}
	return out
}

// onePerCaller gives each caller one key of its own, which it asks for again and again.
func onePerCaller(keys []string, callers int) [][]string {
	out := make([][]string, callers)
	for c := range out {
		out[c] = []string{keys[c%len(keys)]}
	}
	return out
}

type remoteRun struct {
	row  string
	w    *worker
	t    target
	keys []string
	// deal assigns keys to callers.
	deal func([]string, int) [][]string
}

// 2. Remote hit: the key is owned by another node, and is in the owner's cache.
func measureRemote(ctx context.Context, b *bed, p plan, rep *report) error {
	for _, name := range []func(int) string{rawNode, defNode} {
		if err := callEach(ctx, b.c[:], "corral.group", func(i int) any {
			return corralGroupArgs{ID: name(i), Group: "remote", TTL: time.Hour, ValueSize: p.ValueSize}
		}); err != nil {
			return err
		}
	}
	// groupcache copies 1 in 10 remote fetches into the caller's hot cache, which is bounded
	// with its main cache by cacheBytes. The caller (g0) gets a small cacheBytes, so that its
	// hot cache holds a few hundred of the thousands of keys the callers cycle through and
	// the main rows measure the HTTP fetch; the owners get room for every key.
	if err := callEach(ctx, b.g[:], "gc.group", func(i int) any {
		cb := int64(256 << 20)
		if i == 0 {
			cb = 16 << 10
		}
		return gcGroupArgs{Group: "remote", CacheBytes: cb, ValueSize: p.ValueSize}
	}); err != nil {
		return err
	}
	var ck, hot []string
	if err := b.c[0].call(ctx, "corral.keys", corralKeysArgs{ID: rawNode(0), Owner: rawNode(1), Prefix: "r:", N: p.RemoteKeys}, &ck); err != nil {
		return err
	}
	if err := b.c[0].call(ctx, "corral.keys", corralKeysArgs{ID: defNode(0), Owner: defNode(1), Prefix: "h:", N: 64}, &hot); err != nil {
		return err
	}
	gk := gcKeys(b.gcURLs, b.gcURLs[1], "r:", p.RemoteKeys)
	if err := b.c[0].call(ctx, "redis.fill", redisFillArgs{Name: "main", Keys: ck, ValueSize: p.ValueSize}, nil); err != nil {
		return err
	}

	main := []remoteRun{
		{"corral", b.c[0], target{System: "corral", Node: rawNode(0), Group: "remote"}, ck, partition},
		{"groupcache", b.g[0], target{System: "groupcache", Group: "remote"}, gk, partition},
		{"redis", b.c[0], target{System: "redis", Node: "main"}, ck, partition},
		{"echo", b.c[0], target{System: "echo", Group: "remote"}, ck, partition},
		{"stream", b.c[0], target{System: "stream", Group: "remote"}, ck, partition},
		{"tcp", b.c[0], target{System: "tcp"}, ck, partition},
	}
	extra := []remoteRun{
		{"corral-near", b.c[0], target{System: "corral", Node: defNode(0), Group: "remote"}, hot, onePerCaller},
		{"groupcache-hot", b.g[0], target{System: "groupcache", Group: "remote"}, gk[:64], onePerCaller},
		{"corral-shared", b.c[0], target{System: "corral", Node: rawNode(0), Group: "remote"}, ck[:1], onePerCaller},
	}
	// Warm up: every key once, so owners hold them all and connections are open.
	for _, r := range append(main, extra...) {
		if _, err := loadOnce(ctx, b, p, r, 16, len(r.keys), time.Minute); err != nil {
			return fmt.Errorf("warm-up of %s: %w", r.row, err)
		}
	}
	var gc0, gc1 gcStats
	if err := b.g[0].call(ctx, "gc.stats", "remote", &gc0); err != nil {
		return err
	}
	for round := range p.RemoteRounds {
		for ci, callers := range p.RemoteCallers {
			// Rotate the order, so no system always runs first or last.
			for k := range main {
				r := main[(k+round+ci)%len(main)]
				if err := measureRun(ctx, b, p, rep, r, callers); err != nil {
					return err
				}
			}
		}
	}
	if err := b.g[0].call(ctx, "gc.stats", "remote", &gc1); err != nil {
		return err
	}
	if gets := gc1.Gets - gc0.Gets; gets > 0 {
		rep.note("groupcache, remote-hit rows: %.1f %% of %d Gets were fetched from the owner over HTTP, %.1f %% were hot-cache hits on the caller.",
			100*float64(gc1.PeerLoads-gc0.PeerLoads)/float64(gets), gets, 100*float64(gc1.HotHits-gc0.HotHits)/float64(gets))
	}
	for _, r := range extra {
		// Let the near cache and the hot cache see their keys as hot first.
		if _, err := loadOnce(ctx, b, p, r, 64, p.RemoteMaxOps, 300*time.Millisecond); err != nil {
			return err
		}
		for _, callers := range p.RemoteCallers {
			if err := measureRun(ctx, b, p, rep, r, callers); err != nil {
				return err
			}
		}
	}
	return nil
}

func loadOnce(ctx context.Context, b *bed, p plan, r remoteRun, callers, maxOps int, d time.Duration) (loadResult, error) {
	var res loadResult
	ctx, cancel := context.WithTimeout(ctx, d+time.Minute)
	defer cancel()
	err := r.w.call(ctx, "load", loadArgs{target: r.t, Keys: r.deal(r.keys, callers), Callers: callers,
		MaxOps: maxOps, Duration: d, WantLen: p.ValueSize}, &res)
	if err == nil && res.Errors > 0 {
		err = fmt.Errorf("%d of %d calls failed, first: %s", res.Errors, res.Ops, res.FirstErr)
	}
	return res, err
}

// startProfiles starts a CPU profile and an execution trace in each of workers, written to
// dir/NAME-cI.cpu and .trace (I: the worker's place in workers); stop ends them.
func startProfiles(ctx context.Context, dir, name string, workers ...*worker) (stop func(context.Context) error, err error) {
	var started []*worker
	stop = func(ctx context.Context) error {
		for _, w := range started {
			if err := w.call(ctx, "pprof.stop", nil, nil); err != nil {
				return err
			}
			if err := w.call(ctx, "trace.stop", nil, nil); err != nil {
				return err
			}
		}
		return nil
	}
	for i, w := range workers {
		path := filepath.Join(dir, fmt.Sprintf("%s-c%d", name, i))
		if err := w.call(ctx, "pprof.start", path+".cpu", nil); err != nil {
			stop(ctx)
			return nil, err
		}
		if err := w.call(ctx, "trace.start", path+".trace", nil); err != nil {
			w.call(ctx, "pprof.stop", nil, nil)
			stop(ctx)
			return nil, err
		}
		started = append(started, w)
	}
	return stop, nil
}

func measureRun(ctx context.Context, b *bed, p plan, rep *report, r remoteRun, callers int) error {
	key := fmt.Sprintf("%s/%d", r.row, callers)
	var stop func(context.Context) error
	if p.ProfileDir != "" && rep.remote[key] == nil && (r.row == "corral" || r.row == "echo" || r.row == "stream") {
		// The caller's process and the owner's (the echo server lives in the owner's).
		var err error
		if stop, err = startProfiles(ctx, p.ProfileDir, fmt.Sprintf("%s-%d", r.row, callers), b.c[0], b.c[1]); err != nil {
			return err
		}
	}
	cpu0, io0 := b.cpu(), b.syscalls()
	res, err := loadOnce(ctx, b, p, r, callers, p.RemoteMaxOps, p.RemoteDuration)
	cpu := b.cpu() - cpu0
	if p.Syscalls && res.Ops > 0 {
		printSyscalls(key, io0, b.syscalls(), res.Ops)
	}
	if stop != nil {
		if err := stop(ctx); err != nil {
			return err
		}
	}
	if err != nil && res.Ops == 0 {
		return fmt.Errorf("%s, %d callers: %w", r.row, callers, err)
	}
	st := rep.remote[key]
	if st == nil {
		st = &remoteStat{lat: newHist()}
		rep.remote[key] = st
	}
	st.lat.merge(res.Lat)
	st.ops += res.Ops
	st.errs += res.Errors
	st.elapsed += res.Elapsed
	st.cpu += cpu
	if st.firstErr == "" {
		st.firstErr = res.FirstErr
	}
	return nil
}

// fire starts callers concurrent Gets of key on each worker at the same instant, delay from
// now, and pools their latencies.
func fire(ctx context.Context, ws []*worker, tg func(i int) target, key string, callers int, delay time.Duration, st *stampedeStat) error {
	at := time.Now().Add(delay).UnixNano()
	res := make([]stampedeResult, len(ws))
	errs := make([]error, len(ws))
	var wg sync.WaitGroup
	for i, w := range ws {
		wg.Go(func() {
			errs[i] = w.call(ctx, "stampede", stampedeArgs{target: tg(i), Key: key, Callers: callers, At: at, Timeout: 10 * time.Second}, &res[i])
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if st.byNode == nil {
		st.byNode = map[int][]time.Duration{}
	}
	for i, r := range res {
		st.lat = append(st.lat, r.Lat...)
		st.byNode[i] = append(st.byNode[i], r.Lat...)
		st.errs += r.Errors
		if st.firstErr == "" {
			st.firstErr = r.FirstErr
		}
	}
	return nil
}

// 3. Stampede at expiry: nodes × StampedeCallers concurrent Gets of a key that just expired,
// with a loader that takes LoaderDelay.
func measureStampede(ctx context.Context, b *bed, p plan, rep *report) error {
	if err := callEach(ctx, b.c[:], "corral.group", func(i int) any {
		return corralGroupArgs{ID: defNode(i), Group: "stampede", TTL: p.TTL, ValueSize: p.ValueSize, Delay: p.LoaderDelay}
	}); err != nil {
		return err
	}
	if err := callEach(ctx, b.g[:], "gc.group", func(int) any {
		return gcGroupArgs{Group: "stampede", CacheBytes: 64 << 20, ValueSize: p.ValueSize, Delay: p.LoaderDelay}
	}); err != nil {
		return err
	}
	if err := callEach(ctx, b.c[:], "redis.dial", func(int) any {
		return redisDialArgs{Name: "st", Addr: b.redis.Addr, PoolSize: p.StampedeCallers}
	}); err != nil {
		return err
	}
	if wait := time.Until(b.formed.Add(p.Settle)); wait > 0 {
		fmt.Fprintf(b.log, "  waiting %v: the stampede measures corral past PeekWindow after the cluster formed\n", wait.Round(time.Second))
		if err := sleep(ctx, wait); err != nil {
			return err
		}
	}
	expire := func() error { return sleep(ctx, p.TTL+50*time.Millisecond) }
	for trial := range p.StampedeTrials {
		for _, strategy := range []string{"corral", "groupcache", "redis-naive", "redis-lock"} {
			var (
				ws      []*worker
				tg      func(i int) target
				key     string
				counter func(i int) string
			)
			switch strategy {
			case "corral":
				ws, key = b.c[:], "hot"
				tg = func(i int) target { return target{System: "corral", Node: defNode(i), Group: "stampede"} }
				counter = func(i int) string { return defNode(i) + "/stampede" }
				if err := b.c[0].call(ctx, "corral.get", nodeGroupKey{ID: defNode(0), Group: "stampede", Key: key}, nil); err != nil {
					return err
				}
				if err := expire(); err != nil {
					return err
				}
			case "groupcache":
				// groupcache has no expiry: the idiom is a new key per period ("hot#<period>"),
				// and a new period is what an expiry is.
				ws, key = b.g[:], fmt.Sprint("hot#", trial)
				tg = func(int) target { return target{System: "groupcache", Group: "stampede"} }
				counter = func(int) string { return "gc/stampede" }
			default:
				ws, key = b.c[:], "st:"+strategy
				tg = func(int) target {
					return target{System: strategy, Node: "st", Group: strategy, Delay: p.LoaderDelay,
						ValueSize: p.ValueSize, TTL: p.TTL, Poll: p.Poll}
				}
				counter = func(int) string { return "redis/" + strategy }
				if err := b.c[0].call(ctx, "redis.fill", redisFillArgs{Name: "st", Keys: []string{key}, ValueSize: p.ValueSize, TTL: p.TTL}, nil); err != nil {
					return err
				}
				if err := expire(); err != nil {
					return err
				}
			}
			st := rep.stampede[strategy]
			if st == nil {
				st = &stampedeStat{}
				rep.stampede[strategy] = st
			}
			before, err := loads(ctx, ws, counter)
			if err != nil {
				return err
			}
			if err := fire(ctx, ws, tg, key, p.StampedeCallers, 200*time.Millisecond, st); err != nil {
				return err
			}
			after, err := loads(ctx, ws, counter)
			if err != nil {
				return err
			}
			st.calls = append(st.calls, after-before)
		}
	}
	var owner string
	if err := b.c[0].call(ctx, "corral.owner", nodeGroupKey{ID: defNode(0), Key: "hot"}, &owner); err != nil {
		return err
	}
	for _, sys := range []struct {
		name  string
		owner func(i int) bool
	}{
		{"corral", func(i int) bool { return defNode(i) == owner }},
		{"groupcache", func(int) bool { return false }}, // a new key each trial: owners differ
	} {
		st := rep.stampede[sys.name]
		var parts []string
		for i := range nodes {
			mark := ""
			if sys.owner(i) {
				mark = " (owner)"
			}
			parts = append(parts, fmt.Sprintf("node %d%s %s", i, mark, us(quantileOf(st.byNode[i], 0.99))))
		}
		rep.note("stampede, %s: waiter p99 by node: %s.", sys.name, strings.Join(parts, ", "))
	}
	return nil
}

// fillCostStat is what fills cost one owner with some backups: each fill's latency, and the
// owner process's write system calls and bytes written over all of them.
type fillCostStat struct {
	lat                  []time.Duration
	writes, wbytes, sent int64
}

// measureFillCost fills cold keys one after the other on their owner (defNode(0), in c0),
// whose loader answers at once, in a group without backups and in one with one backup,
// alternating, two rounds each: the latency of a fill, and the owner's peer traffic per fill
// (its write system calls and bytes written, from /proc/PID/io: TCP, so the peer streams and
// not the gossip's UDP).
func measureFillCost(ctx context.Context, b *bed, p plan, rep *report) error {
	for _, backups := range []int{0, 1} {
		if err := callEach(ctx, b.c[:], "corral.group", func(i int) any {
			return corralGroupArgs{ID: defNode(i), Group: fmt.Sprint("fill", backups), TTL: time.Hour, ValueSize: p.ValueSize, Backups: backups}
		}); err != nil {
			return err
		}
		rep.fillCost[backups] = &fillCostStat{}
	}
	for round := range 2 {
		for _, backups := range []int{0, 1} {
			st := rep.fillCost[backups]
			before := b.syscalls()["c0"]
			var res fillCostResult
			if err := b.c[0].call(ctx, "corral.fillcost", fillCostArgs{ID: defNode(0), Group: fmt.Sprint("fill", backups),
				Prefix: fmt.Sprintf("fill%d:%d:", backups, round), N: p.FillKeys}, &res); err != nil {
				return err
			}
			after := b.syscalls()["c0"]
			st.lat = append(st.lat, res.Lat...)
			st.writes += after.writes - before.writes
			st.wbytes += after.wbytes - before.wbytes
			st.sent += int64(res.BackupsSent)
		}
	}
	return nil
}

// 4. Owner crash: SIGKILL the process that owns a hot key, then stampede from the survivors
// at once, before failure detection has noticed: every survivor's ring still names the dead
// owner. corral runs it twice on one kill: a group without backups, then one with one backup
// (its burst right after the first one's). Before the kill, what a fill with one backup costs
// against one without (measureFillCost).
func measureCrash(ctx context.Context, b *bed, p plan, rep *report) error {
	if err := measureFillCost(ctx, b, p, rep); err != nil {
		return err
	}
	if err := callEach(ctx, b.c[:], "corral.group", func(i int) any {
		return corralGroupArgs{ID: defNode(i), Group: "crash", TTL: time.Hour, ValueSize: p.ValueSize, Delay: p.LoaderDelay}
	}); err != nil {
		return err
	}
	if err := callEach(ctx, b.c[:], "corral.group", func(i int) any {
		return corralGroupArgs{ID: defNode(i), Group: "crash-backups", TTL: time.Hour, ValueSize: p.ValueSize, Delay: p.LoaderDelay, Backups: 1}
	}); err != nil {
		return err
	}
	if err := callEach(ctx, b.g[:], "gc.group", func(int) any {
		return gcGroupArgs{Group: "crash", CacheBytes: 64 << 20, ValueSize: p.ValueSize, Delay: p.LoaderDelay}
	}); err != nil {
		return err
	}
	var ck []string
	if err := b.c[0].call(ctx, "corral.keys", corralKeysArgs{ID: defNode(0), Owner: defNode(nodes - 1), Prefix: "crash:", N: 1}, &ck); err != nil {
		return err
	}
	gk := gcKeys(b.gcURLs, b.gcURLs[nodes-1], "crash:", 1)
	// Filled on its owner, so no other node holds a near copy; with a backup, the owner's
	// successor holds it once the Get returns.
	if err := b.c[nodes-1].call(ctx, "corral.get", nodeGroupKey{ID: defNode(nodes - 1), Group: "crash-backups", Key: ck[0]}, nil); err != nil {
		return err
	}
	var killed time.Time
	for _, sys := range []string{"corral", "corral-backups", "groupcache"} {
		var (
			ws      []*worker
			tg      func(i int) target
			counter func(i int) string
			key     string
			victim  *worker
		)
		switch sys {
		case "corral":
			ws, victim, key = b.c[:nodes-1], b.c[nodes-1], ck[0]
			tg = func(i int) target { return target{System: "corral", Node: defNode(i), Group: "crash"} }
			counter = func(i int) string { return defNode(i) + "/crash" }
			// Filled on its owner, so no other node holds a near copy.
			if err := victim.call(ctx, "corral.get", nodeGroupKey{ID: defNode(nodes - 1), Group: "crash", Key: key}, nil); err != nil {
				return err
			}
		case "corral-backups":
			ws, victim, key = b.c[:nodes-1], nil, ck[0] // killed with "corral"
			tg = func(i int) target { return target{System: "corral", Node: defNode(i), Group: "crash-backups"} }
			counter = func(i int) string { return defNode(i) + "/crash-backups" }
		default:
			ws, victim, key = b.g[:nodes-1], b.g[nodes-1], gk[0]
			tg = func(int) target { return target{System: "groupcache", Group: "crash"} }
			counter = func(int) string { return "gc/crash" }
			if err := victim.call(ctx, "gc.get", gcGetArgs{Group: "crash", Key: key}, nil); err != nil {
				return err
			}
		}
		before, err := loads(ctx, ws, counter)
		if err != nil {
			return err
		}
		if victim != nil {
			victim.kill()
			killed = time.Now()
		}
		if sys == "corral-backups" {
			rep.crashGap = time.Since(killed)
		}
		st := &stampedeStat{}
		rep.crash[sys] = st
		if err := fire(ctx, ws, tg, key, p.StampedeCallers, 20*time.Millisecond, st); err != nil {
			return err
		}
		after, err := loads(ctx, ws, counter)
		if err != nil {
			return err
		}
		st.calls = append(st.calls, after-before)
	}
	return nil
}

// 5. Memory: live heap per entry at MemEntries entries, each system in a fresh process.
func measureMemory5(ctx context.Context, b *bed, p plan, rep *report) error {
	for _, sys := range []string{"otter", "otter-as-corral", "fill", "corral", "groupcache", "redis"} {
		w, err := launch("mem-" + sys)
		if err != nil {
			return err
		}
		if sys == "redis" {
			err = w.call(ctx, "redis.dial", redisDialArgs{Name: "mem", Addr: b.redis.Addr, PoolSize: 4}, nil)
		}
		var res memoryResult
		if err == nil {
			err = w.call(ctx, "memory", memoryArgs{System: sys, Entries: p.MemEntries, Redis: "mem"}, &res)
		}
		w.stop()
		if err != nil {
			return err
		}
		if res.Held != p.MemEntries {
			rep.note("memory, %s: holds %d entries of %d put", sys, res.Held, p.MemEntries)
		}
		rep.memory[sys] = res
	}
	return nil
}
