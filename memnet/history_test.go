//go:debug randseednop=0

// The directive above lets rand.Seed seed math/rand's global source (a no-op by default since
// Go 1.24): memberlist draws its randomness from it, and the replay measurement needs it
// seeded from the history's seed.

package memnet_test

import (
	"flag"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	oldrand "math/rand"

	"github.com/hashicorp/memberlist"

	"github.com/corralcache/corral/memnet"
)

var (
	flagHistories = flag.Int("memnet.histories", 0, "run this many seeded 5-node histories of 30 virtual seconds and report their cost (0 = skip)")
	flagParallel  = flag.Int("memnet.parallel", 1, "with -memnet.histories, run this many histories at a time")
	flagReplay    = flag.Int("memnet.replay", 0, "run one seeded history this many times and report how many distinct traces it gave (0 = skip)")
	flagSeed      = flag.Uint64("memnet.seed", 1, "with -memnet.replay, the seed")
	flagNoGlobal  = flag.Bool("memnet.noglobalseed", false, "do not seed math/rand's global source (memberlist's randomness) from the history's seed")
	flagNoTrace   = flag.Bool("memnet.notrace", false, "do not hash the network's events")
	flagNoCompr   = flag.Bool("memnet.nocompress", false, "turn memberlist's compression off")
	flagDetune    = flag.Bool("memnet.detune", false, "give each member's GossipInterval a seeded sub-millisecond offset, so its gossip and probe tickers never fire at one instant")
	flagNoStagger = flag.Bool("memnet.nostagger", false, "start every member at the same virtual instant, not at seeded distinct ones")
	flagTraceFile = flag.String("memnet.tracefile", "", "with -memnet.replay, write run i's network and membership events to this path + .i")
)

// history is what one run of runHistory produced.
type history struct {
	lines       []string // every network event, when -memnet.tracefile or -memnet.replay is set
	netTrace    uint64   // hash of every network event, with its virtual time
	netEvents   int
	memberTrace uint64 // hash of every join and leave each member saw, with its virtual time
	views       string // the final views
	stats       memnet.Stats
}

// globalRandMu serialises histories that seed math/rand's global source: two at once would
// draw from each other's sequence.
var globalRandMu sync.Mutex

// runHistory runs one seeded history in the caller's bubble: 5 members with memberlist's LAN
// defaults over links of 1ms ± 1ms and 1% loss; at 5s a random member crashes, at 10s the
// other four split 2 + 2, at 18s the partition heals and the sides rejoin, at 20s the crashed
// member restarts and rejoins; at 30s everything shuts down.
func runHistory(t *testing.T, seed uint64) history {
	if !*flagNoGlobal {
		globalRandMu.Lock()
		defer globalRandMu.Unlock()
		oldrand.Seed(int64(seed))
	}
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	var h history
	trace := fnv.New64a()
	cfg := memnet.Config{
		Rand: r,
		Link: memnet.Link{Delay: time.Millisecond, Jitter: time.Millisecond, Loss: 0.01},
		Trace: func(e memnet.Event) {
			h.netEvents++
			line := e.String()
			trace.Write([]byte(line))
			if *flagTraceFile != "" || *flagReplay > 0 {
				h.lines = append(h.lines, line)
			}
		},
	}
	if *flagNoTrace {
		cfg.Trace = nil
	}
	n, err := memnet.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tune := func(c *memberlist.Config) {
		if *flagNoCompr {
			c.EnableCompression = false
		}
		if *flagDetune {
			c.GossipInterval += time.Duration(1 + r.Int64N(int64(time.Millisecond)))
		}
	}
	var stagger func()
	if !*flagNoStagger {
		// Each member starts at its own instant, as real processes do: virtual clocks do not
		// drift, so members started at one instant would fire their tickers at one instant for
		// ever, and which of them runs first (and so draws which number from memberlist's
		// shared math/rand source) would be the scheduler's choice.
		stagger = func() { time.Sleep(time.Duration(1 + r.Int64N(int64(time.Millisecond)))) }
	}
	c := newStaggeredCluster(t, n, 5, tune, stagger)
	crashed := c.nodes[1+r.IntN(4)]
	var rest []*member
	for _, m := range c.nodes {
		if m != crashed {
			rest = append(rest, m)
		}
	}
	r.Shuffle(len(rest), func(i, j int) { rest[i], rest[j] = rest[j], rest[i] })
	left, right := rest[:2], rest[2:]

	time.Sleep(5 * time.Second)
	crashed.h.Crash()
	crashed.ml.Shutdown()

	time.Sleep(5 * time.Second)
	n.Partition([]*memnet.Host{left[0].h, left[1].h}, []*memnet.Host{right[0].h, right[1].h})

	time.Sleep(8 * time.Second)
	n.Heal()
	left[0].ml.Join([]string{right[0].tr.Addr()})

	time.Sleep(2 * time.Second)
	crashed.h.Restart()
	m := c.startMember(crashed.h, crashed.name)
	m.ml.Join([]string{rest[0].tr.Addr()})

	time.Sleep(10 * time.Second)
	for _, m := range c.nodes {
		h.views += fmt.Sprint(m.name, m.view(), " ")
	}
	c.shutdown()

	mt := fnv.New64a()
	for _, e := range c.events() {
		mt.Write([]byte(e.String()))
		if *flagTraceFile != "" {
			h.lines = append(h.lines, "member "+e.String()) // after the network events
		}
	}
	// Stats takes the network's lock, under which Trace ran: after it, the trace is ours to
	// read (a goroutine that traced may have ended without any other synchronisation).
	h.stats = n.Stats()
	h.netTrace, h.memberTrace = trace.Sum64(), mt.Sum64()
	return h
}

