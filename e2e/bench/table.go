package main

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"time"
)

// machine says where a run happened.
type machine struct {
	CPUs             int
	Model            string
	Go               string
	Redis            string
	Date             string
	LoadStart        string // the 1-, 5- and 15-minute load averages when the run began
	LoadEnd          string // and when it ended
	Varnish, Nginx   string
	Wrk, RedisBenchm string
}

// loadAverage is /proc/loadavg's three load averages, "" where it cannot be read.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return ""
}

// version runs a program's version flag and returns the first match of the line's words that
// begins with prefix ("" = the whole first line), or "".
func version(bin string, args []string, pick func(string) string) string {
	out, err := exec.Command(bin, args...).CombinedOutput()
	if err != nil && len(out) == 0 {
		return ""
	}
	return pick(string(out))
}

func describeMachine() machine {
	m := machine{CPUs: runtime.NumCPU(), Go: runtime.Version(), Date: time.Now().UTC().Format("2006-01-02"), Model: "unknown CPU",
		LoadStart: loadAverage()}
	word := func(prefix string) func(string) string {
		return func(out string) string {
			for _, f := range strings.Fields(out) {
				if v, ok := strings.CutPrefix(strings.Trim(f, "(),"), prefix); ok && v != "" {
					return v
				}
			}
			return ""
		}
	}
	m.Varnish = version("varnishd", []string{"-V"}, word("varnish-"))
	m.Nginx = version("nginx", []string{"-v"}, word("nginx/"))
	m.Wrk = version("wrk", []string{"-v"}, func(out string) string {
		if f := strings.Fields(out); len(f) >= 2 && f[0] == "wrk" {
			return f[1]
		}
		return ""
	})
	m.RedisBenchm = version("redis-benchmark", []string{"--version"}, func(out string) string {
		if f := strings.Fields(out); len(f) >= 2 {
			return f[1]
		}
		return ""
	})
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.Lines(string(b)) {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.Model = strings.TrimSpace(v)
				break
			}
		}
	}
	if out, err := exec.Command("redis-server", "--version").Output(); err == nil {
		for _, f := range strings.Fields(string(out)) {
			if v, ok := strings.CutPrefix(f, "v="); ok {
				m.Redis = v
			}
		}
	}
	return m
}

// row is one line of the table. The baseline column is otter for rows 1 and 5, the bare gRPC
// echo for row 2 and consistent.LocateKey for row 6.
type row struct {
	what, corral, baseline, groupcache, redis, goal, verdict string
}

func us(d time.Duration) string {
	switch {
	case d >= 10*time.Millisecond:
		return fmt.Sprintf("%.1f ms", float64(d)/1e6)
	case d >= time.Millisecond:
		return fmt.Sprintf("%.2f ms", float64(d)/1e6)
	case d >= 10*time.Microsecond:
		return fmt.Sprintf("%.0f µs", float64(d)/1e3)
	default:
		return fmt.Sprintf("%.1f µs", float64(d)/1e3)
	}
}

func rate(ops int64, d time.Duration) string {
	if d <= 0 {
		return "–"
	}
	r := float64(ops) / d.Seconds()
	if r >= 1e6 {
		return fmt.Sprintf("%.2f M/s", r/1e6)
	}
	return fmt.Sprintf("%.1f k/s", r/1e3)
}

func ratio(a, b float64) string {
	if b == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f×", a/b)
}

func yes(ok bool) string {
	if ok {
		return "**met**"
	}
	return "**missed**"
}

func (r *report) localNs(sys string) (float64, int64, bool) {
	st, ok := r.local[sys]
	if !ok {
		return 0, 0, false
	}
	return median(slices.Clone(st.ns)), st.allocs, true
}

func (r *report) remoteCell(key string) string {
	st, ok := r.remote[key]
	if !ok || st.ops == 0 {
		return "–"
	}
	s := fmt.Sprintf("%s / %s · %s · %s CPU", us(st.lat.quantile(0.5)), us(st.lat.quantile(0.99)),
		rate(st.ops, st.elapsed), us(st.cpu/time.Duration(st.ops)))
	if st.errs > 0 {
		s += fmt.Sprintf(" · %d errors (%s)", st.errs, st.firstErr)
	}
	return s
}

