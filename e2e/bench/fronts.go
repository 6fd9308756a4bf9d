package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// 7. corral serve's HTTP front against Varnish and nginx, and 8. its Redis protocol front
// against Redis: the servers a platform engineer would put in front of an origin instead,
// measured with the tools their users measure them with (wrk, redis-benchmark), load
// generator beside the servers.

// frontStat is what the rows of steps 7 and 8 keep of one system under one load: each
// repetition's result, so that the row shows medians.
type frontStat struct {
	wrk   []wrkResult
	redis []redisBenchResult
}

func (r *report) front(key string) *frontStat {
	st := r.fronts[key]
	if st == nil {
		st = &frontStat{}
		r.fronts[key] = st
	}
	return st
}

// command records a command line the run used, for RESULTS.md.
func (r *report) command(what, line string) {
	for _, c := range r.commands {
		if c[0] == what {
			return
		}
	}
	r.commands = append(r.commands, [2]string{what, line})
}

// httpLoads are the wrk loads of row 7: 1 connection, and 64 over 2 threads.
var httpLoads = []struct{ threads, conns int }{{1, 1}, {2, 64}}

// measureHTTP is row 7: a hit of one 512-byte key through corral serve, Varnish and nginx at
// 1 and 64 connections, then the peer-hop row: random keys of HopKeys through one node of a
// 3-node cluster (two thirds owned by the others), against the same through a node alone.
func measureHTTP(ctx context.Context, _ *bed, p plan, rep *report) error {
	fb, err := startFrontBed(ctx, p, "one", false)
	if err != nil {
		return err
	}
	defer fb.stop()
	dir, bin, o, one := fb.dir, fb.bin, fb.origin, fb.node
	rep.command("corral serve", "corral "+shellJoin(one.args))
	nginx, err := startNginx(ctx, dir, o)
	if err != nil {
		return err
	}
	stopNginx := sync.OnceFunc(nginx.stop)
	defer stopNginx()
	rep.command("nginx", "nginx -c nginx.conf -p DIR: "+nginxSummary)
	varnish, err := startVarnish(ctx, dir, o)
	if err != nil {
		return err
	}
	stopVarnish := sync.OnceFunc(varnish.stop)
	defer stopVarnish()
	rep.command("varnishd", strings.ReplaceAll("varnishd "+shellJoin(varnish.args), dir, "DIR"))

	urls := map[string]string{
		"corral":  "http://" + one.http + "/v1/groups/items/keys/k",
		"varnish": "http://" + varnish.addr + "/items/k",
		"nginx":   "http://" + nginx.addr + "/items/k",
	}
	for sys, url := range urls {
		if err := warmHit(ctx, sys, url); err != nil {
			return err
		}
	}
	procs := map[string]*proc{"corral": one.proc, "varnish": varnish.proc, "nginx": nginx.proc}
	systems := []string{"corral", "varnish", "nginx"}
	for round := range p.FrontReps {
		for li, l := range httpLoads {
			for k := range systems {
				sys := systems[(k+round+li)%len(systems)] // no system always first or last
				args := wrkArgs(l.threads, l.conns, p.FrontDuration, urls[sys], "")
				cpu0 := procs[sys].cpu()
				res, err := runWrk(ctx, p.FrontDuration, args)
				if err != nil {
					return err
				}
				if res.Requests > 0 {
					res.CPU = (procs[sys].cpu() - cpu0) / time.Duration(res.Requests)
				}
				rep.command(fmt.Sprintf("wrk, %d connection(s), %s", l.conns, sys), "wrk "+shellJoin(args))
				st := rep.front(fmt.Sprintf("http/%s/%d", sys, l.conns))
				st.wrk = append(st.wrk, res)
			}
		}
	}
	stopNginx()
	stopVarnish()
	return measureHops(ctx, dir, bin, o, one, p, rep)
}

// frontBed is what rows 7 and 8 start first: a temporary directory, corral serve built into
// it, the origin, and one node.
type frontBed struct {
	dir, bin string
	origin   *origin
	node     *corralServe
}

