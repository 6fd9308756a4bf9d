package corral_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/corralcache/corral"
)

// BenchmarkRemoteHitTraced is BenchmarkRemoteHit's corral row with tracing off and on: each
// node with an SDK TracerProvider that keeps 1% of traces (ParentBased(TraceIDRatioBased(0.01)),
// as a production setup samples) and hands them to a batching exporter that drops them, so
// the cost measured is the spans' and the trace context's, not an exporter's network. It
// reports cpu-ns/op beside ns/op: the process's CPU time per Get, both nodes' share, which a
// busy machine disturbs far less than wall time. Goal: on costs at most 10% more than off.
//
// Two modes trace. "1%": every Get is a root (its ctx carries no span), so the sampler
// decides each one — a Get made outside any traced request. "1%-request": every Get runs
// under the trace context of the request it serves, as under an instrumented HTTP or gRPC
// server, one request in 100 sampled — the sampler's decision made once, upstream.
func BenchmarkRemoteHitTraced(b *testing.B) {
	for _, mode := range []string{"off", "1%", "1%-request"} {
		for _, callers := range []int{1, 16} {
			b.Run(fmt.Sprintf("tracing=%s/callers=%d", mode, callers), func(b *testing.B) {
				var tp trace.TracerProvider
				if mode != "off" {
					sdk := sdktrace.NewTracerProvider(
						sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(0.01))),
						sdktrace.WithBatcher(tracetest.NewNoopExporter()))
					defer sdk.Shutdown(context.Background())
					tp = sdk
				}
				g, key := remoteHitPair(b, tp)
				ctxs := []context.Context{context.Background()}
				if mode == "1%-request" {
					ctxs = requestContexts(100)
				}
				b.ReportAllocs()
				b.ResetTimer()
				cpu0 := processCPU(b)
				var wg sync.WaitGroup
				for c := range callers {
					n := b.N / callers
					if c < b.N%callers {
						n++
					}
					wg.Go(func() {
						for i := range n {
							if _, err := g.Get(ctxs[i%len(ctxs)], key); err != nil {
								b.Error(err)
								return
							}
						}
					})
				}
				wg.Wait()
				b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
			})
		}
	}
}

// requestContexts returns n contexts, each carrying the trace context of an incoming request
// (a remote span), the first sampled and the others not.
func requestContexts(n int) []context.Context {
	ctxs := make([]context.Context, n)
	for i := range ctxs {
		var tid trace.TraceID
		var sid trace.SpanID
		tid[0], tid[15], sid[7] = 1, byte(i+1), 1
		flags := trace.TraceFlags(0)
		if i == 0 {
			flags = trace.FlagsSampled
		}
		sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: flags, Remote: true})
		ctxs[i] = trace.ContextWithRemoteSpanContext(context.Background(), sc)
	}
	return ctxs
}

// processCPU returns the CPU time this process has used, user and system, in nanoseconds:
// both nodes' work for a Get, whatever else the machine runs (wall time per Get on a shared
// machine says more of the neighbours than of the Get).
func processCPU(b *testing.B) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// remoteHitPair starts two nodes tracing with tp (nil: none), near caches off, and returns
// the second's group and a key the first owns, already filled.
func remoteHitPair(b *testing.B, tp trace.TracerProvider) (*corral.Group[string], string) {
	value := strings.Repeat("v", 100)
	var nodes []*corral.Node
	for i := range 2 {
		cfg := testConfig(fmt.Sprint("t", i))
		cfg.NearBytes, cfg.TracerProvider = -1, tp
		if i > 0 {
			cfg.Join = []string{nodes[0].GossipAddr()}
		}
		nodes = append(nodes, newNode(b, cfg))
	}
	waitMembers(b, nodes, 2)
	gs := groups(b, nodes, "g", func(context.Context, string) (string, error) { return value, nil }, corral.WithTTL(time.Hour))
	key := keyOwnedBy(b, nodes[0], "remote")
	if v, _ := gs[1].Get(context.Background(), key); v != value {
		b.Fatal("warm-up failed")
	}
	return gs[1], key
}
