package corral_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/corralcache/corral"
	"github.com/corralcache/corral/memnet"
)

// The tag guarantees, in virtual time: once RemoveByTag(t) returned nil, no Get started after
// it returns a value stored with t before it — on any node, through near copies, hand-offs,
// warm pulls and crashes — while values of other tags, and values tagged t after it, are
// served.

// tagSource is a source of truth whose values carry their generation ("key@gen") and are
// tagged "customer:N" from the key's prefix "cN-".
type tagSource struct{ gen atomic.Int64 }

func (s *tagSource) load(ctx context.Context, _ func() *corral.Group[string], key string) (string, error) {
	if customer, _, ok := strings.Cut(key, "-"); ok {
		corral.Tag(ctx, "customer:"+strings.TrimPrefix(customer, "c"))
	}
	return fmt.Sprintf("%s@%d", key, s.gen.Load()), nil
}

// readEverywhere reads every key on every live node, twice (near copies for the keys others
// own), and returns what the last read of each key on each node returned.
func readEverywhere(t *testing.T, ec *ecluster, keys []string) map[string]map[string]string {
	t.Helper()
	out := map[string]map[string]string{}
	for range 2 {
		for _, n := range ec.Nodes() {
			if out[n.Name()] == nil {
				out[n.Name()] = map[string]string{}
			}
			for _, k := range keys {
				v, err := ec.g(n.Name()).Get(context.Background(), k)
				if err != nil {
					t.Fatalf("Get(%s) on %s: %v", k, n.Name(), err)
				}
				out[n.Name()][k] = v
			}
		}
	}
	return out
}

// checkPurged fails unless every node now reads gen for the keys of customer 7 and old for
// the others.
func checkPurged(t *testing.T, ec *ecluster, keys []string, gen, old int) {
	t.Helper()
	for name, got := range readEverywhere(t, ec, keys) {
		for _, k := range keys {
			want := fmt.Sprintf("%s@%d", k, old)
			if strings.HasPrefix(k, "c7-") {
				want = fmt.Sprintf("%s@%d", k, gen)
			}
			if got[k] != want {
				t.Fatalf("after the purge, Get(%s) on %s = %q, want %q", k, name, got[k], want)
			}
		}
	}
}

func tagKeys() []string {
	var keys []string
	for i := range 30 {
		keys = append(keys, fmt.Sprintf("c7-%d", i), fmt.Sprintf("c8-%d", i))
	}
	return keys
}

// A purge through any node removes the values of the tag on every node — owners' stores and
// near copies — and nothing else; values filled again after it are kept.
func TestRemoveByTagEverywhere(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := &tagSource{}
		ec := newECluster(t, eclusterConfig{nodes: 3, load: src.load, opts: []corral.GroupOption{corral.WithTTL(time.Hour)}})
		keys := tagKeys()
		readEverywhere(t, ec, keys)
		src.gen.Store(1)
		if err := ec.Node("n1").RemoveByTag(context.Background(), "customer:7"); err != nil {
			t.Fatal(err)
		}
		checkPurged(t, ec, keys, 1, 0)
		src.gen.Store(2)
		checkPurged(t, ec, keys, 1, 0) // the values filled after the purge stay
		var purged uint64
		for _, n := range ec.Nodes() {
			purged += n.Stats()["g"].Purged
		}
		if purged == 0 {
			t.Fatal("no value counted as purged")
		}
	})
}

// Tags travel with every copy: values a leaving member hands off, values a joining member
// pulls, near copies made before the change — a purge after the change removes them all.
func TestRemoveByTagAfterMoves(t *testing.T) {
	for _, change := range []string{"join", "leave", "crash"} {
		t.Run(change, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				src := &tagSource{}
				ec := newECluster(t, eclusterConfig{nodes: 3, load: src.load, opts: []corral.GroupOption{corral.WithTTL(time.Hour)}})
				keys := tagKeys()
				readEverywhere(t, ec, keys)
				switch change {
				case "join":
					if _, err := ec.Add(); err != nil {
						t.Fatal(err)
					}
				case "leave":
					if err := ec.Leave(context.Background(), "n2"); err != nil {
						t.Fatal(err)
					}
				case "crash":
					if err := ec.Crash("n2"); err != nil {
						t.Fatal(err)
					}
				}
				ec.converge(t)
				readEverywhere(t, ec, keys) // the moved values are where they now belong
				src.gen.Store(1)
				if err := ec.Node("n0").RemoveByTag(context.Background(), "customer:7"); err != nil {
					t.Fatal(err)
				}
				if change == "crash" {
					checkPurgedAfterCrash(t, ec, keys)
					return
				}
				checkPurged(t, ec, keys, 1, 0)
			})
		})
	}
}

