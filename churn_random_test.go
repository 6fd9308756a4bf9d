package corral_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corralcache/corral"
	"github.com/corralcache/corral/internal/clustertest"
	"github.com/corralcache/corral/internal/crash"
)

var churnSeed = flag.Uint64("churn.seed", 0, "seed of TestRandomChurnNeverUndoesAWrite (0 = from the clock)")

// churnCluster is a cluster whose members come and go while a workload runs: the test
// below drives it.
type churnCluster struct {
	tb   testing.TB
	src  *genSource
	opts []corral.GroupOption

	mu    sync.Mutex // guards nodes, groups, next
	nodes map[string]*corral.Node
	gs    map[string]*corral.Group[string]
	next  int
}

// genSource is the source of truth: a value is "key@gen", gen being the generation of the
// source when the load started. A write bumps the generation before it is made, as an
// application writes its database before it writes the cache.
type genSource struct {
	gen   atomic.Int64
	loads atomic.Int64
}

func (s *genSource) load(_ context.Context, key string) (string, error) {
	s.loads.Add(1)
	return fmt.Sprintf("%s@%d", key, s.gen.Load()), nil
}

func genOf(tb testing.TB, v string) int64 {
	i := strings.LastIndexByte(v, '@')
	if i < 0 {
		tb.Fatalf("value %q has no generation", v)
	}
	g, err := strconv.ParseInt(v[i+1:], 10, 64)
	if err != nil {
		tb.Fatalf("value %q has no generation", v)
	}
	return g
}

func (c *churnCluster) start(seed string) {
	c.tb.Helper()
	c.mu.Lock()
	name := fmt.Sprint("c", c.next)
	c.next++
	c.mu.Unlock()
	cfg := testConfig(name)
	if seed != "" {
		cfg.Join = []string{seed}
	}
	cfg.DeadNodeReclaimTime = 10 * time.Millisecond
	// Crashes come every few hundred milliseconds, and a write returns nil only once every
	// member it knows of was told: detection as fast as this keeps writes succeeding between
	// crashes. False suspicion on a busy machine costs only failed writes, which are not
	// checked.
	cfg.ProbeInterval, cfg.ProbeTimeout, cfg.SuspicionMult = 100*time.Millisecond, 50*time.Millisecond, 2
	n := newNode(c.tb, cfg)
	g, err := corral.NewGroup(n, "g", c.src.load, c.opts...)
	if err != nil {
		c.tb.Fatal(err)
	}
	c.mu.Lock()
	c.nodes[name], c.gs[name] = n, g
	c.mu.Unlock()
}

// pick returns a random live member, and whether its view holds every live member (a node
// whose view lacks one is still joining, or not yet told of a join, and may write as if the
// missing member did not exist; one that holds a crashed member as well is fine).
func (c *churnCluster) pick(r *rand.Rand) (string, *corral.Node, *corral.Group[string], bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var names []string
	for name := range c.nodes {
		names = append(names, name)
	}
	if len(names) == 0 {
		return "", nil, nil, false
	}
	slices.Sort(names)
	name := names[r.IntN(len(names))]
	n := c.nodes[name]
	seen := map[string]bool{}
	for _, m := range n.Members() {
		seen[m.Name] = true
	}
	for _, other := range names {
		if !seen[other] {
			return name, n, c.gs[name], false
		}
	}
	return name, n, c.gs[name], true
}

// remove takes name out of the live set (before it closes, so no new operation picks it).
func (c *churnCluster) remove(name string) *corral.Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.nodes[name]
	delete(c.nodes, name)
	delete(c.gs, name)
	return n
}

func (c *churnCluster) size() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.nodes)
}

type writeRecord struct {
	key      string
	gen      int64
	returned time.Time
}

type read struct {
	key     string
	started time.Time
	value   string
}

