package sim

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/corralcache/corral"
	"github.com/corralcache/corral/corraltest"
	"github.com/corralcache/corral/memnet"
)

var flagScale = flag.String("sim.scale", "", "comma-free list of cluster sizes for TestSimScale, e.g. 50 or 100 (empty = skip)")

// TestSimScale runs, in virtual time, what one machine's processes cannot: clusters of 50 and
// 100 nodes through a join, a graceful leave, a crash and a partition of a third, and reports
// after each how long until every view agrees (from the change, and from the first view that
// changed), the share of keys that moved against the ideal 1/N, and the fills of hot keys read
// from every node right after the change. The largest size then crashes a member again with
// faster probing.
func TestSimScale(t *testing.T) {
	if *flagScale == "" {
		t.Skip("-sim.scale not set")
	}
	var sizes []int
	for _, f := range splitComma(*flagScale) {
		var n int
		fmt.Sscan(f, &n)
		sizes = append(sizes, n)
	}
	for _, size := range sizes {
		t.Run(fmt.Sprint(size, " nodes"), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { scaleHistory(t, size, false) })
		})
	}
	// A crash takes memberlist's suspicion time to agree on, which grows with log10 of the
	// size: with the defaults, 8 s at 100 nodes. What faster probing buys there:
	last := sizes[len(sizes)-1]
	t.Run(fmt.Sprint(last, " nodes, probing every ", fastProbeInterval), func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) { scaleHistory(t, last, true) })
	})
}

func splitComma(s string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == ',' {
			if i > start {
				out = append(out, s[start:i])
			}
			start = i + 1
		}
	}
	return out
}

const scaleKeys = 20000

// settle is how long a formed cluster runs before the first change.
const settle = 10 * time.Second

// partitionFor is how long the partition lasts: past the suspicion time at 100 nodes (8 s), so
// that each side has declared the other dead, as after any real partition of some length.
const partitionFor = 30 * time.Second

// The faster failure detection a user may configure: probes 4 times as often, each waiting a
// fifth as long for its ack (a suspicion then lasts 2 s at 100 nodes instead of 8 s).
const (
	fastProbeInterval = 250 * time.Millisecond
	fastProbeTimeout  = 100 * time.Millisecond
)