// checkPurgedAfterCrash is checkPurged for a cluster that lost a member: the keys it owned
// were filled again, at generation 0 or 1, and only customer 7's must be 1.
func checkPurgedAfterCrash(t *testing.T, ec *ecluster, keys []string) {
	t.Helper()
	for name, got := range readEverywhere(t, ec, keys) {
		for _, k := range keys {
			if strings.HasPrefix(k, "c7-") && got[k] != k+"@1" {
				t.Fatalf("after the purge, Get(%s) on %s = %q, want generation 1", k, name, got[k])
			}
		}
	}
}

// A fill in flight when the purge arrives, whose value carries the tag, is not served after
// the purge: the Gets that wait on it fill again.
func TestRemoveByTagRevokesFillsInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var gen atomic.Int64
		release := make(chan struct{})
		var first atomic.Bool
		ec := newECluster(t, eclusterConfig{nodes: 3, opts: []corral.GroupOption{corral.WithTTL(time.Hour)},
			load: func(ctx context.Context, _ func() *corral.Group[string], key string) (string, error) {
				v := fmt.Sprintf("%s@%d", key, gen.Load())
				if first.CompareAndSwap(false, true) {
					<-release // the source answered the old value; the purge lands before the fill ends
				}
				corral.Tag(ctx, "t")
				return v, nil
			}})
		key := "k"
		owner := ec.Node("n0").Owner(key).Name
		other := "n0"
		if owner == other {
			other = "n1"
		}
		started := make(chan string, 1)
		go func() { v, _ := ec.g(other).Get(context.Background(), key); started <- v }()
		synctest.Wait()
		gen.Store(1)
		if err := ec.Node(owner).RemoveByTag(context.Background(), "t"); err != nil {
			t.Fatal(err)
		}
		after := make(chan string, 1)
		go func() { v, _ := ec.g(owner).Get(context.Background(), key); after <- v }()
		synctest.Wait()
		close(release)
		if v := <-after; v != key+"@1" {
			t.Fatalf("a Get started after the purge = %q, want the value filled after it", v)
		}
		<-started
		for _, n := range ec.Nodes() {
			if v, err := ec.g(n.Name()).Get(context.Background(), key); err != nil || v != key+"@1" {
				t.Fatalf("Get on %s after the purge = %q, %v", n.Name(), v, err)
			}
		}
	})
}

// A member whose version clock ran ahead of the purger's — it drew versions for writes whose
// news has not reached the purger yet — may hold values born above the purge's first
// version, stored before the purge was called; it says so, and the purge is made again
// above its clock, so those values go too.
func TestRemoveByTagAboveAMembersClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := &tagSource{}
		ec := newECluster(t, eclusterConfig{nodes: 3, load: src.load, opts: []corral.GroupOption{corral.WithTTL(time.Hour)}})
		ahead, purger := ec.Node("n2"), ec.Node("n0")
		var key string
		for i := 0; key == ""; i++ {
			if k := fmt.Sprintf("c7-%d", i); ahead.Owner(k).Name == "n2" {
				key = k
			}
		}
		// Past the window in which a new owner's first miss asks the others (a warm pull takes
		// virtual time, which would lift n0's next version past n2's by the wall clock).
		time.Sleep(2 * time.Minute)
		// n2's news reaches n0 late: its writes draw versions n0 hears of only a moment later.
		ec.Network.SetLink(ec.Host("n2"), ec.Host("n0"), memnet.Link{Delay: 150 * time.Millisecond})
		var writes sync.WaitGroup
		for i := range 5 {
			writes.Go(func() { ec.g("n2").Set(context.Background(), fmt.Sprint("x", i), "x") })
		}
		// The writes drew their versions and wait for their news to reach n0; no virtual time
		// passes, so n0's wall-clock floor does not lift its next version past theirs.
		synctest.Wait()
		if v, err := ec.g("n2").Get(context.Background(), key); err != nil || v != key+"@0" {
			t.Fatalf("Get = %q, %v", v, err)
		}
		src.gen.Store(1)
		if err := purger.RemoveByTag(context.Background(), "customer:7"); err != nil {
			t.Fatal(err)
		}
		writes.Wait()
		ec.Network.ClearLink(ec.Host("n2"), ec.Host("n0"))
		for _, n := range ec.Nodes() {
			if v, err := ec.g(n.Name()).Get(context.Background(), key); err != nil || v != key+"@1" {
				t.Fatalf("Get(%s) on %s after the purge = %q, %v; want generation 1", key, n.Name(), v, err)
			}
		}
	})
}