// TestHistory runs one history, so that the measurement's scenario keeps working.
func TestHistory(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := runHistory(t, 1)
		t.Logf("%d network events, %+v; final views: %s", h.netEvents, h.stats, h.views)
	})
}

// cpuTime returns the CPU time (user + system) this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestMeasureHistories reports what -memnet.histories histories cost in wall-clock and CPU
// time, -memnet.parallel at a time, and what that means in histories per minute.
func TestMeasureHistories(t *testing.T) {
	total := *flagHistories
	if total == 0 {
		t.Skip("-memnet.histories not set")
	}
	par := max(1, *flagParallel)
	var events, packets int64
	var mu sync.Mutex
	startWall, startCPU := time.Now(), cpuTime()
	t.Run("group", func(t *testing.T) {
		for w := range par {
			t.Run(fmt.Sprint("worker", w), func(t *testing.T) {
				t.Parallel()
				for i := w; i < total; i += par {
					synctest.Test(t, func(t *testing.T) {
						h := runHistory(t, uint64(i)+1)
						mu.Lock()
						events += int64(h.netEvents)
						packets += h.stats.PacketsSent
						mu.Unlock()
					})
				}
			})
		}
	})
	wall, cpu := time.Since(startWall), cpuTime()-startCPU
	t.Logf("GOMAXPROCS=%d, %d histories %d at a time: wall %v (%v each), CPU %v (%v each); %.0f histories/minute; %d network events, %d packets per history",
		runtime.GOMAXPROCS(0), total, par, wall.Round(time.Millisecond), (wall / time.Duration(total)).Round(time.Microsecond),
		cpu.Round(time.Millisecond), (cpu / time.Duration(total)).Round(time.Microsecond),
		float64(total)/wall.Minutes(), events/int64(total), packets/int64(total))
}

// TestMeasureReplay runs one seeded history -memnet.replay times and reports how many distinct
// network traces, membership traces and final views the runs gave.
func TestMeasureReplay(t *testing.T) {
	runs := *flagReplay
	if runs == 0 {
		t.Skip("-memnet.replay not set")
	}
	netTraces, memberTraces, views := map[uint64]int{}, map[uint64]int{}, map[string]int{}
	var first []string                     // run 0's network events
	var exact, sameInstant []time.Duration // per later run: virtual time of the first difference from run 0
	for i := range runs {
		synctest.Test(t, func(t *testing.T) {
			h := runHistory(t, *flagSeed)
			if *flagTraceFile != "" {
				if err := os.WriteFile(fmt.Sprint(*flagTraceFile, ".", i), []byte(strings.Join(h.lines, "\n")+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if i == 0 {
				first = h.lines
			} else {
				exact = append(exact, divergence(first, h.lines, false))
				sameInstant = append(sameInstant, divergence(first, h.lines, true))
			}
			netTraces[h.netTrace]++
			memberTraces[h.memberTrace]++
			views[h.views]++
		})
	}
	counts := func(m map[uint64]int) []int {
		var c []int
		for _, k := range m {
			c = append(c, k)
		}
		slices.Sort(c)
		slices.Reverse(c)
		return c
	}
	t.Logf("GOMAXPROCS=%d, seed %d, global rand seeded: %v, %d runs: %d distinct network traces %v, %d distinct membership traces %v, %d distinct final views",
		runtime.GOMAXPROCS(0), *flagSeed, !*flagNoGlobal, runs, len(netTraces), counts(netTraces),
		len(memberTraces), counts(memberTraces), len(views))
	slices.Sort(exact)
	slices.Sort(sameInstant)
	if len(exact) > 0 {
		t.Logf("first difference from run 0 (virtual time; 30s = none): exact order: min %v median %v max %v; ignoring order within one instant: min %v median %v max %v",
			exact[0], exact[len(exact)/2], exact[len(exact)-1], sameInstant[0], sameInstant[len(sameInstant)/2], sameInstant[len(sameInstant)-1])
	}
}

// divergence returns the virtual time (since the history began) of the first event where b
// differs from a, or historyLength when none does. With sameInstant, events of one instant are
// compared as sets: only their order differs.
func divergence(a, b []string, sameInstant bool) time.Duration {
	if sameInstant {
		a, b = sortInstants(a), sortInstants(b)
	}
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return eventTime(a[i])
		}
	}
	if len(a) != len(b) {
		return eventTime(slices.Concat(a, b)[min(len(a), len(b))])
	}
	return historyLength
}

const historyLength = 30 * time.Second

// sortInstants returns lines with each run of lines of the same instant sorted.
func sortInstants(lines []string) []string {
	out := slices.Clone(lines)
	for i := 0; i < len(out); {
		j := i + 1
		for j < len(out) && eventTime(out[j]) == eventTime(out[i]) {
			j++
		}
		slices.Sort(out[i:j])
		i = j
	}
	return out
}

// eventTime parses the time an Event's String starts with, as the time since midnight.
func eventTime(line string) time.Duration {
	ts, _, _ := strings.Cut(line, " ")
	tm, err := time.Parse("15:04:05.000000", ts)
	if err != nil {
		return 0
	}
	return tm.Sub(time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC))
}