func (r *report) p50(key string) float64 {
	st, ok := r.remote[key]
	if !ok || st.ops == 0 {
		return 0
	}
	return float64(st.lat.quantile(0.5))
}

// extraCell is one extra remote row over all caller counts: p50 and throughput at each.
func (r *report) extraCell(row string) string {
	var p50s, rates []string
	for _, c := range r.plan.RemoteCallers {
		st, ok := r.remote[fmt.Sprintf("%s/%d", row, c)]
		if !ok || st.ops == 0 {
			return "–"
		}
		p50s = append(p50s, us(st.lat.quantile(0.5)))
		rates = append(rates, rate(st.ops, st.elapsed))
	}
	return fmt.Sprintf("p50 %s · %s", strings.Join(p50s, " / "), strings.Join(rates, " / "))
}

func stampedeCell(st *stampedeStat) (string, int64, time.Duration) {
	if st == nil {
		return "–", 0, 0
	}
	worst := slices.Max(st.calls)
	p99 := quantileOf(slices.Clone(st.lat), 0.99)
	calls := fmt.Sprint(st.calls[0])
	if len(st.calls) > 1 {
		parts := make([]string, len(st.calls))
		for i, c := range st.calls {
			parts[i] = fmt.Sprint(c)
		}
		calls = strings.Join(parts, ", ")
	}
	s := fmt.Sprintf("%s loader calls · waiter p50 %s, p99 %s", calls, us(quantileOf(slices.Clone(st.lat), 0.5)), us(p99))
	if st.errs > 0 {
		s += fmt.Sprintf(" · %d errors (%s)", st.errs, st.firstErr)
	}
	return s, worst, p99
}

func (r *report) rows() []row {
	var rows []row
	for _, s := range []struct {
		step string
		rows func() []row
	}{
		{"local", r.localRows}, {"remote", r.remoteRows}, {"stampede", r.stampedeRows},
		{"crash", r.crashRows}, {"memory", r.memoryRows}, {"ring", r.ringRows},
		{"http", r.httpRows}, {"resp", r.respRows}, {"batch", r.batchRows},
	} {
		if r.ran[s.step] {
			rows = append(rows, s.rows()...)
		}
	}
	return rows
}

// 1. Local hit.
func (r *report) localRows() []row {
	var rows []row
	oNs, oA, _ := r.localNs("otter")
	ogNs, ogA, _ := r.localNs("otter-get")
	cNs, cA, _ := r.localNs("corral")
	gNs, gA, _ := r.localNs("groupcache")
	rows = append(rows, row{
		what:       fmt.Sprintf("1 · local hit (keys owned here; every goroutine cycles 1024 of them), parallel on %d cores: ns/op, allocs/op", r.machine.CPUs),
		corral:     fmt.Sprintf("`Group.Get` %.1f ns, %d allocs = %s otter `Get`, %s `GetIfPresent`", cNs, cA, ratio(cNs, ogNs), ratio(cNs, oNs)),
		baseline:   fmt.Sprintf("otter `Get` %.1f ns, %d allocs; `GetIfPresent` %.1f ns, %d allocs", ogNs, ogA, oNs, oA),
		groupcache: fmt.Sprintf("%.1f ns, %d allocs = %s otter `Get`", gNs, gA, ratio(gNs, ogNs)),
		redis:      "– (every read crosses the network)",
		goal:       "≤ 1.25× otter `GetIfPresent`, 0 allocs",
		verdict:    fmt.Sprintf("%s: %s `GetIfPresent`, %d allocs (%s otter `Get`)", yes(cNs <= 1.25*oNs && cA == 0), ratio(cNs, oNs), cA, ratio(cNs, ogNs)),
	})
	if tNs, tA, ok := r.localNs("corral-tagged"); ok {
		rows = append(rows, row{
			what:       "1b · local hit of a value with 2 tags (a purge of a third remembered), same keys",
			corral:     fmt.Sprintf("`Group.Get` %.1f ns, %d allocs = %+.1f ns against an untagged hit (%+.1f ns a tag)", tNs, tA, tNs-cNs, (tNs-cNs)/2),
			baseline:   fmt.Sprintf("the untagged hit above: %.1f ns", cNs),
			groupcache: "– (no tags)",
			redis:      "– (no tags)",
			goal:       "a few ns a tag more than an untagged hit, 0 allocs",
			verdict:    fmt.Sprintf("%s: %+.1f ns a tag, %d allocs", yes((tNs-cNs)/2 <= 5 && tA == 0), (tNs-cNs)/2, tA),
		})
	}

	return rows
}

