package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/golang/groupcache"
	"github.com/redis/go-redis/v9"

	"github.com/corralcache/corral"
)

// Step batch (rows 9 and 9b): a page of keys read at once.
//
// Row 9, a page of BatchKeys remote hits, each an op of a closed-loop load (load.go) whose
// "Get" is a whole page, a page of its own for each caller: corral's GetMany on the near-off cluster (the caller c0 owns none of
// the keys: half are c1's, half c2's); the same page as that many concurrent Gets; the page as
// that many concurrent groupcache Gets (the keys on g1 and g2); and one Redis MGET. Row 9b, a
// cold page of BatchKeys keys nobody holds, with a loader (a database query) of LoaderDelay:
// how many queries, and how many keys they loaded, per system — corral with a batch loader
// (WithBatchLoad), corral with a LoadFunc, groupcache, and Redis cache-aside (MGET, then one
// query for the keys it missed, then a pipeline of SETs) — for one caller, and for ColdCallers
// callers on each of the three nodes asking for the same page at once.

// pageSystems are row 9's systems, in the order the table shows them.
var pageSystems = []string{"corral-many", "corral-gets", "gc-gets", "redis-mget", "tcp-page"}

// coldSystems are row 9b's.
var coldSystems = []string{"corral-batch", "corral-single", "groupcache", "redis-mget-fill"}

// coldStat is what row 9b measured of one system in one mode ("one" caller, or "all").
type coldStat struct {
	queries, keys []int64 // loader calls and keys they loaded, one per trial
	owners        []int   // corral: the members that own the page's keys, one per trial
	lat           []time.Duration
	errs          int
	firstErr      string
}

// pager returns a getFunc that reads a page of t.PageKeys, and returns the bytes of its
// values. With PageSize 0 the page is all of PageKeys, whatever key the getFunc is given;
// else the key is a page's number n, and the page is PageKeys[n·PageSize:(n+1)·PageSize].
func (w *workerState) pager(t target) (getFunc, error) {
	read, err := w.pageReader(t)
	if err != nil {
		return nil, err
	}
	if t.PageSize == 0 {
		return func(ctx context.Context, _ string) (int, error) { return read(ctx, t.PageKeys) }, nil
	}
	return func(ctx context.Context, key string) (int, error) {
		n, err := strconv.Atoi(key)
		if err != nil || n < 0 || (n+1)*t.PageSize > len(t.PageKeys) {
			return 0, fmt.Errorf("no page %q of %d keys", key, t.PageSize)
		}
		return read(ctx, t.PageKeys[n*t.PageSize:(n+1)*t.PageSize])
	}, nil
}

// pageReader returns how t.System reads a page of keys.
func (w *workerState) pageReader(t target) (func(ctx context.Context, keys []string) (int, error), error) {
	switch t.System {
	case "corral-many", "corral-gets":
		g, err := state[*corral.Group[[]byte]](w, "corral/"+t.Node+"/"+t.Group)
		if err != nil {
			return nil, err
		}
		if t.System == "corral-many" {
			return func(ctx context.Context, keys []string) (int, error) {
				m, err := g.GetMany(ctx, keys)
				n := 0
				for _, v := range m {
					n += len(v)
				}
				if err == nil && len(m) != len(keys) {
					err = fmt.Errorf("GetMany found %d of %d keys", len(m), len(keys))
				}
				return n, err
			}, nil
		}
		return concurrently(func(ctx context.Context, key string) (int, error) {
			v, err := g.Get(ctx, key)
			return len(v), err
		}), nil
	case "tcp-page":
		t, err := state[*tcpPager](w, "tcp.pager")
		if err != nil {
			return nil, err
		}
		return t.read, nil
	case "gc-gets":
		g := groupcache.GetGroup(t.Group)
		if g == nil {
			return nil, errors.New("no groupcache group " + t.Group)
		}
		return concurrently(func(ctx context.Context, key string) (int, error) {
			var v groupcache.ByteView
			err := g.Get(ctx, key, groupcache.ByteViewSink(&v))
			return v.Len(), err
		}), nil
	case "redis-mget", "redis-mget-fill":
		rdb, err := state[*redis.Client](w, "redis/"+t.Node)
		if err != nil {
			return nil, err
		}
		fill := t.System == "redis-mget-fill"
		queries, loaded := w.counter("redis/"+t.Group), w.counter("redis/"+t.Group+"/keys")
		value := payload(t.ValueSize)
		return func(ctx context.Context, keys []string) (int, error) {
			vals, err := rdb.MGet(ctx, keys...).Result()
			if err != nil {
				return 0, err
			}
			n := 0
			var missed []string
			for i, v := range vals {
				s, ok := v.(string)
				if !ok {
					missed = append(missed, keys[i])
					continue
				}
				n += len(s)
			}
			if len(missed) == 0 {
				return n, nil
			}
			if !fill {
				return n, fmt.Errorf("MGET missed %d of %d keys", len(missed), len(keys))
			}
			// Cache-aside: one query for every key the MGET missed, then store them.
			queries.Add(1)
			loaded.Add(int64(len(missed)))
			if err := sleep(ctx, t.Delay); err != nil {
				return n, err
			}
			p := rdb.Pipeline()
			for _, k := range missed {
				p.Set(ctx, k, value, t.TTL)
			}
			_, err = p.Exec(ctx)
			return n + len(missed)*len(value), err
		}, nil
	}
	return nil, fmt.Errorf("unknown page system %q", t.System)
}