// startFrontBed starts a frontBed whose node is called name, with the Redis protocol on when
// withRESP.
func startFrontBed(ctx context.Context, p plan, name string, withRESP bool) (fb *frontBed, err error) {
	fb = &frontBed{}
	defer func() {
		if err != nil {
			fb.stop()
		}
	}()
	if fb.dir, err = os.MkdirTemp("", "corral-bench-"+name+"-"); err != nil {
		return fb, err
	}
	if fb.bin, err = buildCorral(ctx, fb.dir); err != nil {
		return fb, err
	}
	if fb.origin, err = startOrigin(p.FrontValue); err != nil {
		return fb, err
	}
	fb.node, err = startCorralServe(ctx, fb.bin, name, fb.origin, "", withRESP)
	return fb, err
}

// stop stops what startFrontBed started.
func (fb *frontBed) stop() {
	if fb.node != nil {
		fb.node.stop()
	}
	if fb.origin != nil {
		fb.origin.stop()
	}
	if fb.dir != "" {
		os.RemoveAll(fb.dir)
	}
}

// nginxSummary says how nginx is set up (nginx.conf in startNginx).
const nginxSummary = "worker_processes auto; proxy_cache (keys_zone 32m, max_size 1g) with proxy_cache_lock on, proxy_cache_valid 200 1h; upstream keepalive 64; access_log off"

// warmHit asks url twice and checks that the second answer is a hit, as each system says it.
func warmHit(ctx context.Context, sys, url string) error { return warmTo(ctx, sys, url, "hit", 2) }

// warmTo asks url up to n times, until corral answers it from source (X-Corral-Source); it
// checks the last answer as warmHit does for the other systems.
func warmTo(ctx context.Context, sys, url, source string, n int) error {
	var h http.Header
	for i := range n {
		if i >= 2 && (sys != "corral" || h.Get("X-Corral-Source") == source) {
			break
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return fmt.Errorf("%s: %w", sys, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: GET %s: %s", sys, url, resp.Status)
		}
		h = resp.Header
	}
	hit := true
	switch sys {
	case "corral":
		hit = h.Get("X-Corral-Source") == source
	case "varnish":
		hit = len(strings.Fields(h.Get("X-Varnish"))) == 2 // the request's id and the object's
	}
	if !hit {
		return fmt.Errorf("%s: GET %s did not become a %s: %v", sys, url, source, h)
	}
	return nil
}

// measureHops is row 7c: wrk at 64 connections asking for random keys of HopKeys through
// node one alone, and through a node of a 3-node cluster, each warmed with every key first.
func measureHops(ctx context.Context, dir, bin string, o *origin, one *corralServe, p plan, rep *report) error {
	var cluster []*corralServe
	defer func() {
		for _, c := range cluster {
			c.stop()
		}
	}()
	for i := range nodes {
		seed := ""
		if i > 0 {
			seed = cluster[0].gossip
		}
		c, err := startCorralServe(ctx, bin, fmt.Sprint("hop", i), o, seed, false)
		if err != nil {
			return err
		}
		cluster = append(cluster, c)
	}
	if err := waitServeMembers(ctx, cluster); err != nil {
		return err
	}
	script, err := randomKeysScript(dir)
	if err != nil {
		return err
	}
	targets := map[string]string{
		"one":   "http://" + one.http + "/v1/groups/hops/keys/",
		"three": "http://" + cluster[0].http + "/v1/groups/hops/keys/",
	}
	for _, base := range targets {
		if err := warmKeys(ctx, base, p.HopKeys); err != nil {
			return err
		}
	}
	// Row 7d: one hot key that another node owns, through the node of 3 (its near copy) and
	// through the node alone (its own value).
	hot, err := keyOwnedElsewhere(ctx, cluster[0], p.HopKeys)
	if err != nil {
		return err
	}
	if err := warmHit(ctx, "corral", targets["one"]+hot); err != nil {
		return err
	}
	if err := warmTo(ctx, "corral", targets["three"]+hot, "near", 5); err != nil {
		return err
	}
	targets["hot-one"], targets["hot-three"] = targets["one"]+hot, targets["three"]+hot
	for round := range p.FrontReps {
		for k, name := range []string{"one", "three", "hot-one", "hot-three"} {
			if round%2 == 1 {
				name = []string{"three", "one", "hot-three", "hot-one"}[k]
			}
			args := wrkArgs(2, 64, p.FrontDuration, targets[name], script, "/v1/groups/hops/keys/", fmt.Sprint(p.HopKeys))
			if strings.HasPrefix(name, "hot-") {
				args = wrkArgs(2, 64, p.FrontDuration, targets[name], "")
			}
			nodes := []*corralServe{one}
			if strings.HasSuffix(name, "three") {
				nodes = cluster
			}
			cpu := func() (t time.Duration) {
				for _, n := range nodes {
					t += n.cpu()
				}
				return t
			}
			cpu0 := cpu()
			res, err := runWrk(ctx, p.FrontDuration, args)
			if err != nil {
				return err
			}
			if res.Requests > 0 {
				res.CPU = (cpu() - cpu0) / time.Duration(res.Requests)
			}
			if strings.HasPrefix(name, "hot-") {
				rep.command("wrk, a hot key owned elsewhere", "wrk "+shellJoin(args))
			} else {
				rep.command("wrk, random keys", strings.ReplaceAll("wrk "+shellJoin(args), dir, "DIR")+"   (random-keys.lua: GET PREFIX..k, k uniform in [0, N))")
			}
			st := rep.front("hops/" + name)
			st.wrk = append(st.wrk, res)
		}
	}
	return nil
}

// keyOwnedElsewhere returns the first of the keys 0 … n-1 that node does not own, as its
// /v1/cluster?key= says.
func keyOwnedElsewhere(ctx context.Context, node *corralServe, n int) (string, error) {
	for k := range n {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://%s/v1/cluster?key=%d", node.http, k), nil)
		if err != nil {
			return "", err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return "", err
		}
		var c struct{ Self, Owner string }
		err = json.NewDecoder(resp.Body).Decode(&c)
		resp.Body.Close()
		if err != nil {
			return "", fmt.Errorf("/v1/cluster?key=%d: %w", k, err)
		}
		if c.Owner != "" && c.Owner != c.Self {
			return fmt.Sprint(k), nil
		}
	}
	return "", fmt.Errorf("%s owns every key of %d", node.name, n)
}

// waitServeMembers waits until every node's /v1/cluster shows them all.
func waitServeMembers(ctx context.Context, cs []*corralServe) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		all := true
		for _, c := range cs {
			var n int
			if err := getJSONMembers(ctx, "http://"+c.http+"/v1/cluster", &n); err != nil || n != len(cs) {
				all = false
			}
		}
		if all {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("corral serve nodes did not see %d members within 30 s", len(cs))
		}
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
}