// 2. Remote hit.
func (r *report) remoteRows() []row {
	p := r.plan
	var rows []row
	for _, c := range p.RemoteCallers {
		k := func(sys string) string { return fmt.Sprintf("%s/%d", sys, c) }
		cp, gp, rp := r.p50(k("corral")), r.p50(k("groupcache")), r.p50(k("redis"))
		part := func(ok bool, what string, base float64) string {
			return fmt.Sprintf("%s %s (%s)", what, yes(ok), ratio(cp, base))
		}
		cs, gs := r.remote[k("corral")], r.remote[k("groupcache")]
		parts := []string{part(cp > 0 && cp <= 0.6*gp, "p50 ≤ 0.6× groupcache:", gp)}
		goal := "p50 ≤ 0.6× groupcache, ≤ Redis; CPU per Get < groupcache"
		if c < 16 {
			parts = append(parts, part(cp > 0 && cp <= rp, "p50 ≤ Redis:", rp))
		}
		if c >= 16 {
			goal = "p50 ≤ 0.6× groupcache, ≤ Redis; throughput ≥ 2× groupcache; CPU per Get < groupcache"
			parts = append(parts, part(cp > 0 && cp <= rp, "p50 ≤ Redis:", rp))
			if cs != nil && gs != nil && gs.ops > 0 && cs.elapsed > 0 && gs.elapsed > 0 {
				tput := (float64(cs.ops) / cs.elapsed.Seconds()) / (float64(gs.ops) / gs.elapsed.Seconds())
				parts = append(parts, fmt.Sprintf("throughput ≥ 2× groupcache: %s (%.2f×)", yes(tput >= 2), tput))
			}
		}
		if cs != nil && gs != nil && cs.ops > 0 && gs.ops > 0 {
			cc, gc := float64(cs.cpu)/float64(cs.ops), float64(gs.cpu)/float64(gs.ops)
			parts = append(parts, fmt.Sprintf("CPU per Get < groupcache: %s (%.2f×)", yes(cc < gc), cc/gc))
		}
		rows = append(rows, row{
			what:   fmt.Sprintf("2 · remote hit (owned by another node, near cache off), callers: %d — p50 / p99 · throughput · CPU per Get (all processes)", c),
			corral: r.remoteCell(k("corral")),
			baseline: "stream echo (corral's transport, canned answer): " + r.remoteCell(k("stream")) +
				"; unary echo (bare grpc-go, canned answer): " + r.remoteCell(k("echo")) + "; raw TCP floor: " + r.remoteCell(k("tcp")),
			groupcache: r.remoteCell(k("groupcache")),
			redis:      r.remoteCell(k("redis")),
			goal:       goal,
			verdict:    strings.Join(parts, "; "),
		})
	}
	callers := strings.Trim(strings.Join(strings.Fields(fmt.Sprint(p.RemoteCallers)), " / "), "[]")
	rows = append(rows, row{
		what:       fmt.Sprintf("2b · one hot key per caller, each cache's own copies of remote hot keys (corral: near cache, the default; groupcache: hot cache), %s callers", callers),
		corral:     r.extraCell("corral-near"),
		baseline:   "–",
		groupcache: r.extraCell("groupcache-hot"),
		redis:      "–",
		goal:       "–",
		verdict:    "information",
	}, row{
		what:     fmt.Sprintf("2c · one key shared by all callers, near cache off: concurrent Gets on a node share one owner request, %s callers", callers),
		corral:   r.extraCell("corral-shared"),
		baseline: "–", groupcache: "–", redis: "–", goal: "–", verdict: "information",
	})

	return rows
}