// concurrently reads each key of a page with get, all at once, as a caller without a batch
// API reads a page: the page's bytes, and the first error.
func concurrently(get getFunc) func(ctx context.Context, keys []string) (int, error) {
	return func(ctx context.Context, keys []string) (int, error) {
		var wg sync.WaitGroup
		sizes := make([]int, len(keys))
		errs := make([]error, len(keys))
		for i, k := range keys {
			wg.Go(func() { sizes[i], errs[i] = get(ctx, k) })
		}
		wg.Wait()
		n := 0
		for _, s := range sizes {
			n += s
		}
		return n, errors.Join(errs...)
	}
}

func init() {
	// corral.owners answers how many members own keys, in a node's view.
	ops["corral.owners"] = func(_ context.Context, w *workerState, raw json.RawMessage) (any, error) {
		var a struct {
			ID   string
			Keys []string
		}
		if err := json.Unmarshal(raw, &a); err != nil {
			return nil, err
		}
		n, err := state[*corral.Node](w, "corral/"+a.ID)
		if err != nil {
			return nil, err
		}
		owners := map[string]bool{}
		for _, k := range a.Keys {
			owners[n.Owner(k).Name] = true
		}
		return len(owners), nil
	}
}

// pageKeys returns n keys for a cold page: prefix and a number.
func pageKeys(prefix string, n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("%s%04d", prefix, i)
	}
	return keys
}

