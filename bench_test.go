package corral_test

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/maypok86/otter/v2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/corralcache/corral"
	"github.com/corralcache/corral/transport/peerpb"
)

// BenchmarkLocalHit compares a local hit through Group.Get (the keys are owned here) with a
// raw otter GetIfPresent of the same values, in parallel on all cores, in one run, the way a
// hot loop reads: each goroutine cycles over 1024 keys. Goal: ≤ 1.25× otter, and no
// allocation for string values.
func BenchmarkLocalHit(b *testing.B) {
	const nkeys = 1024
	keys := make([]string, nkeys)
	for i := range keys {
		keys[i] = fmt.Sprintf("key-%04d", i)
	}
	b.Run("otter", func(b *testing.B) {
		o := otter.Must(&otter.Options[string, string]{MaximumSize: 10_000})
		for _, k := range keys {
			o.Set(k, "value")
		}
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				if _, ok := o.GetIfPresent(keys[i%nkeys]); !ok {
					b.Fatal("miss")
				}
				i++
			}
		})
	})
	b.Run("group", func(b *testing.B) {
		n := newNode(b, testConfig("bench"))
		g, err := corral.NewGroup(n, "g", func(context.Context, string) (string, error) { return "value", nil }, corral.WithTTL(time.Hour))
		if err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		for _, k := range keys {
			g.Get(ctx, k)
		}
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				if _, err := g.Get(ctx, keys[i%nkeys]); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	})
}

// BenchmarkRemoteHit compares a remote hit through Group.Get (the key is owned by another
// node, near cache off, so every Get crosses the wire) with a bare unary gRPC call carrying
// the same 100-byte value, in one run, at 1, 16 and 64 concurrent callers. It reports the
// p50 latency and allocations per Get. Goal: p50 ≤ 1.3× the bare echo.
func BenchmarkRemoteHit(b *testing.B) {
	value := strings.Repeat("v", 100)
	nodes := []*corral.Node{}
	for i := range 2 {
		cfg := testConfig(fmt.Sprint("b", i))
		cfg.NearBytes = -1
		if i > 0 {
			cfg.Join = []string{nodes[0].GossipAddr()}
		}
		nodes = append(nodes, newNode(b, cfg))
	}
	waitMembers(b, nodes, 2)
	var gs []*corral.Group[string]
	for _, n := range nodes {
		g, err := corral.NewGroup(n, "g", func(context.Context, string) (string, error) { return value, nil }, corral.WithTTL(time.Hour))
		if err != nil {
			b.Fatal(err)
		}
		gs = append(gs, g)
	}
	key := keyOwnedBy(b, nodes[0], "remote")
	ctx := context.Background()
	if v, _ := gs[1].Get(ctx, key); v != value {
		b.Fatal("warm-up failed")
	}

	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := grpc.NewServer()
	peerpb.RegisterPeerServer(srv, echoServer{value: []byte(value)})
	go srv.Serve(lis)
	defer srv.Stop()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	echo := peerpb.NewPeerClient(conn)
	req := &peerpb.GetRequest{Group: "g", Key: []byte(key)}

	calls := map[string]func() error{
		"corral": func() error { _, err := gs[1].Get(ctx, key); return err },
		"bare-grpc-echo": func() error {
			_, err := echo.Get(ctx, req)
			return err
		},
	}
	for _, callers := range []int{1, 16, 64} {
		for _, name := range []string{"bare-grpc-echo", "corral"} {
			call := calls[name]
			b.Run(fmt.Sprintf("%s/callers=%d", name, callers), func(b *testing.B) {
				b.ReportAllocs()
				lat := make([][]time.Duration, callers)
				var wg sync.WaitGroup
				start := time.Now()
				for c := range callers {
					n := b.N / callers
					if c < b.N%callers {
						n++
					}
					wg.Go(func() {
						for range n {
							t0 := time.Now()
							if err := call(); err != nil {
								b.Error(err)
								return
							}
							lat[c] = append(lat[c], time.Since(t0))
						}
					})
				}
				wg.Wait()
				elapsed := time.Since(start)
				var all []time.Duration
				for _, l := range lat {
					all = append(all, l...)
				}
				slices.Sort(all)
				if len(all) > 0 {
					b.ReportMetric(float64(all[len(all)/2].Microseconds()), "p50-µs")
					b.ReportMetric(float64(all[len(all)*99/100].Microseconds()), "p99-µs")
				}
				b.ReportMetric(float64(b.N)/elapsed.Seconds(), "gets/s")
			})
		}
	}
}