// 3. Stampede.
func (r *report) stampedeRows() []row {
	p := r.plan
	var rows []row
	budget := p.LoaderDelay + 5*time.Millisecond
	cs, cw, cp99 := stampedeCell(r.stampede["corral"])
	gs, _, _ := stampedeCell(r.stampede["groupcache"])
	ns, _, _ := stampedeCell(r.stampede["redis-naive"])
	ls, _, _ := stampedeCell(r.stampede["redis-lock"])
	rows = append(rows, row{
		what: fmt.Sprintf("3 · stampede at expiry: %d nodes × %d concurrent callers, %v loader (%d trials)",
			nodes, p.StampedeCallers, p.LoaderDelay, p.StampedeTrials),
		corral:     cs,
		baseline:   "–",
		groupcache: gs + " (new key per period: groupcache has no TTL)",
		redis:      fmt.Sprintf("naive cache-aside: %s; SET NX lock + %v polling: %s", ns, p.Poll, ls),
		goal:       fmt.Sprintf("1 call, waiter p99 ≤ %v", budget),
		verdict:    fmt.Sprintf("%s: %d calls at most, p99 %s", yes(cw == 1 && cp99 <= budget), cw, us(cp99)),
	})

	return rows
}

// 4. Crash.
func (r *report) crashRows() []row {
	p := r.plan
	var rows []row
	ccs, ccw, _ := stampedeCell(r.crash["corral"])
	cbs, cbw, _ := stampedeCell(r.crash["corral-backups"])
	gcs, _, _ := stampedeCell(r.crash["groupcache"])
	rows = append(rows, row{
		what:       fmt.Sprintf("4 · owner crash: SIGKILL the owner of a hot key, then %d survivors × %d callers at once", nodes-1, p.StampedeCallers),
		corral:     fmt.Sprintf("%s; `WithBackups(1)`: %s", ccs, cbs),
		baseline:   "–",
		groupcache: gcs,
		redis:      "–",
		goal:       "1 call; with a backup 0",
		verdict:    fmt.Sprintf("%s: %d; with a backup %s: %d", yes(ccw == 1), ccw, yes(cbw == 0), cbw),
	})
	if f0, f1 := r.fillCost[0], r.fillCost[1]; f0 != nil && f1 != nil && len(f0.lat) > 0 && len(f1.lat) > 0 {
		cell := func(f *fillCostStat) string {
			n := float64(len(f.lat))
			return fmt.Sprintf("p50 %s / p99 %s · the owner's writes %.2f, %.0f bytes", us(quantileOf(slices.Clone(f.lat), 0.5)),
				us(quantileOf(slices.Clone(f.lat), 0.99)), float64(f.writes)/n, float64(f.wbytes)/n)
		}
		d50 := quantileOf(slices.Clone(f1.lat), 0.5) - quantileOf(slices.Clone(f0.lat), 0.5)
		rows = append(rows, row{
			what: fmt.Sprintf("4b · the cost of a fill: %d cold keys filled one after the other on their owner (the loader answers at once, %d-byte values), without backups and with `WithBackups(1)`: latency, and per fill the owner's write system calls and bytes written (TCP: peer streams, not gossip)",
				len(f0.lat), p.ValueSize),
			corral:     fmt.Sprintf("none: %s; 1 backup: %s, %.2f entries given per fill", cell(f0), cell(f1), float64(f1.sent)/float64(len(f1.lat))),
			baseline:   "–",
			groupcache: "–",
			redis:      "–",
			goal:       "–",
			verdict:    fmt.Sprintf("information: a backup adds %s to a fill's p50 and %.0f bytes", us(d50), float64(f1.wbytes)/float64(len(f1.lat))-float64(f0.wbytes)/float64(len(f0.lat))),
		})
	}

	return rows
}

// 5. Memory.
func (r *report) memoryRows() []row {
	p := r.plan
	var rows []row
	m := r.memory
	rows = append(rows, row{
		what: fmt.Sprintf("5 · memory: live heap per entry at %d entries of 32-byte keys and values, after runtime.GC()", p.MemEntries),
		corral: fmt.Sprintf("`Group` %.0f B = otter + %.0f B; `fill.Cache` alone %.0f B",
			m["corral"].BytesPerEntry, m["corral"].BytesPerEntry-m["otter"].BytesPerEntry, m["fill"].BytesPerEntry),
		baseline:   fmt.Sprintf("otter %.0f B; otter with corral's store options (weight, entry struct) %.0f B", m["otter"].BytesPerEntry, m["otter-as-corral"].BytesPerEntry),
		groupcache: fmt.Sprintf("%.0f B", m["groupcache"].BytesPerEntry),
		redis:      fmt.Sprintf("%.0f B (`used_memory`)", m["redis"].BytesPerEntry),
		goal:       "≤ otter + 64 B",
		verdict:    fmt.Sprintf("%s: +%.0f B", yes(m["corral"].BytesPerEntry <= m["otter"].BytesPerEntry+64), m["corral"].BytesPerEntry-m["otter"].BytesPerEntry),
	})

	return rows
}

