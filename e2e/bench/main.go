package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// plan is how much of each measurement to run. Every load loop is bounded by a count and a
// duration; the whole full plan takes about three minutes on 2 cores.
type plan struct {
	LocalRounds     int           // rounds of the local-hit benchmarks (each ≈1 s per system); the median counts
	RemoteKeys      int           // keys owned by the remote node, cycled by the remote-hit callers
	RemoteCallers   []int         // concurrent callers of the remote-hit rows
	RemoteRounds    int           // rounds per (system, callers); samples of all rounds are pooled
	RemoteDuration  time.Duration // one run of one (system, callers)
	RemoteMaxOps    int           // bound on the calls of one run
	ValueSize       int           // bytes of every remote-hit value: corral's, groupcache's, Redis's and the echo's
	StampedeCallers int           // concurrent callers per node in a stampede
	StampedeTrials  int           // stampedes per strategy
	LoaderDelay     time.Duration // the loader's (the slow backend's) time
	TTL             time.Duration // the stampede key's TTL
	Poll            time.Duration // the Redis lock waiters' poll interval
	MemEntries      int           // entries of the memory measurement
	FillKeys        int           // cold keys of each round of the fill-cost measurement (row 4b)
	// Settle is how long after the corral clusters formed the stampede waits to start: for
	// corral.Config.PeekWindow (1 min) after a membership change, a new owner's fill first
	// asks the key's previous owner, one more round trip; the stampede row measures the
	// steady state.
	Settle time.Duration
	// The rows of corral serve against Varnish, nginx and Redis (steps http and resp).
	FrontDuration time.Duration // one wrk run
	FrontReps     int           // interleaved repetitions of every run; the rows show medians
	FrontValue    int           // bytes of every value of those rows
	HopKeys       int           // keys of the peer-hop row
	RESPRequests  [2]int        // requests of one redis-benchmark test at -P1 and at -P16
	// The batch rows (step batch).
	BatchKeys     int           // keys of a page
	BatchCallers  []int         // concurrent callers of row 9, each reading pages back to back
	BatchRounds   int           // rounds per (system, callers); samples of all rounds are pooled
	BatchDuration time.Duration // one run of one (system, callers)
	BatchMaxOps   int           // bound on the pages of one run
	ColdTrials    int           // cold pages per (system, mode) in row 9b
	ColdCallers   int           // callers per node of row 9b's pages asked at once
	ProfileDir    string        // if set, CPU profiles and traces of corral's and the echo's remote-hit runs go here
	Syscalls      bool          // print each remote-hit run's read and write system calls per Get, per process
	TLS           bool          // corral's peers speak mutual TLS
}

func fullPlan() plan {
	return plan{
		LocalRounds:     3,
		RemoteKeys:      8192,
		RemoteCallers:   []int{1, 16, 64},
		RemoteRounds:    2,
		RemoteDuration:  time.Second,
		RemoteMaxOps:    500_000,
		ValueSize:       100,
		StampedeCallers: 300,
		StampedeTrials:  3,
		LoaderDelay:     50 * time.Millisecond,
		TTL:             300 * time.Millisecond,
		Poll:            10 * time.Millisecond,
		MemEntries:      1_000_000,
		FillKeys:        1000,
		Settle:          61 * time.Second,
		FrontDuration:   5 * time.Second,
		FrontReps:       3,
		FrontValue:      512,
		HopKeys:         100_000,
		RESPRequests:    [2]int{100_000, 1_000_000},
		BatchKeys:       100,
		BatchCallers:    []int{1, 16},
		BatchRounds:     2,
		BatchDuration:   2 * time.Second,
		BatchMaxOps:     100_000,
		ColdTrials:      3,
		ColdCallers:     10,
	}
}

// quickPlan runs every step briefly: for tests of the harness, not for numbers.
func quickPlan() plan {
	p := fullPlan()
	p.LocalRounds, p.RemoteKeys, p.RemoteCallers, p.RemoteRounds = 1, 256, []int{1, 8}, 1
	p.RemoteDuration, p.RemoteMaxOps = 100*time.Millisecond, 20_000
	p.StampedeCallers, p.StampedeTrials, p.MemEntries, p.Settle, p.FillKeys = 20, 1, 20_000, 0, 100
	p.FrontDuration, p.FrontReps, p.HopKeys, p.RESPRequests = time.Second, 1, 1000, [2]int{5000, 20_000}
	p.BatchCallers, p.BatchRounds, p.BatchDuration, p.BatchMaxOps, p.ColdTrials, p.ColdCallers = []int{1, 4}, 1, 200*time.Millisecond, 2000, 1, 3
	return p
}

func main() {
	if name := os.Getenv(workerEnv); name != "" {
		if err := serveWorker(context.Background(), os.Stdin, os.Stdout); err != nil {
			fmt.Fprintf(os.Stderr, "worker %s: %v\n", name, err)
			os.Exit(1)
		}
		return
	}
	out := flag.String("out", "RESULTS.md", "write the table as Markdown to this file (\"\" = don't)")
	quick := flag.Bool("quick", false, "run every step briefly (checks the harness; the numbers mean nothing)")
	only := flag.String("steps", strings.Join(allSteps, ","), "measurements to run, comma-separated")
	profile := flag.String("profile", "", "write CPU profiles and execution traces of the caller and owner processes during corral's and the echo's remote-hit runs, and of GetMany's first round (row 9), to this directory")
	syscalls := flag.Bool("syscalls", false, "print the read and write system calls per Get of each process during each remote-hit run (from /proc/PID/io)")
	callers := flag.String("callers", "", "concurrent callers of the remote-hit rows, comma-separated (default 1,16,64)")
	peerTLS := flag.Bool("tls", false, "corral's peers speak mutual TLS (the others stay plaintext)")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	p := fullPlan()
	if *quick {
		p = quickPlan()
	}
	p.ProfileDir = *profile
	p.Syscalls = *syscalls
	p.TLS = *peerTLS
	if *callers != "" {
		p.RemoteCallers = nil
		for _, f := range strings.Split(*callers, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 || n > 1024 {
				fmt.Fprintf(os.Stderr, "bench: -callers: %q is not a count from 1 to 1024\n", f)
				os.Exit(2)
			}
			p.RemoteCallers = append(p.RemoteCallers, n)
		}
	}
	rep, err := run(ctx, p, strings.Split(*only, ","), os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	md := rep.markdown()
	fmt.Print(md)
	if *out != "" {
		if err := os.WriteFile(*out, []byte(md), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		fmt.Fprintln(os.Stderr, "bench: wrote", *out)
	}
}
