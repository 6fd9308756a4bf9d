package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/corralcache/corral"
	"github.com/corralcache/corral/cmd/corral/internal/clientlease"
	"github.com/corralcache/corral/cmd/corral/internal/httpapi"
	"github.com/corralcache/corral/fill"
)

// demoConfig is what the demo runs.
type demoConfig struct {
	nodes    int
	callers  int           // concurrent requests per replica in one burst
	latency  time.Duration // the origin's response time
	ttl      time.Duration
	key      string
	progress io.Writer
	// silentPeerTimeout is the replicas' --silent-peer-timeout; 0 = its default.
	silentPeerTimeout time.Duration
}

func demo(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(out)
	cfg := demoConfig{key: "product:42", progress: out}
	fs.IntVar(&cfg.nodes, "nodes", 3, "replicas in the cluster (≥ 2)")
	fs.IntVar(&cfg.callers, "callers", 200, "concurrent requests per replica when the hot key expires (≤ 2000)")
	fs.DurationVar(&cfg.latency, "latency", 50*time.Millisecond, "origin response time")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: corral demo [flags]

Runs a cluster of corral serve nodes on 127.0.0.1 in front of a slow origin, bursts requests
at a hot key as it expires, kills the key's owner and bursts again, and prints the origin
calls of naive cache-aside, per-replica single-flight and corral side by side.

Flags:
`)
		fs.PrintDefaults()
	}
	if err := parseArgs(fs, args, out); err != nil {
		return err
	}
	if cfg.nodes < 2 || cfg.nodes > 10 || cfg.callers < 1 || cfg.callers > 2000 || cfg.latency <= 0 || cfg.latency > 5*time.Second {
		return errors.New("need 2 ≤ -nodes ≤ 10, 1 ≤ -callers ≤ 2000 and 0 < -latency ≤ 5s")
	}
	cfg.ttl = 4 * cfg.latency
	res, err := runDemo(ctx, cfg)
	if err != nil {
		return err
	}
	res.print(out, cfg)
	return nil
}

// demoResult is the origin calls of each strategy in each phase.
type demoResult struct {
	naive, perReplica, corral [2]int64  // [burst at expiry, burst after the owner was killed]
	corralCalls               [2][]span // when each of corral's origin calls ran
	perReplicaCalls           []span    // and per-replica single-flight's in burst 1
	owner                     string
	sources                   map[string]int // X-Corral-Source of the first burst's answers
}

// span is when one origin call ran, from its arrival to its answer.
type span struct{ start, end time.Time }

// expiries says how corral's origin calls in one burst came about: each call after the first
// must have begun at least ttl after the one before it ended (the stored value had expired,
// which a burst that outlasts the TTL sees); a call that began sooner was a second fill of a
// fresh value, and a call that began before the one before it ended was a concurrent fill.
func expiries(calls []span, ttl time.Duration) (n int, err error) {
	for i, c := range calls {
		if i == 0 {
			continue
		}
		prev := calls[i-1]
		switch {
		case c.start.Before(prev.end):
			return 0, fmt.Errorf("origin call %d began %v before call %d ended: concurrent fills", i+1, prev.end.Sub(c.start), i)
		case c.start.Sub(prev.end) < ttl:
			return 0, fmt.Errorf("origin call %d began %v after call %d ended, within the TTL (%v): a fresh value filled again", i+1, c.start.Sub(prev.end), i, ttl)
		}
	}
	return len(calls), nil
}

// demoOrigin is a slow HTTP origin that remembers when each call it gets ran.
type demoOrigin struct {
	*httptest.Server
	mu    sync.Mutex
	spans []span // in order of arrival
}

func startDemoOrigin(latency time.Duration) *demoOrigin {
	o := &demoOrigin{}
	o.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o.mu.Lock()
		i := len(o.spans)
		o.spans = append(o.spans, span{start: time.Now()})
		o.mu.Unlock()
		defer func() {
			o.mu.Lock()
			o.spans[i].end = time.Now()
			o.mu.Unlock()
		}()
		select {
		case <-time.After(latency):
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"path":%q,"price":42}`, r.URL.Path)
	}))
	return o
}

// replica is one demo node: a corral serve daemon on loopback.
type replica struct {
	d    *daemon
	http string
	stop context.CancelFunc
	done chan struct{}
}