// 6. Ring.
func (r *report) ringRows() []row {
	var rows []row
	rr := func(name string) string {
		s, p := r.ring[name+"/serial"], r.ring[name+"/parallel"]
		return fmt.Sprintf("%.1f ns serial, %.1f ns parallel, %d allocs", s.NsPerOp, p.NsPerOp, s.AllocsPerOp)
	}
	rows = append(rows, row{
		what:       "6 · owner lookup, 5 members",
		corral:     "`ring.Owner` " + rr("corral"),
		baseline:   "`consistent.LocateKey` (corral's config) " + rr("consistent"),
		groupcache: "`consistenthash.Get` (HTTPPool's defaults) " + rr("groupcache"),
		redis:      "–",
		goal:       "–",
		verdict: fmt.Sprintf("%s `LocateKey`, %s `consistenthash` (serial)",
			ratio(r.ring["corral/serial"].NsPerOp, r.ring["consistent/serial"].NsPerOp),
			ratio(r.ring["corral/serial"].NsPerOp, r.ring["groupcache/serial"].NsPerOp)),
	})
	return rows
}

func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// table renders the rows as one Markdown table.
func (r *report) table() string {
	var b strings.Builder
	b.WriteString("| measurement | corral | baseline | groupcache | Redis | goal | verdict |\n")
	b.WriteString("|---|---|---|---|---|---|---|\n")
	for _, x := range r.rows() {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s |\n", cell(x.what), cell(x.corral), cell(x.baseline),
			cell(x.groupcache), cell(x.redis), cell(x.goal), cell(x.verdict))
	}
	return b.String()
}