// Writes carry tags too: SetWithTags, SetWithExpiry's and FillSet's Expiry.Tags. GetWithInfo
// and Peek say a value's tags.
func TestTaggedWrites(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ec := newECluster(t, eclusterConfig{nodes: 3, notFound: true, opts: []corral.GroupOption{corral.WithTTL(time.Hour)}})
		ctx := context.Background()
		g0, g1 := ec.g("n0"), ec.g("n1")
		if err := g0.SetWithTags(ctx, "a", "A", "t", "u"); err != nil {
			t.Fatal(err)
		}
		if err := g1.SetWithExpiry(ctx, "b", "B", corral.Expiry{TTL: time.Hour, Tags: []string{"t"}}); err != nil {
			t.Fatal(err)
		}
		l, err := g0.Lease(ctx, "c", corral.LeaseOptions{Fill: time.Minute})
		if err != nil || l.State != corral.LeaseFill {
			t.Fatalf("Lease = %+v, %v", l, err)
		}
		if ok, err := g0.FillSet(ctx, "c", "C", l.Token, corral.Expiry{TTL: time.Hour, Tags: []string{"t"}}); !ok || err != nil {
			t.Fatalf("FillSet = %v, %v", ok, err)
		}
		if err := g0.SetWithTags(ctx, "d", "D", "u"); err != nil {
			t.Fatal(err)
		}
		for _, n := range ec.Nodes() {
			g := ec.g(n.Name())
			v, info, err := g.GetWithInfo(ctx, "a")
			if err != nil || v != "A" || strings.Join(info.Tags, " ") != "t u" {
				t.Fatalf("GetWithInfo(a) on %s = %q %+v %v", n.Name(), v, info, err)
			}
			v, info, err = g.Peek(ctx, "b")
			if err != nil || v != "B" || strings.Join(info.Tags, " ") != "t" || info.FreshFor <= 0 {
				t.Fatalf("Peek(b) on %s = %q %+v %v", n.Name(), v, info, err)
			}
		}
		if err := ec.Node("n2").RemoveByTag(ctx, "t"); err != nil {
			t.Fatal(err)
		}
		for _, n := range ec.Nodes() {
			g := ec.g(n.Name())
			for _, k := range []string{"a", "b", "c"} {
				if v, err := g.Get(ctx, k); !errors.Is(err, corral.ErrNotFound) {
					t.Fatalf("Get(%s) on %s after the purge = %q, %v; want ErrNotFound", k, n.Name(), v, err)
				}
				if _, _, err := g.Peek(ctx, k); !errors.Is(err, corral.ErrNotFound) {
					t.Fatalf("Peek(%s) on %s after the purge: %v", k, n.Name(), err)
				}
			}
			if v, err := g.Get(ctx, "d"); err != nil || v != "D" {
				t.Fatalf("Get(d) on %s = %q, %v; a value of another tag", n.Name(), v, err)
			}
		}
	})
}

