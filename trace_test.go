package corral_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/corralcache/corral"
	"github.com/corralcache/corral/internal/clustertest"
)

// tracedCluster starts size nodes, each tracing every span into a recorder of its own (as
// each process exports its own), and waits until every node sees all of them.
func tracedCluster(tb testing.TB, size int, keys corral.TraceKeys) ([]*corral.Node, []*tracetest.SpanRecorder) {
	tb.Helper()
	var nodes []*corral.Node
	var recs []*tracetest.SpanRecorder
	for i := range size {
		rec := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithSampler(sdktrace.AlwaysSample()))
		tb.Cleanup(func() { tp.Shutdown(context.Background()) })
		var seeds []string
		if i > 0 {
			seeds = []string{nodes[0].GossipAddr()}
		}
		cfg := testConfig(fmt.Sprintf("n%d", i), seeds...)
		cfg.TracerProvider, cfg.TraceKeys = tp, keys
		nodes = append(nodes, newNode(tb, cfg))
		recs = append(recs, rec)
	}
	waitMembers(tb, nodes, size)
	return nodes, recs
}

// spansNamed returns the ended spans of rec called name.
func spansNamed(rec *tracetest.SpanRecorder, name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

// oneSpan returns the one ended span of rec called name, failing tb unless there is exactly one.
func oneSpan(tb testing.TB, rec *tracetest.SpanRecorder, name string) sdktrace.ReadOnlySpan {
	tb.Helper()
	ss := spansNamed(rec, name)
	if len(ss) != 1 {
		tb.Fatalf("%d spans called %s, want 1 (all: %v)", len(ss), name, spanNames(rec))
	}
	return ss[0]
}

func spanNames(rec *tracetest.SpanRecorder) []string {
	var out []string
	for _, s := range rec.Ended() {
		out = append(out, s.Name())
	}
	return out
}

// attr returns the value of span's attribute key, and whether it has it.
func attr(span sdktrace.ReadOnlySpan, key string) (attribute.Value, bool) {
	for _, kv := range span.Attributes() {
		if string(kv.Key) == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

func wantAttr(tb testing.TB, span sdktrace.ReadOnlySpan, key string, want any) {
	tb.Helper()
	v, ok := attr(span, key)
	if !ok {
		tb.Errorf("span %s has no attribute %s (has %v)", span.Name(), key, span.Attributes())
		return
	}
	if got := v.AsInterface(); got != want {
		tb.Errorf("span %s: %s = %v, want %v", span.Name(), key, got, want)
	}
}

// childOf reports whether child's parent is parent.
func childOf(child, parent sdktrace.ReadOnlySpan) bool {
	return child.Parent().TraceID() == parent.SpanContext().TraceID() &&
		child.Parent().SpanID() == parent.SpanContext().SpanID()
}

func TestTraceGetThroughPeerIsOneTrace(t *testing.T) {
	nodes, recs := tracedCluster(t, 3, corral.TraceKeysOff)
	src := clustertest.NewSource(0)
	gs := groups(t, nodes, "g", src.Load, corral.WithTTL(time.Hour))
	key := keyOwnedBy(t, nodes[0], "traced")

	if _, err := gs[1].Get(context.Background(), key); err != nil {
		t.Fatal(err)
	}

	// The caller: its Get, the request to the owner its Gets share, and the peer call.
	get := oneSpan(t, recs[1], "corral.Get")
	fetch := oneSpan(t, recs[1], "corral.fetch")
	client := oneSpan(t, recs[1], "corral.peer.v1.Peer/Get")
	if get.Parent().IsValid() {
		t.Errorf("Get's span has a parent %v; the caller's ctx had no span", get.Parent())
	}
	if !childOf(fetch, get) || !childOf(client, fetch) {
		t.Errorf("caller's spans are not Get → fetch → client: %v / %v / %v", get.SpanContext(), fetch.Parent(), client.Parent())
	}
	if client.SpanKind() != trace.SpanKindClient {
		t.Errorf("peer call's span kind %v, want client", client.SpanKind())
	}
	wantAttr(t, get, "corral.group", "g")
	wantAttr(t, get, "corral.source", "peer")
	wantAttr(t, get, "corral.owner", "n0")
	wantAttr(t, get, "corral.acting_owner", false)
	wantAttr(t, client, "rpc.method", "Get")

	// The owner: its server span in the same trace, a child of the client span, and the
	// loader's run under it.
	server := oneSpan(t, recs[0], "corral.peer.v1.Peer/Get")
	if server.SpanKind() != trace.SpanKindServer {
		t.Errorf("owner's span kind %v, want server", server.SpanKind())
	}
	if !childOf(server, client) {
		t.Fatalf("owner's span's parent %v is not the client span %v", server.Parent(), client.SpanContext())
	}
	if !server.Parent().IsRemote() {
		t.Errorf("owner's span's parent is not marked remote")
	}
	fillSpan := oneSpan(t, recs[0], "corral.fill")
	if !childOf(fillSpan, server) {
		t.Errorf("fill's parent %v is not the owner's server span", fillSpan.Parent())
	}
	wantAttr(t, server, "corral.group", "g")
	wantAttr(t, server, "corral.source", "fill")
	wantAttr(t, server, "corral.owner", "n0")
	wantAttr(t, server, "corral.acting_owner", true)
	if len(recs[2].Ended()) != 0 {
		t.Errorf("the third node recorded spans %v; it took no part", spanNames(recs[2]))
	}
	// No span anywhere records the key: TraceKeysOff.
	for i, rec := range recs {
		for _, s := range rec.Ended() {
			for _, k := range []string{"corral.key", "corral.key.hash"} {
				if _, ok := attr(s, k); ok {
					t.Errorf("node %d's span %s records %s with TraceKeysOff", i, s.Name(), k)
				}
			}
		}
	}

	// A Get on the owner is a hit it served itself.
	if _, err := gs[0].Get(context.Background(), key); err != nil {
		t.Fatal(err)
	}
	hit := oneSpan(t, recs[0], "corral.Get")
	wantAttr(t, hit, "corral.source", "hit")
	wantAttr(t, hit, "corral.acting_owner", true)
}

func TestTraceContinuesTheCallersTrace(t *testing.T) {
	nodes, recs := tracedCluster(t, 2, corral.TraceKeysOff)
	src := clustertest.NewSource(0)
	gs := groups(t, nodes, "g", src.Load, corral.WithTTL(time.Hour))
	key := keyOwnedBy(t, nodes[0], "parent")

	rec := tracetest.NewSpanRecorder()
	app := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer app.Shutdown(context.Background())
	ctx, parent := app.Tracer("app").Start(context.Background(), "handler")
	if _, err := gs[1].Get(ctx, key); err != nil {
		t.Fatal(err)
	}
	parent.End()
	get := oneSpan(t, recs[1], "corral.Get")
	if !childOf(get, oneSpan(t, rec, "handler")) {
		t.Errorf("Get's parent %v is not the caller's span", get.Parent())
	}
	if got := oneSpan(t, recs[0], "corral.fill").SpanContext().TraceID(); got != parent.SpanContext().TraceID() {
		t.Errorf("owner's fill in trace %v, want the caller's %v", got, parent.SpanContext().TraceID())
	}
}

func TestTraceKeys(t *testing.T) {
	tests := []struct {
		name      string
		keys      corral.TraceKeys
		attr      string
		want      string // "" = no attribute
		forbidden string
	}{
		{"off", corral.TraceKeysOff, "corral.key", "", "corral.key.hash"},
		// printf %s secret-key | sha256sum | cut -c1-16
		{"hash", corral.TraceKeysHash, "corral.key.hash", "85dbe15d75ef9308", "corral.key"},
		{"raw", corral.TraceKeysRaw, "corral.key", "secret-key", "corral.key.hash"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nodes, recs := tracedCluster(t, 1, tt.keys)
			gs := groups(t, nodes, "g", clustertest.NewSource(0).Load)
			if _, err := gs[0].Get(context.Background(), "secret-key"); err != nil {
				t.Fatal(err)
			}
			for _, name := range []string{"corral.Get", "corral.fill"} {
				s := oneSpan(t, recs[0], name)
				v, ok := attr(s, tt.attr)
				switch {
				case tt.want == "" && ok:
					t.Errorf("%s records %s = %v", name, tt.attr, v.Emit())
				case tt.want != "" && v.AsString() != tt.want:
					t.Errorf("%s: %s = %q, want %q", name, tt.attr, v.AsString(), tt.want)
				}
				if _, ok := attr(s, tt.forbidden); ok {
					t.Errorf("%s records %s", name, tt.forbidden)
				}
			}
		})
	}
}

func TestTraceKeysRefused(t *testing.T) {
	cfg := testConfig("bad")
	cfg.TraceKeys = 7
	if n, err := corral.New(cfg); err == nil {
		n.Close(context.Background())
		t.Fatal("New accepted TraceKeys 7")
	}
}

// TestTraceFillLinksEveryCoalescedCaller: 50 Gets of one key on 3 nodes wait on one fill.
// The fill's span links every Get and peer request coalesced onto it on the owner; on each
// other node the Gets share one request to the owner, whose span (corral.fetch) links those
// that joined it, and whose peer call the fill links (or runs under). So from the fill's span
// every one of the 50 Gets is reached: as the fill's own caller, a link, or a link or parent
// of a request the fill links.
func TestTraceFillLinksEveryCoalescedCaller(t *testing.T) {
	nodes, recs := tracedCluster(t, 3, corral.TraceKeysOff)
	release := make(chan struct{})
	var started sync.Once
	entered := make(chan struct{})
	load := func(ctx context.Context, key string) (string, error) {
		started.Do(func() { close(entered) })
		select {
		case <-release:
		case <-ctx.Done():
			return "", ctx.Err()
		}
		return "v", nil
	}
	gs := groups(t, nodes, "g", load, corral.WithTTL(time.Hour), corral.WithFillTimeout(time.Minute))
	key := keyOwnedBy(t, nodes[0], "stampede")

	const callers = 50
	var wg sync.WaitGroup
	for i := range callers {
		g := gs[i%3]
		wg.Go(func() {
			if v, err := g.Get(context.Background(), key); err != nil || v != "v" {
				t.Errorf("Get = %q, %v", v, err)
			}
		})
	}
	<-entered
	// Every Get but the three that lead (the fill on the owner, one request on each other
	// node) joins one; each other node's request joins the owner's fill.
	clustertest.Eventually(t, "every Get coalesced", func() bool {
		var n uint64
		for _, g := range gs {
			n += g.Stats().Coalesced
		}
		return n == callers-1
	})
	close(release)
	wg.Wait()

	fills := spansNamed(recs[0], "corral.fill")
	if len(fills) != 1 {
		t.Fatalf("%d fill spans on the owner, want 1", len(fills))
	}
	fillSpan := fills[0]
	linked := map[trace.SpanID]bool{fillSpan.Parent().SpanID(): true}
	for _, l := range fillSpan.Links() {
		linked[l.SpanContext.SpanID()] = true
	}
	// On the owner: its 17 Gets and the other two nodes' requests, less the one the fill
	// runs under.
	if got, want := len(fillSpan.Links()), (callers+2)/3+2-1; got != want {
		t.Errorf("fill links %d spans, want %d", got, want)
	}
	// Through each other node's request: the owner's server span the fill links or runs
	// under, its client span, the fetch span, its Get and the Gets it links.
	servers := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	for _, s := range spansNamed(recs[0], "corral.peer.v1.Peer/Get") {
		servers[s.SpanContext().SpanID()] = s
	}
	for i := 1; i < 3; i++ {
		clients := map[trace.SpanID]sdktrace.ReadOnlySpan{}
		for _, s := range spansNamed(recs[i], "corral.peer.v1.Peer/Get") {
			clients[s.SpanContext().SpanID()] = s
		}
		fetches := spansNamed(recs[i], "corral.fetch")
		if len(fetches) != 1 {
			t.Fatalf("node %d: %d fetch spans, want 1", i, len(fetches))
		}
		fetch := fetches[0]
		if got, want := len(fetch.Links()), len(spansNamed(recs[i], "corral.Get"))-1; got != want {
			t.Errorf("node %d: the request to the owner links %d Gets, want %d", i, got, want)
		}
		reached := false
		for _, srv := range servers {
			if c, ok := clients[srv.Parent().SpanID()]; ok && linked[srv.SpanContext().SpanID()] && childOf(c, fetch) {
				reached = true
			}
		}
		if !reached {
			t.Errorf("node %d: the fill neither links nor runs under its request", i)
			continue
		}
		linked[fetch.Parent().SpanID()] = true
		for _, l := range fetch.Links() {
			linked[l.SpanContext.SpanID()] = true
		}
	}
	var gets int
	for i, rec := range recs {
		for _, s := range spansNamed(rec, "corral.Get") {
			gets++
			if !linked[s.SpanContext().SpanID()] {
				t.Errorf("node %d: Get %v is not reached from the fill's span", i, s.SpanContext().SpanID())
			}
		}
	}
	if gets != callers {
		t.Errorf("%d Get spans, want %d", gets, callers)
	}
}

func TestTraceSetCarriesTraceContextInMetadata(t *testing.T) {
	nodes, recs := tracedCluster(t, 2, corral.TraceKeysOff)
	gs := groups(t, nodes, "g", clustertest.NewSource(0).Load, corral.WithTTL(time.Hour))
	key := keyOwnedBy(t, nodes[0], "written")
	if err := gs[1].Set(context.Background(), key, "v"); err != nil {
		t.Fatal(err)
	}
	set := oneSpan(t, recs[1], "corral.Set")
	client := oneSpan(t, recs[1], "corral.peer.v1.Peer/Set")
	server := oneSpan(t, recs[0], "corral.peer.v1.Peer/Set")
	if !childOf(client, set) || !childOf(server, client) {
		t.Fatalf("Set's spans are not Set → client → owner's server: %v / %v / %v", set.SpanContext(), client.Parent(), server.Parent())
	}
	if server.SpanKind() != trace.SpanKindServer {
		t.Errorf("owner's span kind %v, want server", server.SpanKind())
	}
}

func TestTraceSlowFillHasExemplarAndLink(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())
	reg := prometheus.NewRegistry()
	cfg := testConfig("exemplar")
	cfg.TracerProvider, cfg.Registerer = tp, reg
	n := newNode(t, cfg)
	g, err := corral.NewGroup(n, "g", clustertest.NewSource(20*time.Millisecond).Load)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := g.SlowestFill(); ok {
		t.Fatal("SlowestFill before any fill")
	}
	for _, k := range []string{"a", "b"} {
		if _, err := g.Get(context.Background(), k); err != nil {
			t.Fatal(err)
		}
	}
	fills := map[string]string{} // trace ID → key
	for _, s := range spansNamed(rec, "corral.fill") {
		fills[s.SpanContext().TraceID().String()] = ""
	}
	slow, ok := g.SlowestFill()
	if _, known := fills[slow.TraceID]; !ok || !known || (slow.Key != "a" && slow.Key != "b") || slow.Duration < 20*time.Millisecond {
		t.Errorf("SlowestFill = %+v, %v; want one of the fills %v", slow, ok, fills)
	}

	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var exemplars []string
	for _, mf := range mfs {
		if mf.GetName() != "corral_fill_duration_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, b := range m.GetHistogram().GetBucket() {
				if e := b.GetExemplar(); e != nil {
					for _, l := range e.GetLabel() {
						if l.GetName() == "trace_id" {
							exemplars = append(exemplars, l.GetValue())
						}
					}
				}
			}
		}
	}
	if len(exemplars) == 0 {
		t.Fatal("corral_fill_duration_seconds has no exemplar")
	}
	for _, id := range exemplars {
		if _, ok := fills[id]; !ok {
			t.Errorf("exemplar trace_id %s is no fill's trace (%v)", id, fills)
		}
	}
}