// markdown is the whole results file: the machine, the command, the table and its notes.
func (r *report) markdown() string {
	var b strings.Builder
	m := r.machine
	fmt.Fprintf(&b, "# corral side by side\n\n")
	fmt.Fprintf(&b, "Measured %s on %d × %s, %s, Redis %s; `make bench-compare` (`cd e2e/bench && go run . -out RESULTS.md`), %v in all.\n",
		m.Date, m.CPUs, m.Model, m.Go, m.Redis, r.took.Round(time.Second))
	if r.ran["http"] || r.ran["resp"] {
		fmt.Fprintf(&b, "Varnish %s, nginx %s, wrk %s, redis-benchmark %s. ", orDash(m.Varnish), orDash(m.Nginx), orDash(m.Wrk), orDash(m.RedisBenchm))
	}
	fmt.Fprintf(&b, "Load average (1, 5, 15 min) %s at the start, %s at the end.\n", orDash(m.LoadStart), orDash(m.LoadEnd))
	fmt.Fprintf(&b, "Every system ran in this one run, on 127.0.0.1, each cache node its own process. Read the ratios, not the absolute times.\n\n")
	if r.plan.TLS {
		fmt.Fprintf(&b, "With `-tls`: corral's peers speak mutual TLS (ECDSA P-256 certificates of one CA); groupcache, Redis and the echoes stay plaintext.\n\n")
	}
	b.WriteString(r.table())
	b.WriteString("\nHow to read it:\n\n")
	for _, s := range []string{
		"baseline: otter in rows 1 and 5; in row 2, corral's own transport answering every Get with the same 100-byte entry on its stream (the stream echo), the same message as a unary call on a default grpc-go server (the unary echo), and pooled TCP connections each carrying one caller's request and answer (the floor); `consistent.LocateKey` in row 6.",
		fmt.Sprintf("Row 2: %d nodes per system, callers in one process and the owner in another; each caller cycles through its own share of %d keys owned by the other node, so no two callers ask for one key. Throughput is Gets per second over all callers; CPU per Get is the CPU time of every process of the test bed (callers, owners, Redis) divided by Gets. Samples of %d rounds of %v each are pooled.",
			nodes, r.plan.RemoteKeys, r.plan.RemoteRounds, r.plan.RemoteDuration),
		"Tuning given to the others: groupcache's HTTP client keeps up to 512 idle keep-alive connections per peer (its default, http.DefaultTransport, keeps 2 and would redial under concurrency); go-redis's pool has 128 connections for the remote-hit rows and one per caller in the stampede.",
		"Row 3: corral's key expires by its TTL; Redis's by PX; groupcache has no expiry, so its callers ask for a new key, as its users do with a period in the key. The naive cache-aside loads on every miss; the lock variant takes `SET lock NX PX 5000`, loads and stores, and the others poll GET.",
		fmt.Sprintf("Row 3 starts %v after the corral clusters formed: for `PeekWindow` (1 min by default) after a membership change, a new owner's fill first asks the key's previous owner, one more round trip before the loader runs; in runs inside that window the waiters' p50 was ≈ 2.5 ms higher (p99 55–57 ms).", r.plan.Settle),
		fmt.Sprintf("Row 4: the burst starts about 20 ms after the kill, before failure detection: every survivor still routes the key to the dead owner. The group with one backup is a second group on the same three nodes, its key owned by the same victim and filled there before the kill; its burst starts when the first one's has ended, %v after the kill.", r.crashGap.Round(time.Millisecond)),
		"Row 5: each cache in a fresh process; Redis's figure is its own `used_memory`, not a Go heap.",
	} {
		b.WriteString("- " + s + "\n")
	}
	if r.ran["http"] || r.ran["resp"] {
		for _, s := range []string{
			fmt.Sprintf("Rows 7 and 8: each system's own process on 127.0.0.1, the load generator beside it on the same %d cores, as their users measure them; every run repeated %d times, the systems interleaved (their order rotates), and the row shows the median of each figure. Values of %d bytes from an HTTP origin (`Cache-Control: max-age=3600`) in the driver, asked only while the caches fill.", r.machine.CPUs, r.plan.FrontReps, r.plan.FrontValue),
			"Row 7c: the same wrk load of random keys through one corral serve node alone, and through a node of a 3-node cluster, where two keys in three are owned by the other nodes: a hit there is a peer hop. Both were warmed with every key first; near copies stay on (the default) but last a second, so a key read less often than that hops.",
			"Row 8: redis-benchmark's SET runs first and writes the 1000 keys its GET then reads, so every GET hits. A corral SET is a write through the key's owner that tells every member to drop its near copy (one node here), and answers when they have; at -P16 the SETs of a pipeline that have arrived are applied together, and answered in order.",
		} {
			b.WriteString("- " + s + "\n")
		}
	}
	if r.ran["batch"] {
		b.WriteString("- " + fmt.Sprintf("Rows 9 and 9b (step `batch`, run after row 3 on the same bed): a page of %d keys. Row 9: the keys are owned by the two other nodes, half each, on the near-off cluster (groupcache: g1 and g2; Redis: the one server); each caller reads a page of its own back to back (no two callers share a key, which would coalesce on the caller's node), and a page is one op — `GetMany`, %d `Get`s at once, %d groupcache `Get`s at once, one go-redis `MGet`, or the raw TCP floor's two requests (a raw TCP server in c1 and one in c2, each answering every request with a canned buffer of its half of the page's values; the caller writes both requests, then reads both answers, on its own goroutine: what no cache that spreads a page over two owners can beat on this machine); samples of %d rounds of %v per system and callers, the systems' order rotated. Row 9b: fresh keys each trial, on all three owners; a query is one call of the loader (corral's batch loader or `LoadFunc`, groupcache's getter, the cache-aside's one load of every key its `MGET` missed), and the callers of the second figure fire at one instant, %d on each node. `cd e2e/bench && go run . -steps batch` runs these rows alone.",
			r.plan.BatchKeys, r.plan.BatchKeys, r.plan.BatchKeys, r.plan.BatchRounds, r.plan.BatchDuration, r.plan.ColdCallers) + "\n")
	}
	for _, n := range r.notes {
		b.WriteString("- " + n + "\n")
	}
	if len(r.commands) > 0 {
		b.WriteString("\nThe command lines of rows 7 and 8 (ports are this run's; DIR is its temporary directory):\n\n")
		for _, c := range r.commands {
			fmt.Fprintf(&b, "- %s: `%s`\n", c[0], c[1])
		}
	}
	return b.String()
}

func orDash(s string) string {
	if s == "" {
		return "–"
	}
	return s
}
