package main

import (
	"math"
	"runtime"
	"sync"
	"testing"
	"testing/fstest"
	"time"
)

func TestCgroupMemoryLimit(t *testing.T) {
	const v1None = "9223372036854771712\n"
	tests := []struct {
		name  string
		files map[string]string
		want  int64 // 0 = none
	}{
		{"no-proc", map[string]string{}, 0},
		{"v2-limit", map[string]string{
			"proc/self/cgroup":                          "0::/kubepods/pod1/c1\n",
			"sys/fs/cgroup/kubepods/pod1/c1/memory.max": "536870912\n",
		}, 512 << 20},
		{"v2-max", map[string]string{
			"proc/self/cgroup":         "0::/\n",
			"sys/fs/cgroup/memory.max": "max\n",
		}, 0},
		{"v2-parent-tighter", map[string]string{
			"proc/self/cgroup":                          "0::/kubepods/pod1/c1\n",
			"sys/fs/cgroup/kubepods/pod1/c1/memory.max": "max\n",
			"sys/fs/cgroup/kubepods/pod1/memory.max":    "268435456\n",
		}, 256 << 20},
		{"v2-namespaced", map[string]string{ // a cgroup namespace: the container's cgroup is the root
			"proc/self/cgroup":         "0::/\n",
			"sys/fs/cgroup/memory.max": "1073741824\n",
		}, 1 << 30},
		{"v1-limit", map[string]string{
			"proc/self/cgroup": "12:pids:/docker/abc\n4:memory:/docker/abc\n1:cpu,cpuacct:/docker/abc\n",
			"sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes": "2147483648\n",
		}, 2 << 30},
		{"v1-none", map[string]string{
			"proc/self/cgroup": "4:memory:/docker/abc\n",
			"sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes": v1None,
			"sys/fs/cgroup/memory/memory.limit_in_bytes":            v1None,
		}, 0},
		{"v1-container-root", map[string]string{ // the host's path is not mounted in the container
			"proc/self/cgroup":                           "4:memory:/docker/abc\n",
			"sys/fs/cgroup/memory/memory.limit_in_bytes": "805306368\n",
		}, 768 << 20},
		{"hybrid", map[string]string{ // v1 memory controller beside an empty unified hierarchy
			"proc/self/cgroup": "4:memory:/process_api/x\n0::/\n",
			"sys/fs/cgroup/memory/process_api/x/memory.limit_in_bytes": "1073741824\n",
		}, 1 << 30},
		{"garbage", map[string]string{
			"proc/self/cgroup":         "0::/\nnot a line\n",
			"sys/fs/cgroup/memory.max": "lots\n",
		}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fsys := fstest.MapFS{}
			for name, data := range tt.files {
				fsys[name] = &fstest.MapFile{Data: []byte(data)}
			}
			got, ok := cgroupMemoryLimit(fsys)
			if got != tt.want || ok != (tt.want > 0) {
				t.Errorf("cgroupMemoryLimit = %d, %v; want %d", got, ok, tt.want)
			}
		})
	}
}

func TestRuntimePlan(t *testing.T) {
	const gib = 1 << 30
	none := int64(math.MaxInt64)
	tests := []struct {
		name                 string
		memoryLimit, floor   string
		env                  map[string]string
		runtimeLimit, cgroup int64 // cgroup 0 = no limit
		wantLimit            int64
		wantFloor            uint64
	}{
		{"container", "auto", "auto", nil, none, 4 * gib, 4 * gib * 9 / 10, heapFloorDefault},
		{"small-container", "auto", "auto", nil, none, 100 << 20, 90 << 20, 90 << 20 / 4},
		{"no-container", "auto", "auto", nil, none, 0, 0, heapFloorDefault},
		{"flags", "2GiB", "512Mi", nil, none, 4 * gib, 2 * gib, 512 << 20},
		{"flag-limit-auto-floor", "64MiB", "auto", nil, none, 0, 64 << 20, 16 << 20},
		{"none", "none", "none", nil, none, 4 * gib, 0, 0},
		{"gomemlimit-wins", "2GiB", "auto", map[string]string{"GOMEMLIMIT": "100MiB"}, 100 << 20, 4 * gib, 0, 25 << 20},
		{"gogc-wins", "auto", "1GiB", map[string]string{"GOGC": "200"}, none, 4 * gib, 4 * gib * 9 / 10, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := runtimeConfig{memoryLimit: tt.memoryLimit, gcHeapFloor: tt.floor}
			if err := c.validate(); err != nil {
				t.Fatal(err)
			}
			p := c.plan(func(k string) string { return tt.env[k] }, tt.runtimeLimit, tt.cgroup, tt.cgroup > 0)
			if p.memoryLimit != tt.wantLimit || p.heapFloor != tt.wantFloor {
				t.Errorf("plan = limit %d (%s), floor %d (%s); want %d, %d", p.memoryLimit, p.limitFrom, p.heapFloor, p.floorFrom, tt.wantLimit, tt.wantFloor)
			}
		})
	}
}

