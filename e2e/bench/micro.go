package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/buraksezer/consistent"
	"github.com/cespare/xxhash/v2"
	"github.com/golang/groupcache"
	"github.com/golang/groupcache/consistenthash"
	"github.com/maypok86/otter/v2"
	"github.com/redis/go-redis/v9"

	"github.com/corralcache/corral"
	"github.com/corralcache/corral/fill"
	"github.com/corralcache/corral/ring"
)

// Worker ops for the in-process measurements: local hits, memory per entry and ring lookups.
// They run with testing.Benchmark, so ns/op and allocs/op mean what `go test -bench` means.

type benchResult struct {
	NsPerOp     float64
	AllocsPerOp int64
	BytesPerOp  int64
	N           int
}

func toResult(r testing.BenchmarkResult) benchResult {
	return benchResult{
		NsPerOp:     float64(r.T.Nanoseconds()) / float64(max(r.N, 1)),
		AllocsPerOp: r.AllocsPerOp(), BytesPerOp: r.AllocedBytesPerOp(), N: r.N,
	}
}

// parallel benchmarks f in parallel on GOMAXPROCS goroutines; each goroutine passes 0, 1,
// 2, … to its calls.
func parallel(f func(i int)) benchResult {
	return toResult(testing.Benchmark(func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for i := 0; pb.Next(); i++ {
				f(i)
			}
		})
	}))
}

func serial(f func(i int)) benchResult {
	return toResult(testing.Benchmark(func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			f(i)
		}
	}))
}

type localHitArgs struct {
	System string   // "otter", "otter-get", "corral", "groupcache"
	Node   string   // corral node
	Group  string   // corral or groupcache group
	Keys   []string // each goroutine cycles over them, as a hot loop over a working set does
}

var errMiss = errors.New("local hit benchmark: the key is not held")

func init() {
	ops["localhit"] = func(ctx context.Context, w *workerState, raw json.RawMessage) (any, error) {
		var a localHitArgs
		if err := json.Unmarshal(raw, &a); err != nil {
			return nil, err
		}
		// failed keeps the first error of a Get under benchmark; a hit path that fails would
		// otherwise look fast.
		var (
			mu     sync.Mutex
			failed error
		)
		fail := func(err error) {
			mu.Lock()
			defer mu.Unlock()
			if failed == nil {
				failed = err
			}
		}
		if len(a.Keys) == 0 {
			return nil, errors.New("local hit benchmark: no keys")
		}
		key := func(i int) string { return a.Keys[i%len(a.Keys)] }
		var f func(i int)
		switch a.System {
		case "otter", "otter-get":
			o, err := state[*otter.Cache[string, []byte]](w, "otter.local")
			if err != nil {
				o = otter.Must(&otter.Options[string, []byte]{MaximumSize: 10_000})
				w.put("otter.local", o, func() { o.StopAllGoroutines() })
			}
			for _, k := range a.Keys {
				o.Set(k, payload(100))
			}
			if a.System == "otter" {
				f = func(i int) {
					if _, ok := o.GetIfPresent(key(i)); !ok {
						fail(errMiss)
					}
				}
				break
			}
			loader := otter.LoaderFunc[string, []byte](func(context.Context, string) ([]byte, error) { return payload(100), nil })
			f = func(i int) {
				if _, err := o.Get(ctx, key(i), loader); err != nil {
					fail(err)
				}
			}
		case "corral":
			g, err := state[*corral.Group[[]byte]](w, "corral/"+a.Node+"/"+a.Group)
			if err != nil {
				return nil, err
			}
			f = func(i int) {
				if _, err := g.Get(ctx, key(i)); err != nil {
					fail(err)
				}
			}
		case "groupcache":
			g := groupcache.GetGroup(a.Group)
			if g == nil {
				return nil, errors.New("no groupcache group " + a.Group)
			}
			f = func(i int) {
				var v groupcache.ByteView
				if err := g.Get(ctx, key(i), groupcache.ByteViewSink(&v)); err != nil {
					fail(err)
				}
			}
		default:
			return nil, fmt.Errorf("unknown system %q", a.System)
		}
		for i := range a.Keys { // warm: the first Get of each key may fill
			f(i)
		}
		mu.Lock()
		failed = nil
		mu.Unlock()
		res := parallel(f)
		mu.Lock()
		defer mu.Unlock()
		return res, failed
	}

	ops["memory"] = func(ctx context.Context, w *workerState, raw json.RawMessage) (any, error) {
		var a memoryArgs
		if err := json.Unmarshal(raw, &a); err != nil {
			return nil, err
		}
		return measureMemory(ctx, w, a)
	}

	ops["ring"] = func(context.Context, *workerState, json.RawMessage) (any, error) {
		return benchRings()
	}
}

