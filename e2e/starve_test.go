package e2e

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// nodeOrigin is an origin that knows which node asks it: node i fills from /n<i>/items/<key>.
// It answers "value of <key>" after delay, and counts each key's calls by node.
type nodeOrigin struct {
	*httptest.Server
	mu    sync.Mutex
	calls map[string]map[string]int // key → node → calls
}

func newNodeOrigin(tb testing.TB, delay time.Duration) *nodeOrigin {
	tb.Helper()
	o := &nodeOrigin{calls: map[string]map[string]int{}}
	o.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		node, key, _ := strings.Cut(strings.TrimPrefix(r.URL.EscapedPath(), "/"), "/items/")
		o.mu.Lock()
		if o.calls[key] == nil {
			o.calls[key] = map[string]int{}
		}
		o.calls[key][node]++
		o.mu.Unlock()
		time.Sleep(delay)
		fmt.Fprintf(w, "value of %s", key)
	}))
	tb.Cleanup(o.Close)
	return o
}

// startStarveNodes starts three corral serve nodes with the default SilentPeerTimeout, node i
// filling from origin's /n<i>/items/{key}, and waits until each sees all three. It returns
// them and, by node name, the name its origin URL gives it.
func startStarveNodes(t *testing.T, origin *nodeOrigin) ([]*proc, map[string]string) {
	t.Helper()
	silent := flagDefault(t, "silent-peer-timeout")
	var nodes []*proc
	index := map[string]string{}
	for i := range 3 {
		var join []string
		if i > 0 {
			join = []string{nodes[0].Gossip}
		}
		n := startNode(t, fmt.Sprint("node-", i), join,
			"--origin", fmt.Sprintf("%s/n%d/items/{key}", origin.URL, i), "--ttl", "1h",
			"--silent-peer-timeout", silent) // the default, not the harness's 2 s
		nodes = append(nodes, n)
		index[n.Name] = fmt.Sprint("n", i)
	}
	for _, n := range nodes {
		waitFor(t, n.Name+" sees the cluster", 20*time.Second, func() bool { return len(n.cluster(t, "").Members) == 3 })
	}
	return nodes, index
}

// valueGetter returns a GET of a key of group items through a node that wants nodeOrigin's
// value of it.
func valueGetter() func(n *proc, key string) error {
	client := &http.Client{Timeout: 20 * time.Second}
	return func(n *proc, key string) error {
		resp, err := client.Get(n.url("/v1/groups/items/keys/" + key))
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || string(b) != "value of "+key {
			return fmt.Errorf("%s: %q", resp.Status, b)
		}
		return nil
	}
}

// hit runs six hitters, each calling one(its number, the call's) back to back, at most
// 100 000 times, until the function it returns is called, which waits for them.
func hit(one func(i, j int)) (stop func()) {
	done := make(chan struct{})
	var hitters sync.WaitGroup
	for i := range 6 {
		hitters.Go(func() {
			for j := range 100_000 {
				select {
				case <-done:
					return
				default:
				}
				one(i, j)
			}
		})
	}
	return func() { close(done); hitters.Wait() }
}

// stampedeGets sends 12 GETs of key at once, through the nodes of via in turn, and returns how
// many failed (each an error of t's, said as what).
func stampedeGets(t *testing.T, what string, via []*proc, key string, get func(n *proc, key string) error) int {
	var wg sync.WaitGroup
	var failed atomic.Int32
	for i := range 12 {
		n := via[i%len(via)]
		wg.Go(func() {
			if err := get(n, key); err != nil {
				failed.Add(1)
				t.Errorf("%s: GET %s on %s: %v", what, key, n.Name, err)
			}
		})
	}
	wg.Wait()
	return int(failed.Load())
}

