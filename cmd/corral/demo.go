package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/corralcache/corral"
)

// demoConfig is what the demo runs.
type demoConfig struct {
	nodes    int
	callers  int           // concurrent Gets per node in one burst
	latency  time.Duration // the backend's response time
	ttl      time.Duration
	key      string
	progress io.Writer
}

// backend is the simulated slow database every strategy reads from; it counts calls.
type backend struct {
	calls   atomic.Int64
	latency time.Duration
}

func (b *backend) load(ctx context.Context, key string) (string, error) {
	b.calls.Add(1)
	select {
	case <-time.After(b.latency):
		return "value of " + key, nil
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

func demo(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(out)
	cfg := demoConfig{key: "product:42", progress: out}
	fs.IntVar(&cfg.nodes, "nodes", 3, "replicas in the cluster (≥ 2)")
	fs.IntVar(&cfg.callers, "callers", 200, "concurrent requests per replica when the hot key expires")
	fs.DurationVar(&cfg.latency, "latency", 50*time.Millisecond, "backend response time")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if cfg.nodes < 2 || cfg.callers < 1 || cfg.latency <= 0 {
		return errors.New("need -nodes ≥ 2, -callers ≥ 1 and -latency > 0")
	}
	cfg.ttl = 4 * cfg.latency
	res, err := runDemo(ctx, cfg)
	if err != nil {
		return err
	}
	res.print(out, cfg)
	return nil
}

// demoResult is the backend calls of each strategy in each phase.
type demoResult struct {
	naive, perReplica, corral [2]int64 // [burst at expiry, burst after the owner was killed]
	owner                     string
}

func runDemo(ctx context.Context, cfg demoConfig) (*demoResult, error) {
	var res demoResult
	p := func(format string, a ...any) { fmt.Fprintf(cfg.progress, "· "+format+"\n", a...) }

	p("starting %d corral nodes on 127.0.0.1 (gossip + gRPC, free ports)", cfg.nodes)
	db := &backend{latency: cfg.latency}
	nodes, grps, err := startCluster(ctx, cfg, db)
	if err != nil {
		return nil, err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		for _, n := range nodes {
			n.Close(cctx)
		}
	}()
	owner := nodes[0].Owner(cfg.key).Name
	res.owner = owner
	p("cluster formed: %d members; %q is owned by %s", len(nodes[0].Members()), cfg.key, owner)

	// Phase 1: the hot key expires under a burst on every replica.
	burst := func(get func(node int) error) error {
		var wg sync.WaitGroup
		errs := make(chan error, 1)
		for node := range len(grps) {
			for range cfg.callers {
				wg.Go(func() {
					if err := get(node); err != nil {
						select {
						case errs <- err:
						default:
						}
					}
				})
			}
		}
		wg.Wait()
		select {
		case err := <-errs:
			return err
		default:
			return nil
		}
	}
	total := len(grps) * cfg.callers
	p("burst 1: %d requests (%d per replica) hit %q as it expires", total, cfg.callers, cfg.key)
	res.naive[0] = naiveCacheAside(cfg, len(grps), burst)
	res.perReplica[0] = perReplicaSingleFlight(cfg, len(grps), burst)
	if err := warm(ctx, grps[0], cfg.key); err != nil {
		return nil, err
	}
	time.Sleep(cfg.ttl + cfg.latency) // let the warm value expire
	before := db.calls.Load()
	if err := burst(func(i int) error { _, err := grps[i].Get(ctx, cfg.key); return err }); err != nil {
		return nil, err
	}
	res.corral[0] = db.calls.Load() - before

	// Phase 2: kill the key's owner (no graceful leave), let the value expire, burst again
	// before the failure is even detected.
	var killed int
	for i, n := range nodes {
		if n.Name() == owner {
			killed = i
		}
	}
	p("killing %s, the owner of %q, without a graceful leave", owner, cfg.key)
	nodes[killed].Kill()
	survivors := append(append([]*corral.Group[string]{}, grps[:killed]...), grps[killed+1:]...)
	time.Sleep(cfg.ttl + cfg.latency)
	p("burst 2: %d requests on the %d survivors, right away", len(survivors)*cfg.callers, len(survivors))
	res.naive[1] = naiveCacheAside(cfg, len(survivors), burst)
	res.perReplica[1] = perReplicaSingleFlight(cfg, len(survivors), burst)
	before = db.calls.Load()
	if err := burst(func(i int) error {
		if i >= len(survivors) {
			return nil
		}
		_, err := survivors[i].Get(ctx, cfg.key)
		return err
	}); err != nil {
		return nil, err
	}
	res.corral[1] = db.calls.Load() - before
	return &res, nil
}

func startCluster(ctx context.Context, cfg demoConfig, db *backend) ([]*corral.Node, []*corral.Group[string], error) {
	var nodes []*corral.Node
	var grps []*corral.Group[string]
	fail := func(err error) ([]*corral.Node, []*corral.Group[string], error) {
		for _, n := range nodes {
			n.Close(context.Background())
		}
		return nil, nil, err
	}
	for i := range cfg.nodes {
		c := corral.Config{
			Name:           fmt.Sprintf("replica-%d", i+1),
			BindAddr:       "127.0.0.1",
			GossipInterval: 50 * time.Millisecond,
			ProbeInterval:  200 * time.Millisecond,
			DrainTimeout:   -1,
		}
		if i > 0 {
			c.Join = []string{nodes[0].GossipAddr()}
		}
		n, err := corral.New(c)
		if err != nil {
			return fail(err)
		}
		nodes = append(nodes, n)
		g, err := corral.NewGroup(n, "products", db.load, corral.WithTTL(cfg.ttl))
		if err != nil {
			return fail(err)
		}
		grps = append(grps, g)
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, n := range nodes {
		for len(n.Members()) != cfg.nodes {
			if time.Now().After(deadline) {
				return fail(errors.New("cluster did not form within 10 s"))
			}
			select {
			case <-ctx.Done():
				return fail(ctx.Err())
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	return nodes, grps, nil
}

func warm(ctx context.Context, g *corral.Group[string], key string) error {
	_, err := g.Get(ctx, key)
	return err
}

// naiveCacheAside is what most services do: check the cache, on a miss call the backend and
// write the result back. At expiry every request misses.
func naiveCacheAside(cfg demoConfig, replicas int, burst func(func(int) error) error) int64 {
	db := &backend{latency: cfg.latency}
	caches := make([]sync.Map, replicas)
	burst(func(i int) error {
		if i >= replicas {
			return nil
		}
		if _, ok := caches[i].Load(cfg.key); ok {
			return nil
		}
		v, err := db.load(context.Background(), cfg.key)
		caches[i].Store(cfg.key, v)
		return err
	})
	return db.calls.Load()
}

// perReplicaSingleFlight coalesces misses inside each replica only (groupcache without a
// reachable owner, or any in-process single-flight): one backend call per replica.
func perReplicaSingleFlight(cfg demoConfig, replicas int, burst func(func(int) error) error) int64 {
	db := &backend{latency: cfg.latency}
	type flight struct {
		once sync.Once
		v    string
	}
	flights := make([]flight, replicas)
	burst(func(i int) error {
		if i >= replicas {
			return nil
		}
		flights[i].once.Do(func() { flights[i].v, _ = db.load(context.Background(), cfg.key) })
		return nil
	})
	return db.calls.Load()
}

func (r *demoResult) print(out io.Writer, cfg demoConfig) {
	fmt.Fprintf(out, "\nBackend calls when %q expires (backend latency %v):\n\n", cfg.key, cfg.latency)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "strategy\tburst at expiry (%d replicas)\tafter killing the owner (%d replicas)\t\n", cfg.nodes, cfg.nodes-1)
	fmt.Fprintf(tw, "naive cache-aside\t%d\t%d\t\n", r.naive[0], r.naive[1])
	fmt.Fprintf(tw, "per-replica single-flight\t%d\t%d\t\n", r.perReplica[0], r.perReplica[1])
	fmt.Fprintf(tw, "corral\t%d\t%d\t\n", r.corral[0], r.corral[1])
	tw.Flush()
	fmt.Fprintf(out, "\ncorral: one fill in the whole cluster, and one refill after its owner (%s) died.\n", r.owner)
}