// measureBatch is the batch step: rows 9 and 9b.
func measureBatch(ctx context.Context, b *bed, p plan, rep *report) error {
	for _, g := range []corralGroupArgs{
		{Group: "batch", TTL: time.Hour, ValueSize: p.ValueSize},
		{Group: "cold-batch", TTL: time.Hour, ValueSize: p.ValueSize, Delay: p.LoaderDelay, Batch: true},
		{Group: "cold-single", TTL: time.Hour, ValueSize: p.ValueSize, Delay: p.LoaderDelay},
	} {
		if err := callEach(ctx, b.c[:], "corral.group", func(i int) any { g.ID = rawNode(i); return g }); err != nil {
			return err
		}
	}
	// As in row 2, the caller's groupcache gets little room, so that its hot cache holds few
	// of the page's keys and the row measures the fetches from their owners.
	if err := callEach(ctx, b.g[:], "gc.group", func(i int) any {
		cb := int64(256 << 20)
		if i == 0 {
			cb = 1 << 10
		}
		return gcGroupArgs{Group: "batch", CacheBytes: cb, ValueSize: p.ValueSize}
	}); err != nil {
		return err
	}
	if err := callEach(ctx, b.g[:], "gc.group", func(int) any {
		return gcGroupArgs{Group: "cold", CacheBytes: 64 << 20, ValueSize: p.ValueSize, Delay: p.LoaderDelay}
	}); err != nil {
		return err
	}
	for i := range nodes {
		if err := b.c[i].call(ctx, "redis.dial", redisDialArgs{Name: "batch", Addr: b.redis.Addr, PoolSize: max(p.ColdCallers, 16)}, nil); err != nil {
			return err
		}
	}

	// Row 9: a page for each caller, no two alike (concurrent reads of one key would
	// coalesce on the caller's node, as in row 2); each page half owned by c1 and half by c2
	// (g1 and g2 for groupcache).
	maxCallers := slices.Max(p.BatchCallers)
	half := p.BatchKeys / 2
	var c1, c2 []string
	for _, o := range []struct {
		owner int
		keys  *[]string
	}{{1, &c1}, {2, &c2}} {
		if err := b.c[0].call(ctx, "corral.keys", corralKeysArgs{ID: rawNode(0), Owner: rawNode(o.owner), Prefix: fmt.Sprint("page", o.owner, ":"), N: maxCallers * half}, o.keys); err != nil {
			return err
		}
	}
	g1 := gcKeys(b.gcURLs, b.gcURLs[1], "page1:", maxCallers*half)
	g2 := gcKeys(b.gcURLs, b.gcURLs[2], "page2:", maxCallers*(p.BatchKeys-half))
	var pages, gcPages []string
	for c := range maxCallers {
		pages = append(append(pages, c1[c*half:(c+1)*half]...), c2[c*half:(c+1)*half]...)
		gcPages = append(append(gcPages, g1[c*half:(c+1)*half]...), g2[c*(p.BatchKeys-half):(c+1)*(p.BatchKeys-half)]...)
	}
	if err := b.c[0].call(ctx, "redis.fill", redisFillArgs{Name: "batch", Keys: pages, ValueSize: p.ValueSize}, nil); err != nil {
		return err
	}
	// The page floor's servers stand in for c1 and c2, each answering its half of a page.
	floor := make([]string, 2)
	for i, share := range []int{half, p.BatchKeys - half} {
		if err := b.c[i+1].call(ctx, "tcp.page.start", share*p.ValueSize, &floor[i]); err != nil {
			return err
		}
	}
	if err := b.c[0].call(ctx, "tcp.page.dial", floor, nil); err != nil {
		return err
	}
	pageNumbers := make([]string, maxCallers)
	for i := range pageNumbers {
		pageNumbers[i] = strconv.Itoa(i)
	}
	runs := map[string]remoteRun{}
	for _, sys := range pageSystems {
		r := remoteRun{row: sys, w: b.c[0], t: target{System: sys, Node: rawNode(0), Group: "batch", PageKeys: pages, PageSize: p.BatchKeys},
			keys: pageNumbers, deal: onePerCaller}
		switch sys {
		case "gc-gets":
			r.w, r.t = b.g[0], target{System: sys, Group: "batch", PageKeys: gcPages, PageSize: p.BatchKeys}
		case "redis-mget":
			r.t.Node = "batch"
		}
		runs[sys] = r
	}
	want := p.BatchKeys * p.ValueSize
	for _, sys := range pageSystems { // warm up: owners hold the keys, connections are open
		if _, err := pageLoad(ctx, runs[sys], maxCallers, 4*maxCallers, time.Minute, want); err != nil {
			return fmt.Errorf("warm-up of %s: %w", sys, err)
		}
	}
	var gc0, gc1 gcStats
	if err := b.g[0].call(ctx, "gc.stats", "batch", &gc0); err != nil {
		return err
	}
	for round := range p.BatchRounds {
		for ci, callers := range p.BatchCallers {
			for k := range pageSystems {
				sys := pageSystems[(k+round+ci)%len(pageSystems)]
				key := fmt.Sprintf("%s/%d", sys, callers)
				var stop func(context.Context) error
				if p.ProfileDir != "" && round == 0 && sys == "corral-many" {
					var err error
					if stop, err = startProfiles(ctx, p.ProfileDir, fmt.Sprintf("%s-%d", sys, callers), b.c[0], b.c[1], b.c[2]); err != nil {
						return err
					}
				}
				cpu0 := b.cpu()
				res, err := pageLoad(ctx, runs[sys], callers, p.BatchMaxOps, p.BatchDuration, want)
				if stop != nil {
					if err := stop(ctx); err != nil {
						return err
					}
				}
				if err != nil && res.Ops == 0 {
					return fmt.Errorf("%s, %d callers: %w", sys, callers, err)
				}
				st := rep.batch[key]
				if st == nil {
					st = &remoteStat{lat: newHist()}
					rep.batch[key] = st
				}
				st.cpu += b.cpu() - cpu0
				st.lat.merge(res.Lat)
				st.ops += res.Ops
				st.errs += res.Errors
				st.elapsed += res.Elapsed
				if st.firstErr == "" {
					st.firstErr = res.FirstErr
				}
			}
		}
	}
	if err := b.g[0].call(ctx, "gc.stats", "batch", &gc1); err != nil {
		return err
	}
	if gets := gc1.Gets - gc0.Gets; gets > 0 {
		rep.note("groupcache, row 9: %.1f %% of %d Gets were fetched from the owner over HTTP, %.1f %% were hot-cache hits on the caller.",
			100*float64(gc1.PeerLoads-gc0.PeerLoads)/float64(gets), gets, 100*float64(gc1.HotHits-gc0.HotHits)/float64(gets))
	}

	// Row 9b: cold pages.
	for trial := range p.ColdTrials {
		for _, mode := range []string{"one", "all"} {
			for _, sys := range coldSystems {
				if err := coldPage(ctx, b, p, rep, sys, mode, trial); err != nil {
					return fmt.Errorf("cold page, %s, %s: %w", sys, mode, err)
				}
			}
		}
	}
	return nil
}