// echoServer answers every Get with the same value: the bare gRPC baseline.
type echoServer struct {
	peerpb.UnimplementedPeerServer
	value []byte
}

func (s echoServer) Get(context.Context, *peerpb.GetRequest) (*peerpb.GetResponse, error) {
	return &peerpb.GetResponse{Entry: &peerpb.Entry{Value: s.value, FreshForNanos: int64(time.Hour)}, Found: true}, nil
}

// BenchmarkGetMany reads a page of 100 remote hits (3 nodes, near cache off, the caller owns
// none of the page's keys: they are the other two nodes'), as row 9 of docs/performance.md
// does: through one GetMany, and as 100 concurrent Gets, at 1 and 16 callers, each caller
// with a page of its own. An op is a page: allocs/op and B/op are a page's, on every node of
// the process, the owners' included. Goal (row 9): GetMany's throughput ≥ 5× the 100
// concurrent Gets'.
func BenchmarkGetMany(b *testing.B) {
	const pageKeys, maxCallers = 100, 16
	value := []byte(strings.Repeat("v", 100))
	var nodes []*corral.Node
	for i := range 3 {
		cfg := testConfig(fmt.Sprint("m", i))
		cfg.NearBytes = -1
		if i > 0 {
			cfg.Join = []string{nodes[0].GossipAddr()}
		}
		nodes = append(nodes, newNode(b, cfg))
	}
	waitMembers(b, nodes, 3)
	var gs []*corral.Group[[]byte]
	for _, n := range nodes {
		g, err := corral.NewGroup(n, "g", func(context.Context, string) ([]byte, error) { return value, nil }, corral.WithTTL(time.Hour))
		if err != nil {
			b.Fatal(err)
		}
		gs = append(gs, g)
	}
	ctx := context.Background()
	pages := make([][]string, maxCallers)
	for p := range pages {
		for i := 0; len(pages[p]) < pageKeys; i++ {
			k := fmt.Sprintf("page%d-%d", p, i)
			if nodes[0].Owner(k).Name != nodes[0].Name() {
				pages[p] = append(pages[p], k)
			}
		}
		if m, err := gs[0].GetMany(ctx, pages[p]); err != nil || len(m) != pageKeys {
			b.Fatalf("warm-up: %d values, %v", len(m), err)
		}
	}
	reads := map[string]func(keys []string) error{
		"getmany": func(keys []string) error {
			m, err := gs[0].GetMany(ctx, keys)
			if err == nil && len(m) != len(keys) {
				err = fmt.Errorf("GetMany found %d of %d keys", len(m), len(keys))
			}
			return err
		},
		"gets": func(keys []string) error {
			var wg sync.WaitGroup
			errs := make([]error, len(keys))
			for i, k := range keys {
				wg.Go(func() { _, errs[i] = gs[0].Get(ctx, k) })
			}
			wg.Wait()
			for _, err := range errs {
				if err != nil {
					return err
				}
			}
			return nil
		},
	}
	for _, callers := range []int{1, maxCallers} {
		for _, name := range []string{"getmany", "gets"} {
			read := reads[name]
			b.Run(fmt.Sprintf("%s/callers=%d", name, callers), func(b *testing.B) {
				b.ReportAllocs()
				lat := make([][]time.Duration, callers)
				var wg sync.WaitGroup
				start, startCPU := time.Now(), processCPU(b)
				for c := range callers {
					n := b.N / callers
					if c < b.N%callers {
						n++
					}
					wg.Go(func() {
						for range n {
							t0 := time.Now()
							if err := read(pages[c]); err != nil {
								b.Error(err)
								return
							}
							lat[c] = append(lat[c], time.Since(t0))
						}
					})
				}
				wg.Wait()
				elapsed, cpu := time.Since(start), time.Duration(processCPU(b)-startCPU)
				var all []time.Duration
				for _, l := range lat {
					all = append(all, l...)
				}
				slices.Sort(all)
				if len(all) > 0 {
					b.ReportMetric(float64(all[len(all)/2].Microseconds()), "p50-µs")
					b.ReportMetric(float64(all[len(all)*99/100].Microseconds()), "p99-µs")
				}
				b.ReportMetric(float64(b.N)/elapsed.Seconds(), "pages/s")
				// The CPU time of the whole process (the three nodes, both sides of every
				// request) per page: what the machine's other load does not change much.
				b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/page")
			})
		}
	}
}