func runDemo(ctx context.Context, cfg demoConfig) (*demoResult, error) {
	res := &demoResult{sources: map[string]int{}}
	p := func(format string, a ...any) { fmt.Fprintf(cfg.progress, "· "+format+"\n", a...) }

	origin := startDemoOrigin(cfg.latency)
	defer origin.Close()
	p("origin: %s, answering in %v", origin.URL, cfg.latency)
	p("starting %d corral serve nodes on 127.0.0.1 (gossip, gRPC and HTTP on free ports)", cfg.nodes)
	reps, err := startReplicas(ctx, cfg, origin.URL+"/products/{key}")
	defer func() {
		for _, r := range reps {
			r.stop()
			<-r.done
		}
	}()
	if err != nil {
		return nil, err
	}
	owner := reps[0].d.node.Owner(cfg.key).Name
	res.owner = owner
	p("cluster formed: %d members; %q is owned by %s", len(reps[0].d.node.Members()), cfg.key, owner)

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: cfg.callers, MaxConnsPerHost: cfg.callers}}
	defer client.CloseIdleConnections()
	path := "/v1/groups/products/keys/" + cfg.key
	var srcMu sync.Mutex
	corralGet := func(addrs []string, sources map[string]int) func(i int) error {
		return func(i int) error {
			addr := addrs[i]
			resp, err := client.Get("http://" + addr + path)
			if err != nil {
				return err
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("GET %s: %s", addr, resp.Status)
			}
			if sources != nil {
				srcMu.Lock()
				sources[resp.Header.Get("X-Corral-Source")]++
				srcMu.Unlock()
			}
			return nil
		}
	}
	originGet := func() error {
		resp, err := client.Get(origin.URL + "/products/" + cfg.key)
		if err != nil {
			return err
		}
		io.Copy(io.Discard, resp.Body)
		return resp.Body.Close()
	}

	addrs := make([]string, len(reps))
	for i, r := range reps {
		addrs[i] = r.http
	}
	// Phase 1: the hot key expires under a burst on every replica.
	if err := corralGet(addrs, nil)(0); err != nil { // warm
		return nil, err
	}
	p("burst 1: %d requests (%d per replica) as %q expires", len(addrs)*cfg.callers, cfg.callers, cfg.key)
	res.naive[0] = measure(origin, func() error { return naiveCacheAside(len(addrs), cfg.callers, originGet) })
	res.perReplica[0], res.perReplicaCalls = measureSpans(origin, func() error { return perReplicaSingleFlight(len(addrs), cfg.callers, originGet) })
	time.Sleep(cfg.ttl + cfg.latency) // the warm value expires
	var burstErr error
	res.corral[0], res.corralCalls[0] = measureSpans(origin, func() error {
		burstErr = burst(len(addrs), cfg.callers, corralGet(addrs, res.sources))
		return burstErr
	})
	if burstErr != nil {
		return nil, burstErr
	}

	// Phase 2: kill the key's owner (no graceful leave) and burst again as the key expires,
	// before the cluster has even noticed.
	var survivors []string
	for i, r := range reps {
		if r.d.node.Name() == owner {
			p("killing %s, the owner of %q: no leave, no hand-off", owner, cfg.key)
			r.d.kill()
			continue
		}
		survivors = append(survivors, addrs[i])
	}
	time.Sleep(cfg.ttl + cfg.latency)
	p("burst 2: %d requests on the %d survivors as %q expires again", len(survivors)*cfg.callers, len(survivors), cfg.key)
	res.naive[1] = measure(origin, func() error { return naiveCacheAside(len(survivors), cfg.callers, originGet) })
	res.perReplica[1] = measure(origin, func() error { return perReplicaSingleFlight(len(survivors), cfg.callers, originGet) })
	res.corral[1], res.corralCalls[1] = measureSpans(origin, func() error {
		burstErr = burst(len(survivors), cfg.callers, corralGet(survivors, nil))
		return burstErr
	})
	return res, burstErr
}

// measure returns the origin calls that f caused.
func measure(o *demoOrigin, f func() error) int64 {
	n, _ := measureSpans(o, f)
	return n
}

// measureSpans is measure with when each of the calls ran. The handler writes a call's end
// before its answer leaves, so every call that f waited for has ended.
func measureSpans(o *demoOrigin, f func() error) (int64, []span) {
	o.mu.Lock()
	first := len(o.spans)
	o.mu.Unlock()
	f()
	o.mu.Lock()
	defer o.mu.Unlock()
	calls := append([]span(nil), o.spans[first:]...)
	return int64(len(calls)), calls
}