// pageLoad runs a closed-loop load of pages: callers callers, each reading the page back to
// back, until maxOps pages or d.
func pageLoad(ctx context.Context, r remoteRun, callers, maxOps int, d time.Duration, want int) (loadResult, error) {
	var res loadResult
	ctx, cancel := context.WithTimeout(ctx, d+time.Minute)
	defer cancel()
	err := r.w.call(ctx, "load", loadArgs{target: r.t, Keys: r.deal(r.keys, callers), Callers: callers,
		MaxOps: maxOps, Duration: d, WantLen: want}, &res)
	if err == nil && res.Errors > 0 {
		err = fmt.Errorf("%d of %d pages failed, first: %s", res.Errors, res.Ops, res.FirstErr)
	}
	return res, err
}

// coldPage reads a page of keys nobody holds with sys: by one caller on the first node
// (mode "one"), or by ColdCallers callers on every node at once ("all"), and records the
// loader calls (queries) and keys loaded it cost.
func coldPage(ctx context.Context, b *bed, p plan, rep *report, sys, mode string, trial int) error {
	keys := pageKeys(fmt.Sprintf("cold-%s-%s-%d:", sys, mode, trial), p.BatchKeys)
	var (
		ws       []*worker
		tg       func(i int) target
		counter  func(i int) string
		loadKeys func(i int) string
	)
	switch sys {
	case "corral-batch", "corral-single":
		group := strings.TrimPrefix(sys, "corral-")
		ws = b.c[:]
		tg = func(i int) target {
			return target{System: "corral-many", Node: rawNode(i), Group: "cold-" + group, PageKeys: keys}
		}
		counter = func(i int) string { return rawNode(i) + "/cold-" + group }
		loadKeys = func(i int) string { return rawNode(i) + "/cold-" + group + "/keys" }
	case "groupcache":
		ws = b.g[:]
		tg = func(int) target { return target{System: "gc-gets", Group: "cold", PageKeys: keys} }
		counter = func(int) string { return "gc/cold" }
		loadKeys = counter // one key a call
	case "redis-mget-fill":
		ws = b.c[:]
		tg = func(int) target {
			return target{System: sys, Node: "batch", Group: "cold", PageKeys: keys, Delay: p.LoaderDelay, ValueSize: p.ValueSize, TTL: time.Hour}
		}
		counter = func(int) string { return "redis/cold" }
		loadKeys = func(int) string { return "redis/cold/keys" }
	}
	// The callers run on every node, or one on the first; the loads are counted on every node,
	// where the keys' owners load them.
	callers, on := p.ColdCallers, ws
	if mode == "one" {
		callers, on = 1, ws[:1]
	}
	q0, err := loads(ctx, ws, counter)
	if err != nil {
		return err
	}
	k0, err := loads(ctx, ws, loadKeys)
	if err != nil {
		return err
	}
	st := &stampedeStat{}
	if err := fire(ctx, on, tg, "page", callers, 200*time.Millisecond, st); err != nil {
		return err
	}
	q1, err := loads(ctx, ws, counter)
	if err != nil {
		return err
	}
	k1, err := loads(ctx, ws, loadKeys)
	if err != nil {
		return err
	}
	key := sys + "/" + mode
	cs := rep.cold[key]
	if cs == nil {
		cs = &coldStat{}
		rep.cold[key] = cs
	}
	cs.queries = append(cs.queries, q1-q0)
	cs.keys = append(cs.keys, k1-k0)
	cs.lat = append(cs.lat, st.lat...)
	cs.errs += st.errs
	if cs.firstErr == "" {
		cs.firstErr = st.firstErr
	}
	if strings.HasPrefix(sys, "corral") {
		var owners int
		if err := b.c[0].call(ctx, "corral.owners", map[string]any{"ID": rawNode(0), "Keys": keys}, &owners); err != nil {
			return err
		}
		cs.owners = append(cs.owners, owners)
	}
	return nil
}

