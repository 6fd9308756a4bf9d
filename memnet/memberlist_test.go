package memnet_test

import (
	"fmt"
	"io"
	"log"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/corralcache/corral/memnet"
)

// cluster is k memberlist members, one per host of a network, with what each saw.
type cluster struct {
	t     testing.TB
	n     *memnet.Network
	nodes []*member
	start time.Time
	// goroutines is how many ran before the cluster started: as many are left after shutdown.
	goroutines int
	tune       func(*memberlist.Config) // changes the LAN defaults; nil = none

	mu sync.Mutex
	// guards log
	log []memberEvent
}

type member struct {
	name string
	h    *memnet.Host
	tr   *memnet.Transport
	ml   *memberlist.Memberlist
}

// memberEvent is one join or leave (dead or left) that one member saw.
type memberEvent struct {
	at       time.Duration // since the cluster started
	observer string
	kind     string // "join", "leave"
	subject  string
}

func (e memberEvent) String() string {
	return fmt.Sprintf("%v %s %s %s", e.at, e.observer, e.kind, e.subject)
}

// newCluster starts k members on new hosts of n, with memberlist's LAN defaults, each joined to
// the first; it does not wait for them to converge.
func newCluster(tb testing.TB, n *memnet.Network, k int) *cluster {
	tb.Helper()
	return newStaggeredCluster(tb, n, k, nil, nil)
}

// newStaggeredCluster is newCluster with tune applied to each member's config and, if set,
// stagger called before each member starts.
func newStaggeredCluster(tb testing.TB, n *memnet.Network, k int, tune func(*memberlist.Config), stagger func()) *cluster {
	tb.Helper()
	c := &cluster{t: tb, n: n, start: time.Now(), goroutines: first(bubbleGoroutines()), tune: tune}
	for i := range k {
		if stagger != nil {
			stagger()
		}
		m := c.startMember(n.NewHost(), fmt.Sprintf("node%d", i))
		if i > 0 {
			if _, err := m.ml.Join([]string{c.nodes[0].tr.Addr()}); err != nil {
				tb.Fatalf("%s join: %v", m.name, err)
			}
		}
	}
	return c
}

func (c *cluster) startMember(h *memnet.Host, name string) *member {
	c.t.Helper()
	tr, err := h.NewTransport(7946)
	if err != nil {
		c.t.Fatal(err)
	}
	cfg := memberlist.DefaultLANConfig()
	cfg.Name = name
	cfg.Transport = tr
	cfg.Logger = log.New(io.Discard, "", 0)
	cfg.Events = &eventLog{c: c, observer: name}
	if c.tune != nil {
		c.tune(cfg)
	}
	ml, err := memberlist.Create(cfg)
	if err != nil {
		c.t.Fatal(err)
	}
	m := &member{name: name, h: h, tr: tr, ml: ml}
	for i, old := range c.nodes {
		if old.name == name {
			c.nodes[i] = m
			return m
		}
	}
	c.nodes = append(c.nodes, m)
	return m
}

// shutdown stops every member (its goroutines; a crashed one's too), then waits for their
// goroutines to end (see settle).
func (c *cluster) shutdown() {
	for _, m := range c.nodes {
		m.ml.Shutdown()
	}
	settle(c.t, c.goroutines)
}