func startReplicas(ctx context.Context, cfg demoConfig, originTemplate string) ([]*replica, error) {
	var reps []*replica
	quiet := slog.New(slog.DiscardHandler)
	for i := range cfg.nodes {
		sc := &serveConfig{
			name: fmt.Sprintf("replica-%d", i+1), bind: "127.0.0.1", origin: originTemplate,
			ttl: cfg.ttl, fillTimeout: 10 * time.Second, maxBytes: fill.DefaultMaxBytes, maxValueBytes: corral.DefaultConfig().MaxValueBytes,
			maxGroups: 8, minMembers: 1, shutdownTimeout: 5 * time.Second,
			silentPeerTimeout: cfg.silentPeerTimeout,
			leases:            clientlease.DefaultLimits(),
			limits:            httpapi.DefaultLimits(),
		}
		if i > 0 {
			sc.join = listFlag{reps[0].d.node.GossipAddr()}
		}
		d, err := startDaemon(sc, quiet)
		if err != nil {
			return reps, err
		}
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			d.closeNode(context.Background())
			return reps, err
		}
		rctx, stop := context.WithCancel(context.Background())
		r := &replica{d: d, http: lis.Addr().String(), stop: stop, done: make(chan struct{})}
		go func() { defer close(r.done); d.serveOn(rctx, lis) }()
		reps = append(reps, r)
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, r := range reps {
		for len(r.d.node.Members()) != cfg.nodes {
			if time.Now().After(deadline) {
				return reps, errors.New("cluster did not form within 10 s")
			}
			select {
			case <-ctx.Done():
				return reps, ctx.Err()
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	return reps, nil
}

// burst sends callers concurrent requests to each of n replicas at once.
func burst(n, callers int, get func(replica int) error) error {
	var wg sync.WaitGroup
	var first atomic.Pointer[error]
	for i := range n {
		for range callers {
			wg.Go(func() {
				if err := get(i); err != nil {
					first.CompareAndSwap(nil, &err)
				}
			})
		}
	}
	wg.Wait()
	if e := first.Load(); e != nil {
		return *e
	}
	return nil
}

// naiveCacheAside is what most services do: check the replica's cache, on a miss call the
// origin and write the result back. At expiry every request misses.
func naiveCacheAside(replicas, callers int, originGet func() error) error {
	caches := make([]sync.Map, replicas)
	// A stampede's requests arrive within the origin's latency: each has looked in its
	// replica's cache before the first origin call returns — here by construction, not by
	// the luck of a scheduler that starts every goroutine within 20 ms on a busy machine.
	var looked sync.WaitGroup
	looked.Add(replicas * callers)
	return burst(replicas, callers, func(i int) error {
		_, ok := caches[i].Load("k")
		looked.Done()
		looked.Wait()
		if ok {
			return nil
		}
		err := originGet()
		caches[i].Store("k", true)
		return err
	})
}

// perReplicaSingleFlight coalesces misses inside each replica only — in-process
// single-flight, or groupcache when the owner cannot be reached: one call per replica.
func perReplicaSingleFlight(replicas, callers int, originGet func() error) error {
	flights := make([]sync.Once, replicas)
	return burst(replicas, callers, func(i int) error {
		var err error
		flights[i].Do(func() { err = originGet() })
		return err
	})
}

func (r *demoResult) print(out io.Writer, cfg demoConfig) {
	fmt.Fprintf(out, "\nOrigin calls when %q expires (origin latency %v):\n\n", cfg.key, cfg.latency)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "strategy\tburst at expiry (%d replicas)\tafter killing the owner (%d replicas)\n", cfg.nodes, cfg.nodes-1)
	fmt.Fprintf(tw, "naive cache-aside\t%d\t%d\n", r.naive[0], r.naive[1])
	fmt.Fprintf(tw, "per-replica single-flight\t%d\t%d\n", r.perReplica[0], r.perReplica[1])
	fmt.Fprintf(tw, "corral\t%d\t%d\n", r.corral[0], r.corral[1])
	tw.Flush()
	fmt.Fprintf(out, "\nHow corral answered burst 1 (X-Corral-Source): fill %d, coalesced %d, peer %d, near %d, hit %d.\n",
		r.sources["fill"], r.sources["coalesced"], r.sources["peer"], r.sources["near"], r.sources["hit"])
	for i, calls := range r.corralCalls {
		if n, err := expiries(calls, cfg.ttl); err != nil {
			fmt.Fprintf(out, "corral, burst %d: %v.\n", i+1, err)
			return
		} else if n > 1 {
			fmt.Fprintf(out, "corral, burst %d: the burst outlasted the TTL (%v) on this machine, so %q expired %d times during it: one origin call each.\n",
				i+1, cfg.ttl, cfg.key, n)
		}
	}
	fmt.Fprintf(out, "corral: one origin call per expiry in the whole cluster, and one after its owner (%s) died.\n", r.owner)
}
