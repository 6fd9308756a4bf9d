package main

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
)

// The Go runtime sized for a cache in a container. Two things go wrong with the runtime's
// defaults in `corral serve`:
//
//   - It does not know the container's memory limit, so it lets the heap grow past it and the
//     kernel kills the pod, rather than collecting harder as the limit nears.
//   - GOGC=100 collects when the heap has doubled since the last collection. A cache's live
//     heap is small until it fills (a few MiB), and every request makes some garbage (net/http
//     allocates about 2 KiB a request): measured at 12 k hits a second, the runtime
//     collected 10 times a second with a 4 MiB goal, and each collection's millisecond or two
//     of marking and assists lands on the requests in flight, which is where an HTTP hit's
//     p99 went (GODEBUG=gctrace=1; docs/performance.md).
//
// So `corral serve` gives the runtime a memory limit from the cgroup (GOMEMLIMIT's
// mechanism) and a heap floor: the collector does not run until the heap reaches the floor,
// and above it GOGC=100 applies as usual (the heap may grow to twice what is live): a
// cache's entries are its live heap, and once they pass half the floor the floor is moot.
// The user's GOGC and GOMEMLIMIT win over both.

// runtimeConfig is what `corral serve` is told about the runtime.
type runtimeConfig struct {
	memoryLimit string // --memory-limit: "auto", "none", or a size
	gcHeapFloor string // --gc-heap-floor: "auto", "none", or a size
}

// Defaults of the runtime sizing: the share of the container's memory limit given to the Go
// runtime (the rest is headroom for memory it does not count — thread stacks outside Go,
// the kernel's socket buffers charged to the cgroup — and for the moment between crossing
// the limit and the collector catching up); the heap floor, and its largest share of the
// memory limit.
//
// The floor is a trade, measured under wrk at 64 connections of HTTP hits (5 s each, CPU time
// of the process per request): with none the runtime collected 81–111 times, with 32 MiB 8–9
// times, at the same or less CPU per request; 256 MiB collected never, but cost 30–50 % more
// CPU per request than 32 MiB — every allocation touched memory not touched since the last
// collection, page faults and cache misses — and held 240 MiB. 16 MiB collected 12–17 times,
// 64 MiB 3–4 times at 90 MiB of RSS.
const (
	memoryLimitShare = 0.9
	heapFloorDefault = 32 << 20
	heapFloorShare   = 0.25
)

func addRuntimeFlags(fs *flag.FlagSet, c *runtimeConfig) {
	fs.StringVar(&c.memoryLimit, "memory-limit", "auto", fmt.Sprintf("soft memory limit of the Go runtime (GOMEMLIMIT's): the collector works harder as the process nears it. auto = %.0f %% of the container's cgroup memory limit (v2 memory.max, v1 memory.limit_in_bytes), none without one; none; or a size (512MiB, 2GiB, bytes). GOMEMLIMIT in the environment wins", 100*memoryLimitShare))
	fs.StringVar(&c.gcHeapFloor, "gc-heap-floor", "auto", fmt.Sprintf("the collector does not run before the heap reaches this; above it GOGC=100 applies as usual. auto = %d MiB, or %.0f %% of the memory limit if that is less; none = the runtime's own pacing (a collection whenever the heap has doubled, 4 MiB at least); or a size. GOGC in the environment wins", heapFloorDefault>>20, 100*heapFloorShare))
}

func (c *runtimeConfig) validate() error {
	if _, _, err := parseSizeSetting(c.memoryLimit); err != nil {
		return fmt.Errorf("--memory-limit: %w", err)
	}
	if _, _, err := parseSizeSetting(c.gcHeapFloor); err != nil {
		return fmt.Errorf("--gc-heap-floor: %w", err)
	}
	return nil
}

// runtimePlan is what the runtime is given, and why.
type runtimePlan struct {
	memoryLimit int64  // bytes; 0 = none set here
	limitFrom   string // where memoryLimit came from, for the log
	heapFloor   uint64 // bytes; 0 = no floor
	floorFrom   string
}

// plan decides the runtime's sizing from the flags, the environment (getenv), the limit the
// runtime has now (GOMEMLIMIT's, math.MaxInt64 for none) and the container's memory limit
// (cgroupLimit, hasCgroupLimit false for none).
func (c *runtimeConfig) plan(getenv func(string) string, runtimeLimit, cgroupLimit int64, hasCgroupLimit bool) runtimePlan {
	var p runtimePlan
	auto, limit, _ := parseSizeSetting(c.memoryLimit)
	effective := int64(0) // the limit the floor is a share of
	switch {
	case getenv("GOMEMLIMIT") != "":
		p.limitFrom = "GOMEMLIMIT"
		if runtimeLimit < math.MaxInt64 {
			effective = runtimeLimit
		}
	case auto && hasCgroupLimit:
		p.memoryLimit, p.limitFrom = int64(float64(cgroupLimit)*memoryLimitShare), fmt.Sprintf("%.0f %% of the cgroup's %d MiB", 100*memoryLimitShare, cgroupLimit>>20)
	case auto:
		p.limitFrom = "none: no cgroup memory limit"
	case limit > 0:
		p.memoryLimit, p.limitFrom = limit, "--memory-limit"
	default:
		p.limitFrom = "none: --memory-limit"
	}
	effective = max(effective, p.memoryLimit)
	auto, floor, _ := parseSizeSetting(c.gcHeapFloor)
	switch {
	case getenv("GOGC") != "":
		p.floorFrom = "none: GOGC is set"
	case auto && effective > 0 && float64(effective)*heapFloorShare < heapFloorDefault:
		p.heapFloor, p.floorFrom = uint64(float64(effective)*heapFloorShare), fmt.Sprintf("%.0f %% of the memory limit", 100*heapFloorShare)
	case auto:
		p.heapFloor, p.floorFrom = heapFloorDefault, "auto"
	case floor > 0:
		p.heapFloor, p.floorFrom = uint64(floor), "--gc-heap-floor"
	default:
		p.floorFrom = "none: --gc-heap-floor"
	}
	return p
}