// settle lets virtual time pass until no more than want goroutines are left in the caller's
// bubble, at most settleLimit, and returns how long that took. memberlist's probe goroutine
// outlives Shutdown until its ack timer fires, up to ProbeInterval × AwarenessMaxMultiplier
// (8s with the LAN defaults), and a bubble whose root returns stops its clock: without the
// wait the bubble would end with that goroutine blocked for ever, which synctest reports as a
// deadlock.
func settle(tb testing.TB, want int) time.Duration {
	tb.Helper()
	start := time.Now()
	for {
		k, stacks := bubbleGoroutines()
		if k <= want {
			return time.Since(start)
		}
		if time.Since(start) > settleLimit {
			tb.Fatalf("%d goroutines left in the bubble %v after shutdown, want %d:\n%s", k, settleLimit, want, stacks)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// bubbleGoroutines counts the goroutines of the caller's synctest bubble (runtime.NumGoroutine
// would count goroutines outside it, which end in real time, not virtual), and returns their
// stacks.
func bubbleGoroutines() (int, string) {
	self := make([]byte, 256)
	self = self[:runtime.Stack(self, false)]
	_, after, ok := strings.Cut(strings.SplitN(string(self), "\n", 2)[0], "synctest bubble ")
	if !ok {
		panic("bubbleGoroutines called outside a synctest bubble")
	}
	tag := "synctest bubble " + strings.TrimSuffix(after, "]:")
	buf := make([]byte, 64<<10)
	for {
		k := runtime.Stack(buf, true)
		if k < len(buf) {
			buf = buf[:k]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	k := 0
	var mine []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		header, _, _ := strings.Cut(g, "\n")
		if strings.Contains(header, tag+"]") || strings.Contains(header, tag+",") {
			k++
			mine = append(mine, g)
		}
	}
	return k, strings.Join(mine, "\n\n")
}

const settleLimit = 10 * time.Second

// convergeLimit bounds how long a cluster may take to agree after its members joined: gossip
// usually spreads a join in well under a second, but a member that every retransmission missed
// (each holder sends a join to 4 random peers: about 1 start in 1000 with 5 members) learns it
// at the first push/pull, which memberlist runs a random stagger plus a full PushPullInterval
// after start: 30 to 60s with the LAN defaults.
const convergeLimit = 90 * time.Second

// detectLimit bounds how long members take to drop a member they cannot reach: about 6s for a
// crash (the suspicion timeout is 4s with 5 members), but up to 35s observed for the minority of
// a partition, whose own failing probes make Lifeguard stretch its timeouts (up to 8×).
const detectLimit = 60 * time.Second

// rejoinLimit bounds how long views take to agree after a member that was declared dead joins
// again: usually under a second, but a member that missed every gossip of the refutation learns
// it at a push/pull with a random peer every 30s; observed up to 43s in 280 runs.
const rejoinLimit = 3 * 30 * time.Second

// view returns the names m sees as alive, sorted.
func (m *member) view() []string {
	var names []string
	for _, nd := range m.ml.Members() {
		names = append(names, nd.Name)
	}
	slices.Sort(names)
	return names
}

// names returns the names of members, sorted.
func names(ms ...*member) []string {
	var s []string
	for _, m := range ms {
		s = append(s, m.name)
	}
	slices.Sort(s)
	return s
}

// waitViews waits, in steps of 100ms of virtual time and at most limit, until each member of
// want's keys sees exactly the members of its value, and returns how long that took.
func (c *cluster) waitViews(limit time.Duration, want map[*member][]string) time.Duration {
	c.t.Helper()
	start := time.Now()
	for {
		ok := true
		for m, names := range want {
			if !slices.Equal(m.view(), names) {
				ok = false
			}
		}
		if ok {
			return time.Since(start)
		}
		if time.Since(start) >= limit {
			for m, names := range want {
				c.t.Errorf("after %v %s sees %v, want %v", limit, m.name, m.view(), names)
			}
			c.t.Errorf("network: %+v; events: %v", c.n.Stats(), c.events())
			c.t.FailNow()
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// allSee is the want of waitViews for every member of ms seeing exactly ms.
func allSee(ms ...*member) map[*member][]string {
	want := make(map[*member][]string)
	for _, m := range ms {
		want[m] = names(ms...)
	}
	return want
}

// events returns what was seen, in order.
func (c *cluster) events() []memberEvent {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.log)
}

// eventLog is a memberlist.EventDelegate that records into the cluster's log.
type eventLog struct {
	c        *cluster
	observer string
}

var _ memberlist.EventDelegate = (*eventLog)(nil)

func (e *eventLog) record(kind string, n *memberlist.Node) {
	if n.Name == e.observer {
		return
	}
	e.c.mu.Lock()
	defer e.c.mu.Unlock()
	e.c.log = append(e.c.log, memberEvent{time.Since(e.c.start), e.observer, kind, n.Name})
}

func (e *eventLog) NotifyJoin(n *memberlist.Node)   { e.record("join", n) }
func (e *eventLog) NotifyLeave(n *memberlist.Node)  { e.record("leave", n) }
func (e *eventLog) NotifyUpdate(n *memberlist.Node) {}

func TestMemberlistConverges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n, _ := memnet.New(memnet.Config{Link: memnet.Link{Delay: 500 * time.Microsecond, Jitter: 500 * time.Microsecond}})
		c := newCluster(t, n, 5)
		defer c.shutdown()
		took := c.waitViews(convergeLimit, allSee(c.nodes...))
		t.Logf("5 members converged in %v of virtual time", took)
	})
}

// TestMemberlistDetectsCrash checks that a crashed member is declared dead by every other
// member, within memberlist's failure-detection time: a probe interval to notice, then the
// suspicion timeout, SuspicionMult × max(1, log10(N)) × ProbeInterval = 4s with the LAN
// defaults and 5 members, up to SuspicionMaxTimeoutMult (6) times that without confirmations.
func TestMemberlistDetectsCrash(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n, _ := memnet.New(memnet.Config{Link: memnet.Link{Delay: time.Millisecond}})
		c := newCluster(t, n, 5)
		defer c.shutdown()
		c.waitViews(convergeLimit, allSee(c.nodes...))

		crashed := c.nodes[4]
		crashedAt := time.Since(c.start)
		crashed.h.Crash()
		took := c.waitViews(detectLimit, allSee(c.nodes[:4]...))

		cfg := memberlist.DefaultLANConfig()
		minimum := time.Duration(cfg.SuspicionMult) * cfg.ProbeInterval // 4s
		for _, e := range c.events() {
			if e.kind == "leave" && e.subject == crashed.name {
				if d := e.at - crashedAt; d < minimum {
					t.Errorf("%s declared %s dead %v after the crash, before the minimum suspicion time %v", e.observer, e.subject, d, minimum)
				}
			}
		}
		t.Logf("all 4 members dropped the crashed one %v (virtual) after the crash", took)
	})
}

// TestMemberlistPartitionAndHeal checks that each side of a partition drops the other, and that
// after healing one join merges the views again.
func TestMemberlistPartitionAndHeal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n, _ := memnet.New(memnet.Config{Link: memnet.Link{Delay: time.Millisecond}})
		c := newCluster(t, n, 5)
		defer c.shutdown()
		c.waitViews(convergeLimit, allSee(c.nodes...))

		left, right := c.nodes[:2], c.nodes[2:]
		hosts := func(ms []*member) []*memnet.Host {
			var hs []*memnet.Host
			for _, m := range ms {
				hs = append(hs, m.h)
			}
			return hs
		}
		n.Partition(hosts(left), hosts(right))
		want := allSee(left...)
		for m, v := range allSee(right...) {
			want[m] = v
		}
		took := c.waitViews(detectLimit, want)
		t.Logf("each side dropped the other %v (virtual) after the partition", took)

		n.Heal()
		if _, err := left[0].ml.Join([]string{right[0].tr.Addr()}); err != nil {
			t.Fatalf("join across the healed partition: %v", err)
		}
		took = c.waitViews(rejoinLimit, allSee(c.nodes...))
		t.Logf("views merged %v (virtual) after the join", took)
	})
}

