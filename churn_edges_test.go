package corral_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/corralcache/corral"
	"github.com/corralcache/corral/corraltest"
	"github.com/corralcache/corral/memnet"
)

// The edges of the churn guarantees, each in virtual time: writes after a graceful leave, a
// closed node, nested fills under MaxFills, stale and negative entries moved by joins and
// leaves, leases across an ownership change, and a crash followed by a fast restart.

// ecluster is a corraltest cluster whose nodes run group "g" with the given options over a
// loader that counts its runs per key. A key that was never written is not found at the
// source when notFound is set (a cache with no origin, as corral serve without --origin).
type ecluster struct {
	*corraltest.Cluster
	opts     []corral.GroupOption
	notFound bool
	delay    time.Duration
	load     func(ctx context.Context, g func() *corral.Group[string], key string) (string, error)

	mu     sync.Mutex
	groups map[string]*corral.Group[string]
	loads  map[string]int
}

type eclusterConfig struct {
	nodes    int
	opts     []corral.GroupOption
	notFound bool
	delay    time.Duration
	node     func(name string) corral.Config
	link     memnet.Link // every link's delay and loss
	join     func(name string, others []string) []string
	// load, if set, is the loader; self returns the group of the node it runs on.
	load func(ctx context.Context, self func() *corral.Group[string], key string) (string, error)
}

func newECluster(t *testing.T, cfg eclusterConfig) *ecluster {
	t.Helper()
	ec := &ecluster{opts: cfg.opts, notFound: cfg.notFound, delay: cfg.delay, load: cfg.load,
		groups: map[string]*corral.Group[string]{}, loads: map[string]int{}}
	c, err := corraltest.New(corraltest.Config{Nodes: cfg.nodes, Setup: ec.setup, Node: cfg.node, Link: cfg.link, Join: cfg.join})
	if err != nil {
		t.Fatal(err)
	}
	ec.Cluster = c
	t.Cleanup(func() { c.Close(context.Background()) })
	ec.converge(t)
	return ec
}

func (ec *ecluster) setup(n *corral.Node) error {
	name := n.Name()
	self := func() *corral.Group[string] { return ec.g(name) }
	g, err := corral.NewGroup(n, "g", func(ctx context.Context, key string) (string, error) {
		ec.mu.Lock()
		ec.loads[key]++
		ec.mu.Unlock()
		if ec.delay > 0 {
			time.Sleep(ec.delay)
		}
		if ec.load != nil {
			return ec.load(ctx, self, key)
		}
		if ec.notFound {
			return "", corral.ErrNotFound
		}
		return "v:" + key, nil
	}, ec.opts...)
	ec.mu.Lock()
	ec.groups[name] = g
	ec.mu.Unlock()
	return err
}

func (ec *ecluster) converge(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := ec.WaitConverged(ctx); err != nil {
		t.Fatal(err)
	}
}

func (ec *ecluster) g(name string) *corral.Group[string] {
	ec.mu.Lock()
	defer ec.mu.Unlock()
	return ec.groups[name]
}

func (ec *ecluster) count(key string) int {
	ec.mu.Lock()
	defer ec.mu.Unlock()
	return ec.loads[key]
}

// A member that leaves while a write is being told to it is not named unreached: its
// connection closes as it leaves the writer's view, and the tell fails — but a member that
// has left serves none of its copies. One that crashes meanwhile is named: the writer cannot
// tell a crash from a split, behind which the member may serve its copy. Here the tell is
// slow to arrive (500 ms from n0 to n2, and peers are waited on for 10 s before they count as
// silent), and n2 leaves or crashes meanwhile.
func TestWriteToAMemberThatLeavesMeanwhile(t *testing.T) {
	for _, change := range []string{"leave", "crash"} {
		t.Run(change, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ec := newECluster(t, eclusterConfig{nodes: 3, opts: []corral.GroupOption{corral.WithTTL(time.Hour)},
					node: func(string) corral.Config { return corral.Config{SilentPeerTimeout: 10 * time.Second} }})
				var key string
				for _, k := range keyList(100, "m") {
					if ec.Node("n0").Owner(k).Name == "n0" {
						key = k
						break
					}
				}
				if _, err := ec.g("n2").Get(context.Background(), key); err != nil { // n2 holds a copy
					t.Fatal(err)
				}
				ec.Network.SetLink(ec.Host("n0"), ec.Host("n2"), memnet.Link{Delay: 500 * time.Millisecond})
				written := make(chan error, 1)
				go func() { written <- ec.g("n0").Set(context.Background(), key, "new") }()
				time.Sleep(10 * time.Millisecond) // the tell to n2 is on its way
				if change == "leave" {
					if err := ec.Leave(context.Background(), "n2"); err != nil {
						t.Fatal(err)
					}
				} else if err := ec.Crash("n2"); err != nil {
					t.Fatal(err)
				}
				err := <-written
				var ue *corral.UnreachedError
				switch {
				case change == "leave" && err != nil:
					t.Fatalf("Set(%s) while n2, told of it, left: %v; want nil (n2 serves nothing once it has left)", key, err)
				case change == "crash" && (!errors.As(err, &ue) || !slices.Equal(ue.Members, []string{"n2"})):
					t.Fatalf("Set(%s) while n2, told of it, crashed: %v; want an UnreachedError naming n2", key, err)
				}
				for _, name := range []string{"n0", "n1"} {
					if v, err := ec.g(name).Get(context.Background(), key); err != nil || v != "new" {
						t.Fatalf("Get(%s) on %s = %q, %v; want the write", key, name, v, err)
					}
				}
			})
		})
	}
}

// A graceful leave under writes: once every view agrees the member is gone, a write on any
// node reaches every member there is and returns nil — the departed member is not named as
// unreached (it was remembered as a member that had asked while it drained).
func TestWritesAfterALeaveReachEveryone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ec := newECluster(t, eclusterConfig{nodes: 3, opts: []corral.GroupOption{corral.WithTTL(time.Hour)}})
		keys := keyList(40, "w")
		leaver := ec.g("n2")
		for _, k := range keys {
			if _, err := leaver.Get(context.Background(), k); err != nil {
				t.Fatal(err)
			}
		}
		stop := make(chan struct{})
		var wg sync.WaitGroup
		// Writers on the members that stay, and the leaver's own application reading while
		// it drains: its requests reach members whose views no longer hold it.
		for i, g := range []*corral.Group[string]{ec.g("n0"), ec.g("n1"), leaver} {
			wg.Go(func() {
				for j := i; ; j++ {
					select {
					case <-stop:
						return
					case <-time.After(time.Millisecond):
					}
					k := keys[j%len(keys)]
					if g == leaver {
						g.Get(context.Background(), k)
					} else {
						g.Set(context.Background(), k, fmt.Sprint("w", j))
					}
				}
			})
		}
		if err := ec.Leave(context.Background(), "n2"); err != nil {
			t.Fatal(err)
		}
		ec.converge(t)
		close(stop)
		wg.Wait()
		for _, name := range []string{"n0", "n1"} {
			for _, k := range keys[:10] {
				err := ec.g(name).Set(context.Background(), k, "after")
				var ue *corral.UnreachedError
				if errors.As(err, &ue) {
					t.Fatalf("Set(%s) on %s after every view dropped n2: %v", k, name, err)
				}
				if err != nil {
					t.Fatalf("Set(%s) on %s: %v", k, name, err)
				}
			}
		}
	})
}