func getJSONMembers(ctx context.Context, url string, n *int) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	*n = strings.Count(string(b), `"gossip_addr"`)
	return nil
}

// warmKeys GETs base+k for every k in [0, n), 16 at a time: each fills once.
func warmKeys(ctx context.Context, base string, n int) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	tr := &http.Transport{MaxIdleConnsPerHost: 16}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	var next atomic.Int64
	errs := make([]error, 16)
	var wg sync.WaitGroup
	for w := range errs {
		wg.Go(func() {
			for k := next.Add(1) - 1; k < int64(n) && ctx.Err() == nil; k = next.Add(1) - 1 {
				resp, err := c.Get(fmt.Sprint(base, k))
				if err != nil {
					errs[w] = err
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					errs[w] = fmt.Errorf("GET %s%d: %s", base, k, resp.Status)
					return
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return fmt.Errorf("warming %d keys: %w", n, err)
		}
	}
	return ctx.Err()
}

// respDepths are the pipeline depths of row 8.
var respDepths = []int{1, 16}

// measureRESP is row 8: redis-benchmark's SET and GET of 1000 keys with 512-byte values at 50
// connections, pipelines of 1 and 16, against corral serve's Redis protocol front and Redis.
func measureRESP(ctx context.Context, _ *bed, p plan, rep *report) error {
	fb, err := startFrontBed(ctx, p, "resp", true)
	if err != nil {
		return err
	}
	defer fb.stop()
	c := fb.node
	rep.command("corral serve (Redis protocol)", "corral "+shellJoin(c.args))
	r, err := startRedis(ctx)
	if err != nil {
		return err
	}
	defer r.stop()
	rep.command("redis-server", "redis-server "+shellJoin(redisServerArgs))
	addrs := map[string]string{"corral": c.resp, "redis": r.Addr}
	systems := []string{"corral", "redis"}
	for round := range p.FrontReps {
		for di, depth := range respDepths {
			for k := range systems {
				sys := systems[(k+round+di)%len(systems)]
				// SET runs first and writes the 1000 keys GET then reads: every GET hits.
				args := redisBenchArgs(addrs[sys], "set,get", p.RESPRequests[di], 50, depth, p.FrontValue)
				res, err := runRedisBenchmark(ctx, args)
				if err != nil {
					return err
				}
				rep.command(fmt.Sprintf("redis-benchmark -P%d, %s", depth, sys), "redis-benchmark "+shellJoin(args))
				for _, test := range []string{"get", "set"} {
					got, ok := res[test]
					if !ok {
						return fmt.Errorf("redis-benchmark against %s: no %s result", sys, test)
					}
					st := rep.front(fmt.Sprintf("resp/%s/%s/%d", sys, test, depth))
					st.redis = append(st.redis, got)
				}
			}
		}
	}
	return nil
}

// medianOf is the median of f over xs.
func medianOf[T any](xs []T, f func(T) float64) float64 {
	vs := make([]float64, len(xs))
	for i, x := range xs {
		vs[i] = f(x)
	}
	if len(vs) == 0 {
		return 0
	}
	slices.Sort(vs)
	return vs[len(vs)/2]
}

// frontWrk is the median of each figure of the runs of key.
func (r *report) frontWrk(key string) (wrkResult, bool) {
	st, ok := r.fronts[key]
	if !ok || len(st.wrk) == 0 {
		return wrkResult{}, false
	}
	return wrkResult{
		RPS:    medianOf(st.wrk, func(w wrkResult) float64 { return w.RPS }),
		P50:    time.Duration(medianOf(st.wrk, func(w wrkResult) float64 { return float64(w.P50) })),
		P99:    time.Duration(medianOf(st.wrk, func(w wrkResult) float64 { return float64(w.P99) })),
		Errors: int64(medianOf(st.wrk, func(w wrkResult) float64 { return float64(w.Errors) })),
		CPU:    time.Duration(medianOf(st.wrk, func(w wrkResult) float64 { return float64(w.CPU) })),
	}, true
}

func (r *report) frontRedis(key string) (redisBenchResult, bool) {
	st, ok := r.fronts[key]
	if !ok || len(st.redis) == 0 {
		return redisBenchResult{}, false
	}
	return redisBenchResult{
		RPS: medianOf(st.redis, func(x redisBenchResult) float64 { return x.RPS }),
		P50: time.Duration(medianOf(st.redis, func(x redisBenchResult) float64 { return float64(x.P50) })),
		P99: time.Duration(medianOf(st.redis, func(x redisBenchResult) float64 { return float64(x.P99) })),
	}, true
}

func wrkCell(w wrkResult, ok bool) string {
	if !ok {
		return "–"
	}
	s := fmt.Sprintf("p50 %s / p99 %s · %s", us(w.P50), us(w.P99), rate(int64(w.RPS), time.Second))
	if w.CPU > 0 {
		s += fmt.Sprintf(" · %s CPU", us(w.CPU))
	}
	if w.Errors > 0 {
		s += fmt.Sprintf(" · %d errors", w.Errors)
	}
	return s
}

// 7. corral serve's HTTP front.
func (r *report) httpRows() []row {
	var rows []row
	for _, l := range httpLoads {
		c, cok := r.frontWrk(fmt.Sprintf("http/corral/%d", l.conns))
		v, vok := r.frontWrk(fmt.Sprintf("http/varnish/%d", l.conns))
		n, nok := r.frontWrk(fmt.Sprintf("http/nginx/%d", l.conns))
		letter := map[int]string{1: "7", 64: "7b"}[l.conns]
		worst := max(float64(c.P99)/float64(v.P99), float64(c.P99)/float64(n.P99))
		verdict := fmt.Sprintf("p99 ≤ 1.5× both: %s (%s Varnish, %s nginx)", yes(cok && vok && nok && worst <= 1.5),
			ratio(float64(c.P99), float64(v.P99)), ratio(float64(c.P99), float64(n.P99)))
		goal := "p99 ≤ 1.5× Varnish and nginx"
		if l.conns > 1 {
			goal += "; throughput ≥ nginx"
			verdict += fmt.Sprintf("; throughput ≥ nginx: %s (%s)", yes(cok && nok && c.RPS >= n.RPS), ratio(c.RPS, n.RPS))
		}
		rows = append(rows, row{
			what: fmt.Sprintf("%s · HTTP hit of one %d-byte key, %d connection(s) (`wrk -t%d -c%d -d%ds`, median of %d): p50 / p99 · requests/s · the server's CPU per request",
				letter, r.plan.FrontValue, l.conns, l.threads, l.conns, int(r.plan.FrontDuration.Seconds()), r.plan.FrontReps),
			corral:     "`corral serve`: " + wrkCell(c, cok),
			baseline:   "Varnish: " + wrkCell(v, vok) + "; nginx `proxy_cache`: " + wrkCell(n, nok),
			groupcache: "–", redis: "–", goal: goal, verdict: verdict,
		})
	}
	one, ook := r.frontWrk("hops/one")
	three, tok := r.frontWrk("hops/three")
	rows = append(rows, row{
		what: fmt.Sprintf("7c · HTTP hits of %d random keys, 64 connections (`wrk -t2 -c64 -s random-keys.lua`): through a node of 3 (two in three a peer hop) against a node alone", r.plan.HopKeys),
		corral: fmt.Sprintf("3 nodes: %s; 1 node: %s = %s", wrkCell(three, tok), wrkCell(one, ook),
			ratio(three.RPS, one.RPS)),
		baseline: "1 node", groupcache: "–", redis: "–",
		goal:    "3 nodes ≥ 0.8× 1 node",
		verdict: fmt.Sprintf("%s: %s", yes(ook && tok && three.RPS >= 0.8*one.RPS), ratio(three.RPS, one.RPS)),
	})
	hotOne, hok := r.frontWrk("hops/hot-one")
	hotThree, htok := r.frontWrk("hops/hot-three")
	rows = append(rows, row{
		what: "7d · HTTP hit of one hot key another node owns, 64 connections (`wrk -t2 -c64`): through a node of 3, which answers from its near copy (a second's, then one peer hop), against the node alone, which owns it",
		corral: fmt.Sprintf("3 nodes: %s; 1 node: %s = %s", wrkCell(hotThree, htok), wrkCell(hotOne, hok),
			ratio(hotThree.RPS, hotOne.RPS)),
		baseline: "1 node", groupcache: "–", redis: "–", goal: "–",
		verdict: fmt.Sprintf("information: %s the node alone's hits a second, %s its p99", ratio(hotThree.RPS, hotOne.RPS), ratio(float64(hotThree.P99), float64(hotOne.P99))),
	})
	return rows
}

// 8. corral serve's Redis protocol front.
func (r *report) respRows() []row {
	var rows []row
	for _, depth := range respDepths {
		get := func(sys, test string) (redisBenchResult, bool) {
			return r.frontRedis(fmt.Sprintf("resp/%s/%s/%d", sys, test, depth))
		}
		cg, _ := get("corral", "get")
		cs, _ := get("corral", "set")
		rg, _ := get("redis", "get")
		rs, _ := get("redis", "set")
		cell := func(g, s redisBenchResult) string {
			return fmt.Sprintf("GET %s (p50 %s, p99 %s); SET %s (p50 %s, p99 %s)", rate(int64(g.RPS), time.Second), us(g.P50), us(g.P99),
				rate(int64(s.RPS), time.Second), us(s.P50), us(s.P99))
		}
		goal := "GET ≥ 0.9× Redis"
		verdict := fmt.Sprintf("GET ≥ 0.9× Redis: %s (%s)", yes(rg.RPS > 0 && cg.RPS >= 0.9*rg.RPS), ratio(cg.RPS, rg.RPS))
		if depth > 1 {
			goal += "; SET ≥ 0.5× Redis"
			verdict += fmt.Sprintf("; SET ≥ 0.5× Redis: %s (%s)", yes(rs.RPS > 0 && cs.RPS >= 0.5*rs.RPS), ratio(cs.RPS, rs.RPS))
		} else {
			verdict += fmt.Sprintf("; SET %s", ratio(cs.RPS, rs.RPS))
		}
		rows = append(rows, row{
			what: fmt.Sprintf("8%s · Redis protocol, `redis-benchmark -c50 -P%d -r 1000 -d %d`, median of %d: requests/s (p50, p99)",
				map[int]string{1: "", 16: "b"}[depth], depth, r.plan.FrontValue, r.plan.FrontReps),
			corral:   "`corral serve --resp-port`: " + cell(cg, cs),
			baseline: "–", groupcache: "–",
			redis: "redis-server: " + cell(rg, rs),
			goal:  goal, verdict: verdict,
		})
	}
	return rows
}

// shellJoin writes args as a shell command line: an argument that is empty or holds a
// character the shell would read is quoted.
func shellJoin(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = a
		if a == "" || strings.ContainsAny(a, " \t'\"$*?[]{}();&|<>\\`~#") {
			q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
	}
	return strings.Join(q, " ")
}