// TestTraceSampledOutStartsNoSpanButCarriesTheDecision: under a Get whose trace the sampler
// dropped, no node records a span, and the owner's loader still runs in the caller's trace,
// marked not sampled, so that an origin that traces keeps the decision. That holds with a
// sampler that follows the parent, and with one that would keep a child of a dropped parent
// (AlwaysSample): corral starts no span under a trace that is not kept.
func TestTraceSampledOutStartsNoSpanButCarriesTheDecision(t *testing.T) {
	for name, sampler := range map[string]sdktrace.Sampler{
		"ParentBased(NeverSample)": sdktrace.ParentBased(sdktrace.NeverSample()),
		"AlwaysSample":             sdktrace.AlwaysSample(),
	} {
		t.Run(name, func(t *testing.T) { testTraceSampledOut(t, sampler) })
	}
}

func testTraceSampledOut(t *testing.T, sampler sdktrace.Sampler) {
	var nodes []*corral.Node
	var recs []*tracetest.SpanRecorder
	for i := range 2 {
		rec := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec),
			sdktrace.WithSampler(sampler))
		t.Cleanup(func() { tp.Shutdown(context.Background()) })
		var seeds []string
		if i > 0 {
			seeds = []string{nodes[0].GossipAddr()}
		}
		cfg := testConfig(fmt.Sprintf("n%d", i), seeds...)
		cfg.TracerProvider = tp
		nodes = append(nodes, newNode(t, cfg))
		recs = append(recs, rec)
	}
	waitMembers(t, nodes, 2)
	var loaded sync.Map // key → the span context the loader ran under
	load := func(ctx context.Context, key string) (string, error) {
		loaded.Store(key, trace.SpanContextFromContext(ctx))
		return "v", nil
	}
	gs := groups(t, nodes, "g", load, corral.WithTTL(time.Hour))
	key := keyOwnedBy(t, nodes[0], "dropped")

	// The caller's own trace, sampled out: a remote parent without the sampled flag.
	tid := trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36}
	parent := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: trace.SpanID{1, 2, 3, 4, 5, 6, 7, 8}, Remote: true})
	ctx := trace.ContextWithRemoteSpanContext(context.Background(), parent)
	if _, err := gs[1].Get(ctx, key); err != nil {
		t.Fatal(err)
	}
	for i, rec := range recs {
		if n := len(rec.Ended()) + len(rec.Started()); n != 0 {
			t.Errorf("node %d recorded %d spans of a trace sampled out: %v", i, n, spanNames(rec))
		}
	}
	v, ok := loaded.Load(key)
	if !ok {
		t.Fatal("the loader did not run")
	}
	if sc := v.(trace.SpanContext); sc.TraceID() != tid || sc.IsSampled() {
		t.Errorf("the owner's loader ran in trace %v (sampled %v), want the caller's %v, not sampled", sc.TraceID(), sc.IsSampled(), tid)
	}
}