// Writes, reads, joins, graceful leaves and crashes interleave at random; no Get that
// started after a Set or Remove returned nil may return a value older than that write.
// Run with -churn.seed=N to replay the choices of a failing run (the timing is the
// machine's).
func TestRandomChurnNeverUndoesAWrite(t *testing.T) {
	seed := *churnSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (replay the choices with -churn.seed=%d)", seed, seed)
	c := &churnCluster{tb: t, src: &genSource{}, opts: []corral.GroupOption{corral.WithTTL(time.Hour)},
		nodes: map[string]*corral.Node{}, gs: map[string]*corral.Group[string]{}}
	c.start("")
	for range 3 {
		_, n0, _, _ := c.pick(rand.New(rand.NewPCG(seed, 0)))
		c.start(n0.GossipAddr())
	}
	clustertest.Eventually(t, "4 members", func() bool {
		_, _, _, full := c.pick(rand.New(rand.NewPCG(seed, 1)))
		return full
	})

	const keys = 24
	var (
		keyMu  [keys]sync.Mutex // writes of one key are made one at a time
		logMu  sync.Mutex
		writes []writeRecord
		reads  []read
		errs   atomic.Int64
	)
	stop := make(chan struct{})
	var workers sync.WaitGroup
	for w := range 4 {
		r := rand.New(rand.NewPCG(seed, uint64(10+w)))
		workers.Go(func() {
			for i := 0; i < 100_000; i++ { // bounded; stop ends it first
				select {
				case <-stop:
					return
				default:
				}
				k := r.IntN(keys)
				key := fmt.Sprint("key", k)
				_, _, g, full := c.pick(r)
				if g == nil {
					continue
				}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				switch op := r.IntN(10); {
				case op < 7:
					start := time.Now()
					v, err := g.Get(ctx, key)
					if err == nil {
						logMu.Lock()
						reads = append(reads, read{key: key, started: start, value: v})
						logMu.Unlock()
					} else if !errors.Is(err, corral.ErrClosed) {
						if errs.Add(1) <= 3 {
							t.Logf("Get(%s): %v", key, err)
						}
					}
				case full:
					keyMu[k].Lock()
					gen := c.src.gen.Add(1)
					var err error
					if op < 9 {
						err = g.Set(ctx, key, fmt.Sprintf("%s@%d", key, gen))
					} else {
						err = g.Remove(ctx, key)
					}
					if err == nil {
						logMu.Lock()
						writes = append(writes, writeRecord{key: key, gen: gen, returned: time.Now()})
						logMu.Unlock()
					}
					keyMu[k].Unlock()
				}
				cancel()
			}
		})
	}

	r := rand.New(rand.NewPCG(seed, 2))
	var changes []string
	for range 12 {
		switch op := r.IntN(3); {
		case op == 0 || c.size() <= 2:
			_, n, _, _ := c.pick(r)
			c.start(n.GossipAddr())
			changes = append(changes, "join")
		case op == 1:
			name, _, _, _ := c.pick(r)
			n := c.remove(name)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			if err := n.Close(ctx); err != nil {
				t.Logf("Close(%s): %v", name, err)
			}
			cancel()
			changes = append(changes, "leave "+name)
		default:
			name, _, _, _ := c.pick(r)
			crash.Node(c.remove(name))
			changes = append(changes, "crash "+name)
		}
		time.Sleep(time.Duration(100+r.IntN(300)) * time.Millisecond)
	}
	// On a busy machine the views may have been whole too seldom during the changes for
	// any write: the workers go on, on the settled cluster, until some have returned.
	// (Reads, local hits mostly, are many while writes wait for whole views.)
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		logMu.Lock()
		enough := len(writes) >= 20 && len(reads) >= 20
		logMu.Unlock()
		if enough {
			break
		}
	}
	close(stop)
	workers.Wait()
	t.Logf("changes: %v; %d writes, %d reads, %d failed Gets", changes, len(writes), len(reads), errs.Load())

	// The check: for each read, the newest write of its key that returned before the read
	// started; the read's value must be at least that new.
	latest := map[string][]writeRecord{}
	for _, w := range writes {
		latest[w.key] = append(latest[w.key], w)
	}
	stale := 0
	for _, rd := range reads {
		var need int64
		for _, w := range latest[rd.key] {
			if w.returned.Before(rd.started) && w.gen > need {
				need = w.gen
			}
		}
		if got := genOf(t, rd.value); got < need {
			stale++
			if stale <= 5 {
				t.Errorf("Get(%s) started after the write of generation %d returned, and got %q", rd.key, need, rd.value)
			}
		}
	}
	if stale > 0 {
		t.Fatalf("%d of %d reads returned a value older than a write that had returned", stale, len(reads))
	}
	if len(writes) == 0 || len(reads) == 0 {
		t.Fatal("the workload did nothing")
	}
}