// Tags that break a limit get an error wrapping ErrInvalidTag and change nothing.
func TestTagLimits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var tags []string
		ec := newECluster(t, eclusterConfig{nodes: 1, opts: []corral.GroupOption{corral.WithTTL(time.Hour)},
			load: func(ctx context.Context, _ func() *corral.Group[string], key string) (string, error) {
				corral.Tag(ctx, tags...)
				return "v", nil
			}})
		ctx := context.Background()
		g := ec.g("n0")
		many := make([]string, 40)
		for i := range many {
			many[i] = fmt.Sprint("t", i)
		}
		bad := [][]string{{""}, {"a b"}, {strings.Repeat("x", 300)}, many}
		for _, b := range bad {
			if err := g.SetWithTags(ctx, "k", "v", b...); !errors.Is(err, corral.ErrInvalidTag) {
				t.Fatalf("SetWithTags(%.20q) = %v, want ErrInvalidTag", b, err)
			}
			tags = b
			var fe *corral.FillError
			if _, err := g.Get(ctx, fmt.Sprint("k", len(b[0]), len(b))); !errors.As(err, &fe) || !errors.Is(err, corral.ErrInvalidTag) {
				t.Fatalf("Get of a value tagged %.20q = %v, want a *FillError wrapping ErrInvalidTag", b, err)
			}
		}
		for _, b := range []string{"", "a b", strings.Repeat("x", 300)} {
			if err := ec.Node("n0").RemoveByTag(ctx, b); !errors.Is(err, corral.ErrInvalidTag) {
				t.Fatalf("RemoveByTag(%.20q) = %v, want ErrInvalidTag", b, err)
			}
		}
		if _, _, err := g.Peek(ctx, "k"); !errors.Is(err, corral.ErrNotFound) {
			t.Fatalf("a refused SetWithTags stored something: %v", err)
		}
	})
}

// Purges on a busy cluster: readers everywhere, a purge every few milliseconds of the three
// tags in turn through every node; no read that started after a purge returned gets a value
// of its tag made before the purge started.
func TestRemoveByTagUnderReads(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		made := map[string]time.Time{} // value → when its fill began
		var seq atomic.Int64
		tagOf := func(key string) string { return fmt.Sprint("t", len(key)%3) }
		ec := newECluster(t, eclusterConfig{nodes: 4, opts: []corral.GroupOption{corral.WithTTL(time.Hour)},
			load: func(ctx context.Context, _ func() *corral.Group[string], key string) (string, error) {
				v := fmt.Sprintf("%s#%d", key, seq.Add(1))
				mu.Lock()
				made[v] = time.Now()
				mu.Unlock()
				corral.Tag(ctx, tagOf(key))
				time.Sleep(time.Millisecond)
				return v, nil
			}})
		keys := []string{"a", "bb", "ccc", "dddd", "eeeee", "ffffff"}
		type purge struct {
			tag        string
			start, end time.Time
		}
		var purges []purge
		stop := make(chan struct{})
		var wg sync.WaitGroup
		type read struct {
			key, value string
			start      time.Time
		}
		var reads []read
		for _, n := range ec.Nodes() {
			g := ec.g(n.Name())
			wg.Go(func() {
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					case <-time.After(time.Millisecond):
					}
					k := keys[i%len(keys)]
					start := time.Now()
					v, err := g.Get(context.Background(), k)
					if err != nil {
						t.Errorf("Get(%s): %v", k, err)
						return
					}
					mu.Lock()
					reads = append(reads, read{k, v, start})
					mu.Unlock()
				}
			})
		}
		for i := range 60 {
			time.Sleep(7 * time.Millisecond)
			tag := fmt.Sprint("t", i%3)
			n := ec.Nodes()[i%4]
			p := purge{tag: tag, start: time.Now()}
			if err := n.RemoveByTag(context.Background(), tag); err != nil {
				t.Fatal(err)
			}
			p.end = time.Now()
			mu.Lock()
			purges = append(purges, p)
			mu.Unlock()
		}
		close(stop)
		wg.Wait()
		bad := 0
		for _, r := range reads {
			for _, p := range purges {
				if p.tag == tagOf(r.key) && r.start.After(p.end) && made[r.value].Before(p.start) {
					if bad++; bad <= 3 {
						t.Errorf("Get(%s) at %v returned %q, made at %v, before the purge of %s (%v–%v)",
							r.key, r.start, r.value, made[r.value], p.tag, p.start, p.end)
					}
					break
				}
			}
		}
		if len(reads) < 100 {
			t.Fatalf("only %d reads", len(reads))
		}
	})
}