// TestTraceBatchLoadIsOneSpan: a batch loader's run is one corral.fill span for all its keys,
// in the trace of the GetMany that began it, with the loader running under it; a Get that
// joins one of its keys while it runs is linked from it.
func TestTraceBatchLoadIsOneSpan(t *testing.T) {
	nodes, recs := tracedCluster(t, 3, corral.TraceKeysOff)
	var mu sync.Mutex
	loaderSpans := map[string][]trace.SpanContext{} // node → the span context of each call's ctx
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	gs := make([]*corral.Group[string], len(nodes))
	for i, n := range nodes {
		batch := func(ctx context.Context, keys []string) (map[string]string, error) {
			mu.Lock()
			loaderSpans[n.Name()] = append(loaderSpans[n.Name()], trace.SpanContextFromContext(ctx))
			mu.Unlock()
			if slices.Contains(keys, "held") {
				entered <- struct{}{}
				<-release
			}
			out := map[string]string{}
			for _, k := range keys {
				out[k] = "v-" + k
			}
			return out, nil
		}
		g, err := corral.NewGroup[string](n, "g", nil, corral.WithTTL(time.Hour), corral.WithBatchLoad(batch))
		if err != nil {
			t.Fatal(err)
		}
		gs[i] = g
	}
	owned := map[string]int{}
	var keys []string
	for i := range 30 {
		k := fmt.Sprint("page", i)
		keys = append(keys, k)
		owned[nodes[0].Owner(k).Name]++
	}
	got, err := gs[0].GetMany(context.Background(), keys)
	if err != nil || len(got) != len(keys) {
		t.Fatalf("GetMany = %d values, %v", len(got), err)
	}
	many := oneSpan(t, recs[0], "corral.GetMany")
	for i, n := range nodes {
		fills := spansNamed(recs[i], "corral.fill")
		if owned[n.Name()] == 0 {
			if len(fills) != 0 {
				t.Errorf("%s owns none of the keys but has %d fill spans", n.Name(), len(fills))
			}
			continue
		}
		if len(fills) != 1 {
			t.Fatalf("%s: %d fill spans for its %d keys, want 1 (all: %v)", n.Name(), len(fills), owned[n.Name()], spanNames(recs[i]))
		}
		fill := fills[0]
		wantAttr(t, fill, "corral.keys", int64(owned[n.Name()]))
		wantAttr(t, fill, "corral.group", "g")
		if fill.SpanContext().TraceID() != many.SpanContext().TraceID() {
			t.Errorf("%s: the batch's span is in trace %v, want the GetMany's %v", n.Name(), fill.SpanContext().TraceID(), many.SpanContext().TraceID())
		}
		mu.Lock()
		calls := loaderSpans[n.Name()]
		mu.Unlock()
		if len(calls) != 1 || !calls[0].Equal(fill.SpanContext()) {
			t.Errorf("%s: the batch loader ran %d times, under %v; want once, under its span %v", n.Name(), len(calls), calls, fill.SpanContext())
		}
	}

	// A Get that joins a key of a batch in flight is linked from the batch's span.
	owner := 0
	held := "held"
	for i, n := range nodes {
		if nodes[0].Owner(held).Name == n.Name() {
			owner = i
		}
	}
	before := len(spansNamed(recs[owner], "corral.fill"))
	manyDone := make(chan error, 1)
	go func() {
		_, err := gs[owner].GetMany(context.Background(), []string{held, held + "-too"})
		manyDone <- err
	}()
	<-entered
	coalesced := gs[owner].Stats().Coalesced
	getDone := make(chan error, 1)
	go func() {
		_, err := gs[owner].Get(context.Background(), held)
		getDone <- err
	}()
	clustertest.Eventually(t, "the Get joined the batch's key", func() bool { return gs[owner].Stats().Coalesced > coalesced })
	close(release)
	if err := <-manyDone; err != nil {
		t.Fatal(err)
	}
	if err := <-getDone; err != nil {
		t.Fatal(err)
	}
	// The batch's span ends, and is recorded, just after its waiters have their values.
	clustertest.Eventually(t, "the second batch's fill span", func() bool { return len(spansNamed(recs[owner], "corral.fill")) >= before+1 })
	fills := spansNamed(recs[owner], "corral.fill")
	if len(fills) != before+1 {
		t.Fatalf("%d fill spans after the second batch, want %d", len(fills), before+1)
	}
	var get sdktrace.ReadOnlySpan
	for _, s := range spansNamed(recs[owner], "corral.Get") {
		get = s
	}
	if get == nil {
		t.Fatal("no span of the joining Get")
	}
	fill := fills[len(fills)-1]
	linked := false
	for _, l := range fill.Links() {
		linked = linked || l.SpanContext.Equal(get.SpanContext())
	}
	if !linked {
		t.Errorf("the batch's span links %v, not the Get that joined it (%v)", fill.Links(), get.SpanContext())
	}
}
