package main

import (
	"os/exec"
	"strings"
	"testing"
	"time"
)

// needFronts skips a test on a machine without the programs of rows 7 and 8.
func needFronts(tb testing.TB) {
	tb.Helper()
	for _, bin := range []string{"varnishd", "nginx", "wrk", "redis-server", "redis-benchmark"} {
		if _, err := exec.LookPath(bin); err != nil {
			tb.Skipf("%s is not installed: apt-get install -y varnish nginx wrk redis-server redis-tools (make bench-compare does it)", bin)
		}
	}
}

// Rows 7 (7–7d) and 8, briefly: corral serve, nginx, Varnish, a 3-node cluster and Redis start, wrk
// and redis-benchmark run against each, and every row has its figures.
func TestQuickFronts(t *testing.T) {
	if testing.Short() {
		t.Skip("builds corral and starts 9 processes; skipped with -short")
	}
	needFronts(t)
	rep, err := run(testContext(t, 5*time.Minute), quickPlan(), []string{"http", "resp"}, testWriter{t})
	if err != nil {
		t.Fatal(err)
	}
	rows := rep.rows()
	if len(rows) != len(httpLoads)+2+len(respDepths) { // 7, 7b; 7c, 7d; 8, 8b
		t.Fatalf("%d rows:\n%s", len(rows), rep.table())
	}
	for key, st := range rep.fronts {
		for _, w := range st.wrk {
			if w.RPS <= 0 || w.P99 <= 0 || w.Errors > 0 {
				t.Errorf("%s: %+v", key, w)
			}
		}
		for _, r := range st.redis {
			if r.RPS <= 0 {
				t.Errorf("%s: %+v", key, r)
			}
		}
	}
	md := rep.markdown()
	for _, want := range []string{"wrk -t1 -c1", "wrk -t2 -c64", "redis-benchmark -h 127.0.0.1", "varnishd -F", "corral serve --name one", "a hot key owned elsewhere"} {
		if !strings.Contains(md, want) {
			t.Errorf("RESULTS.md does not show the command %q", want)
		}
	}
	t.Log("\n" + md)
}

func TestParseWrk(t *testing.T) {
	const out = `Running 5s test @ http://127.0.0.1:18080/v1/groups/g/keys/k
  1 threads and 1 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency    55.83us   95.71us   4.95ms   99.29%
    Req/Sec    18.66k     1.17k   20.34k    80.39%
  Latency Distribution
     50%   48.00us
     75%   53.00us
     90%   60.00us
     99%    1.81ms
  94632 requests in 5.10s, 61.29MB read
  Socket errors: connect 0, read 1, write 0, timeout 2
  Non-2xx or 3xx responses: 3
Requests/sec:  18555.34
Transfer/sec:     12.02MB
`
	got, err := parseWrk(out)
	if err != nil {
		t.Fatal(err)
	}
	want := wrkResult{RPS: 18555.34, P50: 48 * time.Microsecond, P99: 1810 * time.Microsecond, Errors: 6, Requests: 94632}
	if got != want {
		t.Errorf("parseWrk = %+v, want %+v", got, want)
	}
	if _, err := parseWrk("unable to connect to 127.0.0.1:1 Connection refused"); err == nil {
		t.Error("parseWrk of an error: no error")
	}
}

func TestParseRedisBenchmark(t *testing.T) {
	const out = `"test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"
"SET","26809.65","1.188","0.160","0.919","1.583","4.591","42.719"
"GET","31007.75","1.065","0.352","0.887","1.415","2.559","54.687"
`
	got, err := parseRedisBenchmark(out)
	if err != nil {
		t.Fatal(err)
	}
	if g := got["get"]; g.RPS != 31007.75 || g.P50 != 887*time.Microsecond || g.P99 != 2559*time.Microsecond {
		t.Errorf("get = %+v", g)
	}
	if s := got["set"]; s.RPS != 26809.65 {
		t.Errorf("set = %+v", s)
	}
	if _, err := parseRedisBenchmark(""); err == nil {
		t.Error("an empty report: no error")
	}
}