func scaleHistory(t *testing.T, size int, fast bool) {
	var fills atomic.Int64
	var mu sync.Mutex
	groups := map[string]*corral.Group[string]{}
	c, err := corraltest.New(corraltest.Config{
		Nodes: size,
		Link:  memnet.Link{Delay: time.Millisecond, Jitter: time.Millisecond},
		Node: func(string) corral.Config {
			cfg := corral.Config{Logger: slog.New(slog.DiscardHandler), PushPullInterval: 30 * time.Second}
			if fast {
				cfg.ProbeInterval, cfg.ProbeTimeout = fastProbeInterval, fastProbeTimeout
			}
			return cfg
		},
		Setup: func(n *corral.Node) error {
			g, err := corral.NewGroup(n, "g", func(ctx context.Context, key string) (string, error) {
				fills.Add(1)
				return "v:" + key, nil
			}, corral.WithTTL(time.Hour))
			mu.Lock()
			groups[n.Name()] = g
			mu.Unlock()
			return err
		},
		Seed: uint64(size),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if err := c.WaitConverged(ctx); err != nil {
		t.Fatal(err)
	}
	// Hot keys, each filled once and read everywhere so every node asked its owner.
	hot := make([]string, 20)
	for i := range hot {
		hot[i] = fmt.Sprint("hot", i)
	}
	readAll := func() {
		var wg sync.WaitGroup
		for _, n := range c.Nodes() {
			mu.Lock()
			g := groups[n.Name()]
			mu.Unlock()
			wg.Go(func() {
				for _, k := range hot {
					g.Get(ctx, k)
				}
			})
		}
		wg.Wait()
	}
	readAll()
	// Let the formation's gossip drain before the first change: memberlist queues every
	// member's alive message on every node and sends them all together, tier by tier, so for
	// about 5 virtual seconds after 100 nodes formed a new broadcast (the leaver's) waits behind
	// them. A cluster that has been up for seconds is past that.
	time.Sleep(settle)
	owners := func() map[string]string {
		n := c.Nodes()[0]
		out := make(map[string]string, scaleKeys)
		for i := range scaleKeys {
			k := fmt.Sprint("k", i)
			out[k] = n.Owner(k).Name
		}
		return out
	}
	// step applies change, which returns the instant to measure from: when the change began,
	// or, for a partition, when it healed.
	step := func(what string, change func() time.Time) {
		before := owners()
		members := len(c.Nodes())
		f0 := fills.Load()
		// The window in which views disagree runs from the first view that differs from
		// before the change to the last one that changes: until the first, every member routes
		// as before. A partition's window starts at its heal.
		epoch := c.Nodes()[0].Epoch()
		start := change()
		firstCh := make(chan time.Time, 1)
		stopWatch := make(chan struct{})
		go func() {
			tick := time.NewTicker(10 * time.Millisecond)
			defer tick.Stop()
			for {
				for _, n := range c.Nodes() {
					if n.Epoch() != epoch {
						firstCh <- time.Now()
						return
					}
				}
				select {
				case <-tick.C:
				case <-stopWatch:
					firstCh <- time.Time{}
					return
				}
			}
		}()
		if err := c.WaitConverged(ctx); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		took := time.Since(start)
		close(stopWatch)
		first := <-firstCh
		window := 0.0
		if !first.IsZero() {
			window = time.Since(first).Seconds()
		}
		after := owners()
		// A key moves because its owner came or went (the ideal 1/N), or because the ring's
		// bounded loads pushed it from one remaining member to another (the spill).
		joined, left := map[string]bool{}, map[string]bool{}
		for _, o := range after {
			joined[o] = true
		}
		for _, o := range before {
			left[o] = true
		}
		for o := range left {
			delete(joined, o)
		}
		for o := range after {
			delete(left, after[o])
		}
		moved, spill := 0, 0
		for k, o := range before {
			if after[k] == o {
				continue
			}
			moved++
			if !joined[after[k]] && !left[o] {
				spill++
			}
		}
		// The least a change can move: the keys the member that came owns, or the ones the
		// member that went owned.
		least := 0
		for k, o := range before {
			if joined[after[k]] || left[o] {
				least++
			}
		}
		readAll()
		oneN := 1 / float64(max(members, len(c.Nodes())))
		share, spillShare := float64(moved-spill)/scaleKeys, float64(spill)/scaleKeys
		ratio := 0.0
		if least > 0 {
			ratio = float64(moved-spill) / float64(least)
		}
		line := fmt.Sprintf("%d nodes | %s | views agreed after %.2f s (%.2f s after the first view changed) | keys moved %.2f%% (1/N = %.2f%%; the member's own share %.2f%%, %.2fx) + %.2f%% bounded-load spill | %d fills of %d hot keys read from every node",
			size, what, took.Seconds(), window, 100*share, 100*oneN, 100*float64(least)/scaleKeys, ratio, 100*spillShare, fills.Load()-f0, len(hot))
		t.Log(line)
		fmt.Println("sim-scale: " + line)
	}
	if fast {
		step(fmt.Sprintf("a crash, probing every %v (ProbeTimeout %v)", fastProbeInterval, fastProbeTimeout), func() time.Time {
			c.Crash(c.Nodes()[0].Owner(hot[1]).Name)
			return time.Now()
		})
		return
	}
	step("a join", func() time.Time {
		start := time.Now()
		if _, err := c.Add(); err != nil {
			t.Fatal(err)
		}
		return start
	})
	// The member that leaves, and the one that crashes, each own a hot key.
	step("a graceful leave", func() time.Time {
		name := c.Nodes()[0].Owner(hot[0]).Name
		start := time.Now()
		go c.Leave(ctx, name)
		for c.Node(name) != nil {
			time.Sleep(time.Millisecond)
		}
		return start
	})
	step("a crash", func() time.Time {
		c.Crash(c.Nodes()[0].Owner(hot[1]).Name)
		return time.Now()
	})
	var third, rest []string
	for i, n := range c.Nodes() {
		if i%3 == 0 {
			third = append(third, n.Name())
		} else {
			rest = append(rest, n.Name())
		}
	}
	step(fmt.Sprintf("a partition of a third for %v, then heal", partitionFor), func() time.Time {
		c.Partition(third, rest)
		time.Sleep(partitionFor)
		c.Heal()
		return time.Now()
	})
}