// lateness returns the corral_timer_lateness_seconds of node n.
func lateness(t *testing.T, n *proc) float64 {
	t.Helper()
	resp, err := http.Get(n.url("/metrics"))
	if err != nil {
		t.Fatalf("/metrics of %s: %v", n.Name, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	m := regexp.MustCompile(`(?m)^corral_timer_lateness_seconds (\S+)$`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("/metrics of %s has no corral_timer_lateness_seconds", n.Name)
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// callsOf returns the calls for key, by node.
func (o *nodeOrigin) callsOf(key string) map[string]int {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := map[string]int{}
	for n, c := range o.calls[key] {
		out[n] = c
	}
	return out
}

// flagDefault returns the default of corral serve's flag name, as its usage says it.
func flagDefault(tb testing.TB, name string) string {
	tb.Helper()
	out, _ := exec.Command(buildCorral(tb), "serve", "-h").CombinedOutput()
	m := regexp.MustCompile(`(?m)^  -` + regexp.QuoteMeta(name) + ` .*\n.*\(default ([^)]+)\)$`).FindSubmatch(out)
	if m == nil {
		tb.Fatalf("no default for --%s in corral serve -h:\n%s", name, out)
	}
	return string(m[1])
}

// A node starved of CPU runs late — its timers, its reads — and must not take a live peer
// for a silent one: that fails the peer's keys over and fills them again. Three corral serve
// processes with the default SilentPeerTimeout, each held to a tenth of a CPU granted every
// second (a cgroup quota: a throttled container's lot; a busy node stands still for most of
// each second, as on a machine at load 20), serve hits of warm keys as fast as they come back
// and, once the starvation has shown for a few seconds, stampedes of new keys — 12 Gets of
// each through every node, each fill 300 ms at the origin: every key is filled once, 0 extra
// origin calls. (Before a node stretched its silence bound by its own lateness, two runs of
// this test counted 16 and 27.) And an owner paused (SIGSTOP) while the others starve is still
// failed over: Gets of its new keys through the others are answered, each key filled once,
// not by it. Origin calls are counted, not time.
func TestStarvedNodesFailNoLiveOwnerOver(t *testing.T) {
	origin := newNodeOrigin(t, 300*time.Millisecond)
	nodes, index := startStarveNodes(t, origin)
	epoch := nodes[0].cluster(t, "").Epoch
	get := valueGetter()
	const warm = 20
	for i := range warm {
		if err := get(nodes[i%3], fmt.Sprint("w-", i)); err != nil {
			t.Fatal(err)
		}
	}

	var limits []*cpuLimit
	for _, n := range nodes {
		l := newCPULimit(t, n.Name, 0.1, time.Second)
		if err := l.add(n.cmd.Process.Pid); err != nil {
			t.Fatal(err)
		}
		limits = append(limits, l)
	}
	// Hits of the warm keys, as fast as they come back, through the nodes in hitting (all of
	// them, then all but the paused one): each node uses its share of every second.
	var hitting atomic.Pointer[[]*proc]
	hitting.Store(&nodes)
	defer hit(func(i, j int) {
		on := *hitting.Load()
		get(on[(i+j)%len(on)], fmt.Sprint("w-", j%warm))
	})()
	// A node learns that it runs late from its own timers: give the starvation a few seconds
	// to show before the stampedes, and count the warm keys' calls from then on.
	time.Sleep(3 * time.Second)
	calls := func(k string) (total int, by map[string]int) {
		by = origin.callsOf(k)
		for _, c := range by {
			total += c
		}
		return total, by
	}
	before := map[string]int{}
	var keys []string
	for i := range warm {
		k := fmt.Sprint("w-", i)
		keys = append(keys, k)
		before[k], _ = calls(k)
	}

	// Stampedes of new keys, one after the other, for at most 40 keys or 60 s.
	failed := 0
	for r, end := 0, time.Now().Add(60*time.Second); r < 40 && time.Now().Before(end); r++ {
		key := fmt.Sprintf("s-%d", r)
		keys = append(keys, key)
		before[key] = 1 // its one fill
		failed += stampedeGets(t, "starved", nodes, key, get)
	}
	if e := nodes[0].cluster(t, "").Epoch; e != epoch {
		t.Errorf("the ring changed while the nodes were starved (epoch %d, then %d): a member was taken for dead, and the count below includes its keys' moves", epoch, e)
	}
	extra := 0
	for _, k := range keys {
		total, by := calls(k)
		extra += total - before[k]
		if total > before[k] {
			t.Logf("%s, owned by %s, filled %d times more: %v", k, index[nodes[0].cluster(t, k).Owner], total-before[k], by)
		}
	}
	t.Logf("starved: %d stampedes of 12 GETs beside hits of %d keys: %d failed, %d extra origin calls", len(keys)-warm, warm, failed, extra)
	if extra != 0 {
		t.Errorf("%d extra origin calls for %d keys of live owners on starved nodes, want 0", extra, len(keys))
	}

	// An owner paused while the others starve is still failed over: its new keys are
	// answered through the others, each filled once, not by it.
	victim := nodes[2]
	others := nodes[:2]
	hitting.Store(&others)
	if err := victim.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer victim.cmd.Process.Signal(syscall.SIGCONT)
	var owned []string
	for i := 0; len(owned) < 5 && i < 1000; i++ {
		if k := "p-" + strconv.Itoa(i); nodes[0].cluster(t, k).Owner == victim.Name {
			owned = append(owned, k)
		}
	}
	for _, k := range owned {
		var wg sync.WaitGroup
		for i := range 4 {
			n := others[i%2]
			wg.Go(func() {
				if err := get(n, k); err != nil {
					t.Errorf("starved, its owner paused: GET %s on %s: %v", k, n.Name, err)
				}
			})
		}
		wg.Wait()
		if total, by := calls(k); total != 1 || by[index[victim.Name]] != 0 {
			t.Errorf("%s of the paused owner filled %v, want once, by another member", k, by)
		}
	}
	for _, l := range limits {
		if err := l.release(); err != nil {
			t.Error(err)
		}
	}
}

// An owner starved alone — a CPU limit on its pod only — stands still for most of each quota
// period while the nodes asking it run on time, so their own lateness says nothing of it; its
// answers say it. Three corral serve processes with the default SilentPeerTimeout, one of
// them held to a tenth of a CPU granted every second, the others free: hits of warm keys it
// owns, through all three as fast as they come back (the starved owner spends its share of
// every second on its own), and, once the starvation has
// shown for a few seconds, stampedes of new keys it owns — 12 Gets of each through the other
// two, each fill 300 ms at the origin: every key is filled once, by the starved owner, 0 extra
// origin calls. (Before a node's answers told its lateness, this is what the silence bound of
// the nodes on time took for a silent owner.) Origin calls are counted, not time.
func TestStarvedOwnerAloneIsNotFailedOver(t *testing.T) {
	origin := newNodeOrigin(t, 300*time.Millisecond)
	nodes, index := startStarveNodes(t, origin)
	epoch := nodes[0].cluster(t, "").Epoch
	get := valueGetter()
	starved, askers := nodes[2], nodes[:2]
	ownedBy := func(prefix string, want int) []string {
		var keys []string
		for i := 0; len(keys) < want && i < 10_000; i++ {
			if k := prefix + strconv.Itoa(i); nodes[0].cluster(t, k).Owner == starved.Name {
				keys = append(keys, k)
			}
		}
		if len(keys) < want {
			t.Fatalf("found %d keys owned by %s, want %d", len(keys), starved.Name, want)
		}
		return keys
	}
	warm := ownedBy("w-", 10)
	for _, k := range warm {
		if err := get(askers[0], k); err != nil {
			t.Fatal(err)
		}
	}

	limit := newCPULimit(t, starved.Name, 0.1, time.Second)
	if err := limit.add(starved.cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	defer hit(func(i, j int) { get(nodes[(i+j)%3], warm[j%len(warm)]) })()
	// The starved owner tells its lateness once it has run late: give it a few seconds. It
	// knows it is late (corral_timer_lateness_seconds), and the nodes asking it may not be.
	time.Sleep(3 * time.Second)
	late := lateness(t, starved)
	t.Logf("corral_timer_lateness_seconds: %s %.3f, %s %.3f, %s %.3f", starved.Name, late,
		askers[0].Name, lateness(t, askers[0]), askers[1].Name, lateness(t, askers[1]))
	if late < 0.1 {
		t.Errorf("%s, held to a tenth of a CPU under load, reports its timers %.3f s late, want at least 0.1 s: not starved, or not measured", starved.Name, late)
	}
	before := map[string]int{}
	total := func(k string) (n int) {
		for _, c := range origin.callsOf(k) {
			n += c
		}
		return n
	}
	for _, k := range warm {
		before[k] = total(k)
	}
	keys := slices.Clone(warm)
	failed := 0
	stampedes := ownedBy("s-", 30)
	end := time.Now().Add(60 * time.Second)
	for _, key := range stampedes {
		if time.Now().After(end) {
			break
		}
		keys = append(keys, key)
		before[key] = 1 // its one fill
		failed += stampedeGets(t, "its owner starved", askers, key, get)
		if by := origin.callsOf(key); by[index[starved.Name]] != 1 {
			t.Errorf("%s filled %v, want once, by its owner %s", key, by, starved.Name)
		}
	}
	if e := nodes[0].cluster(t, "").Epoch; e != epoch {
		t.Errorf("the ring changed while %s was starved (epoch %d, then %d): a member was taken for dead", starved.Name, epoch, e)
	}
	extra := 0
	for _, k := range keys {
		if n := total(k) - before[k]; n != 0 {
			extra += n
			t.Logf("%s filled %d times more: %v", k, n, origin.callsOf(k))
		}
	}
	t.Logf("owner starved alone: %d stampedes of 12 GETs beside hits of %d keys: %d failed, %d extra origin calls", len(keys)-len(warm), len(warm), failed, extra)
	if extra != 0 {
		t.Errorf("%d extra origin calls for keys of a live owner starved alone, want 0", extra)
	}
	if err := limit.release(); err != nil {
		t.Error(err)
	}
}