// parseSizeSetting reads "auto", "none" (or "0") or a size: bytes, or a number with KiB, MiB,
// GiB or TiB (Ki, Mi, Gi, Ti as Kubernetes writes them).
func parseSizeSetting(s string) (auto bool, size int64, err error) {
	switch s {
	case "auto":
		return true, 0, nil
	case "none", "0":
		return false, 0, nil
	}
	num, mult := s, int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40}, {"Ki", 1 << 10}, {"Mi", 1 << 20}, {"Gi", 1 << 30}, {"Ti", 1 << 40}} {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			num, mult = n, u.mult
			break
		}
	}
	v, err := strconv.ParseInt(num, 10, 64)
	if err != nil || v <= 0 || v > math.MaxInt64/mult {
		return false, 0, fmt.Errorf("%q: want auto, none, or a size such as 512MiB or 2GiB", s)
	}
	return false, v * mult, nil
}

// heapFloor keeps the collector from running before the heap reaches floor: after every
// collection it sets GOGC so that the next goal is the larger of floor and twice the live
// heap. It learns of each collection from a finalizer (the runtime runs it once the
// collection that found its object unreachable is over), so it has no goroutine of its own.
type heapFloor struct {
	floor        uint64
	setGCPercent func(int) int     // debug.SetGCPercent
	liveHeap     func() uint64     // the heap the last collection found live
	tuned        func(percent int) // called after each tuning; nil = nothing (for tests)

	// mu guards stopped and percent, so that a tuning that runs while stop does cannot set
	// GOGC after stop gave it back.
	mu      sync.Mutex
	stopped bool // the next finalizer does not re-arm
	percent int  // the GOGC last set
}

// errNoLiveHeap is returned when the runtime does not report the live heap.
var errNoLiveHeap = errors.New("the runtime does not report /gc/heap/live:bytes")

// startHeapFloor tunes GOGC for floor from now on, until stop.
func startHeapFloor(floor uint64, setGCPercent func(int) int) (*heapFloor, error) {
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(sample)
	if sample[0].Value.Kind() != metrics.KindUint64 {
		return nil, errNoLiveHeap
	}
	h := &heapFloor{floor: floor, setGCPercent: setGCPercent, liveHeap: func() uint64 {
		metrics.Read(sample) // under mu: one reader at a time
		return sample[0].Value.Uint64()
	}}
	h.tune()
	h.arm()
	return h, nil
}

// floorSentinel is the object whose finalizer marks the end of a collection. It holds a
// pointer so that it is not one of the runtime's tiny allocations, whose finalizers may
// never run.
type floorSentinel struct{ h *heapFloor }

func (h *heapFloor) arm() {
	runtime.SetFinalizer(&floorSentinel{h}, func(s *floorSentinel) {
		if s.h.tune() {
			s.h.arm()
		}
	})
}

// tune sets GOGC for the heap the last collection left live. It reports false once stopped.
func (h *heapFloor) tune() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stopped {
		return false
	}
	p := floorPercent(h.liveHeap(), h.floor)
	if p != h.percent {
		h.setGCPercent(p)
		h.percent = p
	}
	if h.tuned != nil {
		h.tuned(p)
	}
	return true
}

// stop ends the tuning and gives GOGC back its default. Safe to call twice.
func (h *heapFloor) stop() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.stopped {
		h.stopped = true
		h.setGCPercent(100)
	}
}

// runtimeHeapMinimum is the runtime's smallest heap goal at GOGC=100 (defaultHeapMinimum):
// it scales with GOGC, so at GOGC=p no goal is below heapMinimum × p/100.
const runtimeHeapMinimum = 4 << 20

// floorPercent is the GOGC whose goal is the larger of floor and twice live. The runtime's
// goal at GOGC=p is the larger of live × (1 + p/100) and its minimum, 4 MiB × p/100 (which
// scales with p): p is the largest for which neither passes the floor. It is never below 100,
// the runtime's default.
func floorPercent(live, floor uint64) int {
	live = max(live, 1<<20) // no division by 0
	if floor <= 2*live || floor <= runtimeHeapMinimum {
		return 100
	}
	p := min((floor-live)*100/live, floor*100/runtimeHeapMinimum)
	return int(min(max(p, 100), math.MaxInt32))
}