type memoryArgs struct {
	System  string // "otter", "otter-as-corral", "corral", "fill", "groupcache", "redis"
	Entries int
	Redis   string // the redis client's name, for "redis"
}

type memoryResult struct {
	BytesPerEntry float64
	Held          int // entries the cache says it holds
}

// memKey and memValue are the 32-byte keys and values of the memory measurement, made anew
// on each call so the cache under test holds the only reference.
func memKey(i int) string   { return fmt.Sprintf("key:%028d", i) }
func memValue(i int) string { return fmt.Sprintf("val:%028d", i) }

func heapAlloc() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// measureMemory fills one cache with a.Entries entries and returns the live heap it added
// per entry, after runtime.GC(). It runs in a fresh worker, so nothing else grows the heap.
func measureMemory(ctx context.Context, w *workerState, a memoryArgs) (memoryResult, error) {
	n := a.Entries
	var (
		before uint64
		held   func() int
		keep   any
	)
	switch a.System {
	case "otter":
		before = heapAlloc()
		o := otter.Must(&otter.Options[string, string]{MaximumSize: 2 * n})
		for i := range n {
			o.Set(memKey(i), memValue(i))
		}
		held, keep = func() int { return o.EstimatedSize() }, o
	case "otter-as-corral":
		// otter with the features corral's store uses: a weight bound and a pointer to an entry
		// struct around the value (here only the value and an expiry instant; corral checks
		// expiry itself, so otter keeps none).
		type entry struct {
			value string
			fresh int64
		}
		before = heapAlloc()
		o := otter.Must(&otter.Options[string, *entry]{
			MaximumWeight: 1 << 30,
			Weigher:       func(k string, e *entry) uint32 { return uint32(len(k) + len(e.value) + 128) },
		})
		for i := range n {
			o.Set(memKey(i), &entry{value: memValue(i), fresh: int64(i)})
		}
		held, keep = func() int { return o.EstimatedSize() }, o
	case "corral":
		node, err := corral.New(corral.Config{Name: "mem", BindAddr: "127.0.0.1", DrainTimeout: -1})
		if err != nil {
			return memoryResult{}, err
		}
		defer node.Close(context.Background()) // alone: no hand-off, no drain
		g, err := corral.NewGroup(node, "mem", func(_ context.Context, key string) (string, error) {
			var i int
			fmt.Sscanf(key, "key:%d", &i)
			return memValue(i), nil
		}, corral.WithTTL(time.Hour), corral.WithMaxBytes(1<<30))
		if err != nil {
			return memoryResult{}, err
		}
		before = heapAlloc()
		for i := range n {
			if _, err := g.Get(ctx, memKey(i)); err != nil {
				return memoryResult{}, err
			}
		}
		held, keep = func() int { return g.Stats().Entries }, g
	case "fill":
		c, err := fill.New(func(_ context.Context, key string) (string, error) {
			var i int
			fmt.Sscanf(key, "key:%d", &i)
			return memValue(i), nil
		}, fill.Config[string]{TTL: time.Hour, MaxBytes: 1 << 30})
		if err != nil {
			return memoryResult{}, err
		}
		defer c.Close(context.Background())
		before = heapAlloc()
		for i := range n {
			if _, err := c.Get(ctx, memKey(i)); err != nil {
				return memoryResult{}, err
			}
		}
		held, keep = func() int { return c.Stats().Entries }, c
	case "groupcache":
		g := groupcache.NewGroup("mem", 1<<30, groupcache.GetterFunc(func(_ context.Context, key string, dest groupcache.Sink) error {
			var i int
			fmt.Sscanf(key, "key:%d", &i)
			return dest.SetString(memValue(i))
		}))
		before = heapAlloc()
		for i := range n {
			var v groupcache.ByteView
			if err := g.Get(ctx, memKey(i), groupcache.ByteViewSink(&v)); err != nil {
				return memoryResult{}, err
			}
		}
		held, keep = func() int { return int(g.CacheStats(groupcache.MainCache).Items) }, g
	case "redis":
		rdb, err := state[*redis.Client](w, "redis/"+a.Redis)
		if err != nil {
			return memoryResult{}, err
		}
		if err := rdb.FlushAll(ctx).Err(); err != nil {
			return memoryResult{}, err
		}
		used := func() (int64, error) {
			info, err := rdb.Info(ctx, "memory").Result()
			if err != nil {
				return 0, err
			}
			return infoField(info, "used_memory")
		}
		b, err := used()
		if err != nil {
			return memoryResult{}, err
		}
		for start := 0; start < n; start += 1000 {
			p := rdb.Pipeline()
			for i := start; i < min(start+1000, n); i++ {
				p.Set(ctx, memKey(i), memValue(i), 0)
			}
			if _, err := p.Exec(ctx); err != nil {
				return memoryResult{}, err
			}
		}
		after, err := used()
		if err != nil {
			return memoryResult{}, err
		}
		size, err := rdb.DBSize(ctx).Result()
		if err != nil {
			return memoryResult{}, err
		}
		rdb.FlushAll(ctx)
		return memoryResult{BytesPerEntry: float64(after-b) / float64(n), Held: int(size)}, nil
	default:
		return memoryResult{}, fmt.Errorf("unknown system %q", a.System)
	}
	after := heapAlloc()
	res := memoryResult{BytesPerEntry: (float64(after) - float64(before)) / float64(n), Held: held()}
	runtime.KeepAlive(keep)
	return res, nil
}