// TestMemberlistPausedMember checks that a paused member is declared dead, and that once it
// resumes it comes back (it refutes its death, or rejoins when it has dropped everyone).
func TestMemberlistPausedMember(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n, _ := memnet.New(memnet.Config{Link: memnet.Link{Delay: time.Millisecond}})
		c := newCluster(t, n, 5)
		defer c.shutdown()
		c.waitViews(convergeLimit, allSee(c.nodes...))

		paused := c.nodes[4]
		paused.h.Pause()
		c.waitViews(detectLimit, allSee(c.nodes[:4]...))
		paused.h.Resume()
		if _, err := paused.ml.Join([]string{c.nodes[0].tr.Addr()}); err != nil {
			t.Fatalf("join after resume: %v", err)
		}
		took := c.waitViews(rejoinLimit, allSee(c.nodes...))
		t.Logf("rejoined views agree %v (virtual) after the join", took)
	})
}

// TestMemberlistRestart checks that a crashed member restarted under the same address and name
// is admitted again.
func TestMemberlistRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n, _ := memnet.New(memnet.Config{Link: memnet.Link{Delay: time.Millisecond}})
		c := newCluster(t, n, 5)
		defer c.shutdown()
		c.waitViews(convergeLimit, allSee(c.nodes...))

		old := c.nodes[4]
		old.h.Crash()
		old.ml.Shutdown() // the crashed process's goroutines end with it
		c.waitViews(detectLimit, allSee(c.nodes[:4]...))
		if err := old.h.Restart(); err != nil {
			t.Fatal(err)
		}
		m := c.startMember(old.h, old.name)
		if _, err := m.ml.Join([]string{c.nodes[0].tr.Addr()}); err != nil {
			t.Fatalf("join after restart: %v", err)
		}
		took := c.waitViews(rejoinLimit, allSee(c.nodes...))
		t.Logf("rejoined views agree %v (virtual) after the join", took)
	})
}

func first[A, B any](a A, _ B) A { return a }