// batchCell is one system's cell of row 9: p50 / p99 per page · pages per second · CPU per
// page.
func (r *report) batchCell(key string) string {
	st, ok := r.batch[key]
	if !ok || st.ops == 0 {
		return "–"
	}
	s := fmt.Sprintf("%s / %s · %s pages/s · %s CPU", us(st.lat.quantile(0.5)), us(st.lat.quantile(0.99)),
		strings.TrimSuffix(rate(st.ops, st.elapsed), "/s"), us(st.cpu/time.Duration(st.ops)))
	if st.errs > 0 {
		s += fmt.Sprintf(" · %d errors (%s)", st.errs, st.firstErr)
	}
	return s
}

// pageRate is pages per second of key, 0 if it did not run.
func (r *report) pageRate(key string) float64 {
	st, ok := r.batch[key]
	if !ok || st.ops == 0 || st.elapsed <= 0 {
		return 0
	}
	return float64(st.ops) / st.elapsed.Seconds()
}

func (r *report) pageP50(key string) float64 {
	st, ok := r.batch[key]
	if !ok || st.ops == 0 {
		return 0
	}
	return float64(st.lat.quantile(0.5))
}

// coldCell is one system's cell of row 9b.
func (r *report) coldCell(sys string) string {
	var parts []string
	for _, mode := range []string{"one", "all"} {
		cs := r.cold[sys+"/"+mode]
		if cs == nil {
			return "–"
		}
		what := "1 caller"
		if mode == "all" {
			what = fmt.Sprintf("%d × %d callers at once", nodes, r.plan.ColdCallers)
		}
		s := fmt.Sprintf("%s: %s queries, %s keys loaded, page p50 %s", what, joinInts(cs.queries), joinInts(cs.keys),
			us(quantileOf(slices.Clone(cs.lat), 0.5)))
		if len(cs.owners) > 0 {
			s += fmt.Sprintf(" (keys on %s owners)", joinInts(cs.owners))
		}
		if cs.errs > 0 {
			s += fmt.Sprintf(" · %d errors (%s)", cs.errs, cs.firstErr)
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}

func joinInts[T int | int64](xs []T) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprint(x)
	}
	return strings.Join(parts, ", ")
}