// ringResult is each ring's owner lookup, serial and parallel.
type ringResult map[string]benchResult

type ringMember string

func (m ringMember) String() string { return string(m) }

type xxHasher struct{}

func (xxHasher) Sum64(b []byte) uint64 { return xxhash.Sum64(b) }

// benchRings measures an owner lookup over 5 members in corral's ring, in consistent (with
// corral's configuration: corral's ring is built from it) and in groupcache's consistenthash
// (HTTPPool's defaults: 50 replicas, CRC-32).
func benchRings() (ringResult, error) {
	const members = 5
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = fmt.Sprintf("user:%d:profile", i*7919)
	}
	var names, urls []string
	for i := range members {
		names = append(names, fmt.Sprintf("corral-%d", i))
		urls = append(urls, fmt.Sprintf("http://10.0.0.%d:8080", i+1))
	}
	r, err := ring.New(names, ring.DefaultConfig())
	if err != nil {
		return nil, err
	}
	rc := ring.DefaultConfig()
	c := consistent.New(nil, consistent.Config{
		PartitionCount: rc.PartitionCount, ReplicationFactor: rc.ReplicationFactor, Load: rc.Load, Hasher: xxHasher{},
	})
	for _, n := range names {
		c.Add(ringMember(n))
	}
	gc := consistenthash.New(gcReplicas, nil)
	gc.Add(urls...)

	var sink string
	lookups := map[string]func(key string) string{
		"corral":     r.Owner,
		"consistent": func(k string) string { return c.LocateKey([]byte(k)).String() },
		"groupcache": gc.Get,
	}
	res := ringResult{}
	for _, name := range []string{"corral", "consistent", "groupcache"} {
		f := lookups[name]
		res[name+"/serial"] = serial(func(i int) { sink = f(keys[i&1023]) })
		res[name+"/parallel"] = toResult(testing.Benchmark(func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				var s string
				for i := 0; pb.Next(); i++ {
					s = f(keys[i&1023])
				}
				_ = s
			})
		}))
	}
	_ = sink
	return res, nil
}