func TestParseSizeSetting(t *testing.T) {
	tests := []struct {
		in   string
		auto bool
		size int64
		ok   bool
	}{
		{"auto", true, 0, true},
		{"none", false, 0, true},
		{"0", false, 0, true},
		{"1048576", false, 1 << 20, true},
		{"512MiB", false, 512 << 20, true},
		{"2Gi", false, 2 << 30, true},
		{"1TiB", false, 1 << 40, true},
		{"-1", false, 0, false},
		{"1.5GiB", false, 0, false},
		{"9999999TiB", false, 0, false},
		{"lots", false, 0, false},
		{"", false, 0, false},
	}
	for _, tt := range tests {
		auto, size, err := parseSizeSetting(tt.in)
		if auto != tt.auto || size != tt.size || (err == nil) != tt.ok {
			t.Errorf("parseSizeSetting(%q) = %v, %d, %v; want %v, %d, ok %v", tt.in, auto, size, err, tt.auto, tt.size, tt.ok)
		}
	}
}

func TestFloorPercent(t *testing.T) {
	tests := []struct {
		live, floor uint64
		want        int
	}{
		{4 << 20, 256 << 20, 6300},  // goal 4 MiB × 64 = 256 MiB
		{1 << 20, 256 << 20, 6400},  // the minimum, 4 MiB × 64, is the floor (live × 65 is 65 MiB)
		{0, 32 << 20, 800},          // an empty heap: the minimum, 4 MiB × 8
		{16 << 20, 256 << 20, 1500}, // live × 16
		{128 << 20, 256 << 20, 100}, // twice live reaches the floor: GOGC's own
		{1 << 30, 256 << 20, 100},   // past the floor
		{1 << 20, 4 << 20, 100},     // a floor at the runtime's own minimum
	}
	for _, tt := range tests {
		if got := floorPercent(tt.live, tt.floor); got != tt.want {
			t.Errorf("floorPercent(%d, %d) = %d, want %d", tt.live, tt.floor, got, tt.want)
		}
	}
}

// TestHeapFloorTunes checks that the floor sets GOGC after a collection, and gives it back on
// stop. The GOGC it sets is a fake's: the test binary's own is left alone.
func TestHeapFloorTunes(t *testing.T) {
	var mu sync.Mutex
	var set []int // every GOGC set, in order
	last := func() (int, int) {
		mu.Lock()
		defer mu.Unlock()
		return set[len(set)-1], len(set)
	}
	h, err := startHeapFloor(1<<40, func(p int) int { mu.Lock(); set = append(set, p); mu.Unlock(); return 100 })
	if err != nil {
		t.Fatal(err)
	}
	if p, _ := last(); p <= 100 {
		t.Fatalf("GOGC %d for a floor of 1 TiB, want more than 100", p)
	}
	tuned := make(chan int, 1)
	h.mu.Lock()
	h.tuned = func(p int) {
		select {
		case tuned <- p:
		default:
		}
	}
	h.mu.Unlock()
	runtime.GC()
	select {
	case <-tuned: // a collection's end re-tuned it
	case <-time.After(10 * time.Second):
		t.Fatal("no tuning within 10 s of a collection")
	}
	h.stop()
	h.stop()
	p, n := last()
	if p != 100 {
		t.Errorf("stop set GOGC %d, want 100", p)
	}
	runtime.GC()
	if _, m := last(); m != n {
		t.Errorf("GOGC set %d times more after stop", m-n)
	}
}
