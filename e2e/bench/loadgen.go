package main

import (
	"bufio"
	"context"
	"encoding/csv"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// The load generators of the HTTP and Redis protocol rows, run as the people who measure
// Varnish, nginx and Redis run them: wrk and redis-benchmark, beside the servers.

// wrkResult is one wrk run.
type wrkResult struct {
	RPS      float64
	P50, P99 time.Duration
	Errors   int64         // non-2xx answers and socket errors
	Requests int64         // answered in all
	CPU      time.Duration // the server's CPU time per request (all its processes), 0 = not measured
}

// wrkArgs is wrk's command line for threads and conns over d, at url, with script ("" =
// none) and its arguments.
func wrkArgs(threads, conns int, d time.Duration, url, script string, scriptArgs ...string) []string {
	args := []string{fmt.Sprintf("-t%d", threads), fmt.Sprintf("-c%d", conns), fmt.Sprintf("-d%ds", int(d.Seconds())), "--latency"}
	if script != "" {
		args = append(args, "-s", script)
	}
	args = append(args, url)
	if len(scriptArgs) > 0 {
		args = append(append(args, "--"), scriptArgs...)
	}
	return args
}

// runWrk runs wrk with args, bounded by its own -d and a minute more.
func runWrk(ctx context.Context, d time.Duration, args []string) (wrkResult, error) {
	ctx, cancel := context.WithTimeout(ctx, d+time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "wrk", args...).CombinedOutput()
	if err != nil {
		return wrkResult{}, fmt.Errorf("wrk %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return parseWrk(string(out))
}

// parseWrk reads wrk's --latency report.
func parseWrk(out string) (wrkResult, error) {
	var r wrkResult
	var have50, have99, haveRPS bool
	for line := range strings.Lines(out) {
		f := strings.Fields(line)
		switch {
		case len(f) == 2 && f[0] == "Requests/sec:":
			r.RPS, _ = strconv.ParseFloat(f[1], 64)
			haveRPS = true
		case len(f) >= 3 && f[1] == "requests" && f[2] == "in":
			r.Requests, _ = strconv.ParseInt(f[0], 10, 64)
		case len(f) == 2 && f[0] == "50%":
			r.P50, have50 = parseWrkDuration(f[1])
		case len(f) == 2 && f[0] == "99%":
			r.P99, have99 = parseWrkDuration(f[1])
		case len(f) >= 5 && f[0] == "Non-2xx":
			n, _ := strconv.ParseInt(f[len(f)-1], 10, 64)
			r.Errors += n
		case len(f) >= 2 && f[0] == "Socket" && f[1] == "errors:":
			for i := 2; i+1 < len(f); i += 2 {
				n, _ := strconv.ParseInt(strings.TrimSuffix(f[i+1], ","), 10, 64)
				r.Errors += n
			}
		}
	}
	if !haveRPS || !have50 || !have99 {
		return r, fmt.Errorf("wrk's report has no Requests/sec, 50%% or 99%%: %q", out)
	}
	return r, nil
}

// parseWrkDuration reads wrk's "48.00us", "1.81ms", "2.00s".
func parseWrkDuration(s string) (time.Duration, bool) {
	for _, u := range []struct {
		suffix string
		unit   time.Duration
	}{{"us", time.Microsecond}, {"ms", time.Millisecond}, {"s", time.Second}} {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			v, err := strconv.ParseFloat(n, 64)
			return time.Duration(v * float64(u.unit)), err == nil
		}
	}
	return 0, false
}

// randomKeysScript writes a wrk script that asks for a random one of n keys a request, each
// path prefix followed by the key's number, and returns its path.
func randomKeysScript(dir string) (string, error) {
	path := filepath.Join(dir, "random-keys.lua")
	const script = `-- wrk -s random-keys.lua URL -- PREFIX N: GET PREFIX..k for k uniform in [0, N)
local prefix, n
function init(args)
  prefix, n = args[1], tonumber(args[2])
  math.randomseed(os.time() + (tonumber(tostring({}):sub(8)) or 0))
end
function request()
  return wrk.format("GET", prefix .. math.random(0, n - 1))
end
`
	return path, os.WriteFile(path, []byte(script), 0o644)
}

// benchResultRow is one test of a redis-benchmark run: requests per second and p50/p99.
type redisBenchResult struct {
	RPS      float64
	P50, P99 time.Duration
}

// redisBenchArgs is redis-benchmark's command line: tests (get,set) against addr, n requests
// over conns connections, pipelines of depth, keys from 1000, values of size bytes.
func redisBenchArgs(addr, tests string, n, conns, depth, size int) []string {
	host, port, _ := strings.Cut(addr, ":")
	return []string{"-h", host, "-p", port, "-t", tests, "-n", strconv.Itoa(n), "-c", strconv.Itoa(conns),
		"-P", strconv.Itoa(depth), "-r", "1000", "-d", strconv.Itoa(size), "--csv"}
}

// runRedisBenchmark runs redis-benchmark with args, bounded by a few minutes, and returns
// each test's result by its name in lower case ("get", "set").
func runRedisBenchmark(ctx context.Context, args []string) (map[string]redisBenchResult, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "redis-benchmark", args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("redis-benchmark %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	return parseRedisBenchmark(string(out))
}

// parseRedisBenchmark reads redis-benchmark's --csv report:
// "test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms".
func parseRedisBenchmark(out string) (map[string]redisBenchResult, error) {
	r := csv.NewReader(bufio.NewReader(strings.NewReader(out)))
	r.FieldsPerRecord = -1
	recs, err := r.ReadAll()
	if err != nil {
		return nil, fmt.Errorf("redis-benchmark's report: %w: %q", err, out)
	}
	res := map[string]redisBenchResult{}
	for _, rec := range recs {
		if len(rec) < 7 || rec[0] == "test" {
			continue
		}
		rps, err1 := strconv.ParseFloat(rec[1], 64)
		p50, err2 := strconv.ParseFloat(rec[4], 64)
		p99, err3 := strconv.ParseFloat(rec[6], 64)
		if err1 != nil || err2 != nil || err3 != nil {
			return nil, fmt.Errorf("redis-benchmark's report: %q", rec)
		}
		name := strings.ToLower(strings.Fields(rec[0])[0])
		res[name] = redisBenchResult{RPS: rps, P50: time.Duration(p50 * 1e6), P99: time.Duration(p99 * 1e6)}
	}
	if len(res) == 0 {
		return nil, fmt.Errorf("redis-benchmark's report has no test: %q", out)
	}
	return res, nil
}