// 9. Batch reads.
func (r *report) batchRows() []row {
	p := r.plan
	var rows []row
	for _, c := range p.BatchCallers {
		k := func(sys string) string { return fmt.Sprintf("%s/%d", sys, c) }
		many, gets, mget, floor := r.pageP50(k("corral-many")), r.pageP50(k("corral-gets")), r.pageP50(k("redis-mget")), r.pageP50(k("tcp-page"))
		tput := 0.0
		if g := r.pageRate(k("corral-gets")); g > 0 {
			tput = r.pageRate(k("corral-many")) / g
		}
		rows = append(rows, row{
			what: fmt.Sprintf("9 · a page of %d remote hits (owned by the two other nodes, near cache off), callers: %d — p50 / p99 per page · pages per second · CPU per page (all processes)",
				p.BatchKeys, c),
			corral: "`GetMany`: " + r.batchCell(k("corral-many")),
			baseline: fmt.Sprintf("%d concurrent `Group.Get`s: %s; raw TCP floor (each owner's half of the page, canned, both asked at once): %s",
				p.BatchKeys, r.batchCell(k("corral-gets")), r.batchCell(k("tcp-page"))),
			groupcache: fmt.Sprintf("%d concurrent `Get`s: %s", p.BatchKeys, r.batchCell(k("gc-gets"))),
			redis:      "one `MGET`: " + r.batchCell(k("redis-mget")),
			goal:       fmt.Sprintf("`GetMany` p50 ≤ 1.0× Redis `MGET`; throughput ≥ 5× %d concurrent Gets", p.BatchKeys),
			verdict: fmt.Sprintf("p50 ≤ `MGET`: %s (%s); throughput ≥ 5× Gets: %s (%.2f×); p50 against the Gets: %s, against the floor: %s (the floor against `MGET`: %s)",
				yes(many > 0 && many <= mget), ratio(many, mget), yes(tput >= 5), tput, ratio(many, gets), ratio(many, floor), ratio(floor, mget)),
		})
	}
	// Met when, in every trial of both modes, the batch loader ran at most once per owner of
	// the page's keys and loaded each key once.
	ok := r.cold["corral-batch/one"] != nil && r.cold["corral-batch/all"] != nil
	for _, mode := range []string{"one", "all"} {
		cs := r.cold["corral-batch/"+mode]
		for i := 0; ok && i < len(cs.queries); i++ {
			ok = cs.queries[i] <= int64(cs.owners[i]) && cs.keys[i] == int64(p.BatchKeys)
		}
	}
	median := func(sys, mode string) string {
		cs := r.cold[sys+"/"+mode]
		if cs == nil || len(cs.queries) == 0 {
			return "–"
		}
		q := slices.Clone(cs.queries)
		slices.Sort(q)
		return fmt.Sprint(q[len(q)/2])
	}
	summary := fmt.Sprintf("median queries, 1 caller / %d at once: batch loader %s / %s, `LoadFunc` %s / %s, groupcache %s / %s, Redis cache-aside %s / %s",
		nodes*p.ColdCallers, median("corral-batch", "one"), median("corral-batch", "all"), median("corral-single", "one"), median("corral-single", "all"),
		median("groupcache", "one"), median("groupcache", "all"), median("redis-mget-fill", "one"), median("redis-mget-fill", "all"))
	rows = append(rows, row{
		what: fmt.Sprintf("9b · a cold page: %d keys nobody holds, a %v loader (a database query); queries and keys loaded in the cluster, per trial",
			p.BatchKeys, p.LoaderDelay),
		corral:     "with `WithBatchLoad`: " + r.coldCell("corral-batch"),
		baseline:   "corral with a `LoadFunc` (`GetMany`): " + r.coldCell("corral-single"),
		groupcache: fmt.Sprintf("%d concurrent `Get`s: %s", p.BatchKeys, r.coldCell("groupcache")),
		redis:      "cache-aside: `MGET`, one query for the keys it missed, `SET`s: " + r.coldCell("redis-mget-fill"),
		goal:       "with `WithBatchLoad`: one query per owner, each key loaded once",
		verdict:    yes(ok) + ": " + summary,
	})
	return rows
}
