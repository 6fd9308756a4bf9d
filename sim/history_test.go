package sim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/corralcache/corral"
	"github.com/corralcache/corral/corraltest"
	"github.com/corralcache/corral/memnet"
	"github.com/corralcache/corral/ring"
)

// Timings of the simulated nodes: production values, but for the intervals that only bound
// how long a healed cluster takes to merge, shortened so a history settles sooner.
const (
	fillTimeout       = 5 * time.Second
	peerTimeout       = 2 * time.Second
	peekTimeout       = 250 * time.Millisecond
	silentPeerTimeout = 300 * time.Millisecond // corral's default
	workload          = 20 * time.Second       // how long clients send requests
	settleBound       = 90 * time.Second       // views must agree within this of the last heal
	getDeadline       = 10 * time.Minute       // every Get's ctx: far past any bound, so a hang is seen, not waited out
	keysPerRun        = 24
	hotKeys           = 6
	clientsCount      = 4
)

// event is one line of a history's trace.
type event struct {
	at   time.Duration // since the history began, in virtual time
	node string
	what string
}

func (e event) String() string { return fmt.Sprintf("%9.3fs %-4s %s", e.at.Seconds(), e.node, e.what) }

// fillRec is one loader run.
type fillRec struct {
	key, node string
	at        time.Duration
	failed    bool
}

// getRec is one Get.
type getRec struct {
	key, node    string
	start, end   time.Duration
	value        string
	err          error
	cancelled    bool // its ctx ended early on purpose
	membersAsked int  // how many members it may ask on its way: the bound on its duration
	group        string
	closedAt     time.Duration // for a Get on a node that had crashed or left: when it closed; else -1
	batch        bool          // one key of a GetMany
}

// writeRec is one Set or Remove (or, in group s, a SetWithExpiry or a FillSet that stored),
// made one at a time per key.
type writeRec struct {
	key        string
	gen        int64
	remove     bool
	start, end time.Duration
	err        error
	group      string
}

// purgeRec is one RemoveByTag.
type purgeRec struct {
	tag, node  string
	start, end time.Duration
	err        error
}

// viewRec is a view a node reported, and when.
type viewRec struct {
	at      time.Duration
	members []string
}

// closedGroup is the group of a node that crashed or left, and when Close returned (a crash:
// at once): a Get on it from then on must return ErrClosed.
type closedGroup struct {
	name     string
	g        *corral.Group[string]
	closedAt time.Duration
}

// split is a fault that may make members declare live members dead: from its start to its
// heal. The views are split until they agree again after the heal.
type split struct {
	start, heal time.Duration
}

// drop is a member leaving a node's view. When both were live (neither crashed nor leaving),
// the node declared a live member dead — a split the faults' spans may not cover: suspicion
// that began during a fault can end in a dead declaration after its heal.
type drop struct {
	at     time.Duration
	by, of string
}

// lifeEvent is a crash or a leave (gone) or a restart (not gone) of a node.
type lifeEvent struct {
	at    time.Duration
	name  string
	gone  bool
	crash bool // gone by a crash, not a leave
}

// span is an interval of virtual time; end < 0 means "still".
type span struct{ start, end time.Duration }

// history is one seeded run and everything it recorded.
type history struct {
	seed uint64
	// batches: this history reads with GetMany too, and group g has a batch loader. Set for
	// a sixth of the seeds (those ≡ 1 mod 6, which the regression seeds are not: their
	// workloads stay what they were when they found their bugs).
	batches bool
	// backups: the groups keep this many backups (WithBackups), for the seeds ≡ 5 mod 7 (again
	// none of the regressions): 1 or 2.
	backups int
	r       *rand.Rand // the history's choices; used by the main goroutine
	start   time.Time
	c       *corraltest.Cluster

	mu sync.Mutex
	// guards everything below
	trace      []event
	fills      []fillRec
	gets       []getRec
	writes     []writeRec
	views      map[string][][]string // every view each node reported, in order
	groups     map[string]*corral.Group[string]
	gen        int64 // the source of truth's generation: values are "key@gen"
	loadRand   *rand.Rand
	faults     map[string]int             // named exceptions to the fill bound, by kind
	failovers  map[string]int             // requests that failed over to a key's next owner, by key
	failoverAt map[string][]time.Duration // when each of them did
	restarts   map[string]int             // per node name
	healedAt   time.Duration              // when the last fault healed
	settled    time.Duration              // how long after healedAt the views agreed (-1 = never)
	nodes      int
	splits     []split                          // faults that can split the views: partitions, cuts, pauses, lossy links
	agreed     []span                           // when every node's view held the live nodes, with one ring
	lastView   map[string][]string              // each node's newest view, for drops; reset on restart
	drops      []drop                           // a member dropped from a view
	life       []lifeEvent                      // crashes, leaves and restarts, in order
	viewLog    map[string][]viewRec             // every view each node reported, with its time
	closed     []closedGroup                    // groups of nodes that crashed or left
	sgroups    map[string]*corral.Group[string] // group s (stale-while-revalidate, leases), by node
	leases     []leaseRec                       // refresh and fill tokens granted in group s
	purges     []purgeRec                       // RemoveByTag calls
	made       int                              // values made (fills and writes of group g), for their ids
	firsts     []string                         // keys of group g read for the first time during the workload (firstReads)
	madeAt     map[string]time.Duration         // when each value of group g began to be made: a fill's start, a write's

	locks  keyLocks // not guarded by mu: each serialises the writes of one key
	slocks keyLocks // the same for group s
}

func (h *history) now() time.Duration { return time.Since(h.start) }

func (h *history) logf(node, format string, args ...any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.trace = append(h.trace, event{at: h.now(), node: node, what: fmt.Sprintf(format, args...)})
}

// load is the loader of the simulated application: it takes 0–30 ms, fails 3% of the time,
// and returns "key@gen#fN" with the source's generation when it started and the fill's own
// number, tagged with the key's tag (tagOf).
func (h *history) load(node string) corral.LoadFunc[string] {
	return func(ctx context.Context, key string) (string, error) {
		corral.Tag(ctx, tagOf(key))
		h.mu.Lock()
		gen := h.gen
		h.made++
		value := fmt.Sprintf("%s@%d#f%d", key, gen, h.made)
		h.madeAt[value] = h.now()
		d := time.Duration(h.loadRand.Int64N(int64(30 * time.Millisecond)))
		fail := h.loadRand.Float64() < 0.03
		rec := fillRec{key: key, node: node, at: h.now(), failed: fail}
		h.fills = append(h.fills, rec)
		h.trace = append(h.trace, event{at: rec.at, node: node, what: fmt.Sprintf("fill %s (gen %d, fail %v)", key, gen, fail)})
		h.mu.Unlock()
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return "", ctx.Err()
		}
		if fail {
			return "", errors.New("source unavailable")
		}
		return value, nil
	}
}

// tagOf is the tag every value of key carries in group g: keys are spread over three tags.
func tagOf(key string) string {
	n := 0
	for _, c := range key {
		n += int(c)
	}
	return fmt.Sprint("t", n%3)
}

// genOf returns the generation of a value "key@gen", or "key@gen#id".
func genOf(v string) (int64, bool) {
	i := strings.LastIndexByte(v, '@')
	if i < 0 {
		return 0, false
	}
	s, _, _ := strings.Cut(v[i+1:], "#")
	g, err := strconv.ParseInt(s, 10, 64)
	return g, err == nil
}

// nodeConfig is what every simulated node runs with. Each node starts a seeded fraction of a
// millisecond after the previous one and gossips at its own seeded fraction of a millisecond
// off the default interval: virtual clocks do not drift, so nodes started at one instant
// would fire their tickers at one instant for ever, and which ran first — which draws which
// number from a shared source, which sends first — would be the scheduler's choice, not the
// seed's.
func (h *history) nodeConfig(name string) corral.Config {
	time.Sleep(time.Duration(1 + h.r.Int64N(int64(time.Millisecond))))
	return corral.Config{
		GossipInterval:      200*time.Millisecond + time.Duration(1+h.r.Int64N(int64(time.Millisecond))),
		Logger:              slog.New(simLog{h: h, node: name}),
		PeerTimeout:         peerTimeout,
		PeekTimeout:         peekTimeout,
		DrainTimeout:        time.Second,
		PushPullInterval:    10 * time.Second,
		RejoinInterval:      5 * time.Second,
		DeadNodeReclaimTime: 5 * time.Second,
		OnChange: func(ms []corral.Member) {
			names := make([]string, 0, len(ms))
			for _, m := range ms {
				names = append(names, m.Name)
			}
			h.mu.Lock()
			h.views[name] = append(h.views[name], names)
			h.viewLog[name] = append(h.viewLog[name], viewRec{at: h.now(), members: names})
			for _, was := range h.lastView[name] {
				if !slices.Contains(names, was) {
					h.drops = append(h.drops, drop{at: h.now(), by: name, of: was})
				}
			}
			h.lastView[name] = names
			h.trace = append(h.trace, event{at: h.now(), node: name, what: fmt.Sprintf("view %v", names)})
			h.mu.Unlock()
		},
	}
}

func (h *history) setup(n *corral.Node) error {
	opts := []corral.GroupOption{corral.WithTTL(time.Hour), corral.WithFillTimeout(fillTimeout), corral.WithBackups(h.backups)}
	if h.batches {
		opts = append(opts, corral.WithBatchLoad(h.loadMany(n.Name())))
	}
	g, err := corral.NewGroup(n, "g", h.load(n.Name()), opts...)
	if err != nil {
		return err
	}
	s, err := corral.NewGroup(n, "s", h.noSource(n.Name()), corral.WithFillTimeout(fillTimeout), corral.WithBackups(h.backups))
	if err != nil {
		return err
	}
	h.mu.Lock()
	h.groups[n.Name()] = g
	h.sgroups[n.Name()] = s
	h.mu.Unlock()
	return nil
}

// monitor records when the views agree, every 50 ms of virtual time, until stop.
func (h *history) monitor(stop chan struct{}) {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	agreed := false
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		now := h.c.Converged()
		if now == agreed {
			continue
		}
		agreed = now
		h.mu.Lock()
		if now {
			h.agreed = append(h.agreed, span{start: h.now(), end: -1})
		} else if len(h.agreed) > 0 {
			h.agreed[len(h.agreed)-1].end = h.now()
		}
		h.mu.Unlock()
	}
}

// splitFault records a fault that may split the views; the returned func records its heal.
func (h *history) splitFault() func() {
	h.mu.Lock()
	defer h.mu.Unlock()
	i := len(h.splits)
	h.splits = append(h.splits, split{start: h.now(), heal: -1})
	return func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.splits[i].heal = h.now()
	}
}

// lifecycle records that a node crashed or began to leave (gone), or restarted; a restarted
// node's views start afresh.
func (h *history) lifecycle(name string, gone, crash bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.life = append(h.life, lifeEvent{at: h.now(), name: name, gone: gone, crash: crash})
	if !gone {
		delete(h.lastView, name)
	}
}

// liveAt reports whether name was live (not crashed, not leaving) at t. h.mu must be held.
func (h *history) liveAt(name string, t time.Duration) bool {
	live := true
	for _, e := range h.life {
		if e.at > t {
			break
		}
		if e.name == name {
			live = !e.gone
		}
	}
	return live
}

// group returns a random live node's group, and the node's name.
func (h *history) group(r *rand.Rand) (string, *corral.Group[string]) {
	nodes := h.c.Nodes()
	if len(nodes) == 0 {
		return "", nil
	}
	n := nodes[r.IntN(len(nodes))]
	h.mu.Lock()
	defer h.mu.Unlock()
	return n.Name(), h.groups[n.Name()]
}

// run plays the history in the caller's bubble.
func (h *history) run() error {
	h.start = time.Now()
	h.views = map[string][][]string{}
	h.lastView = map[string][]string{}
	h.groups = map[string]*corral.Group[string]{}
	h.faults = map[string]int{}
	h.failovers = map[string]int{}
	h.failoverAt = map[string][]time.Duration{}
	h.restarts = map[string]int{}
	h.viewLog = map[string][]viewRec{}
	h.madeAt = map[string]time.Duration{}
	h.sgroups = map[string]*corral.Group[string]{}
	h.settled = -1
	h.loadRand = rand.New(rand.NewPCG(h.r.Uint64(), h.r.Uint64()))
	for k := range h.locks {
		h.locks[k] = make(chan struct{}, 1)
		h.slocks[k] = make(chan struct{}, 1)
	}
	h.nodes = 3 + h.r.IntN(7)
	if h.r.IntN(2) == 0 {
		h.nodes = 5 // half the histories have five nodes, the size the rate goal is set for
	}
	if *flagNodes > 0 {
		h.nodes = *flagNodes // after the draws, so the rest of the history draws as without it
	}
	link := memnet.Link{Delay: time.Millisecond, Jitter: time.Millisecond}
	if h.r.IntN(4) == 0 {
		link.Loss = 0.01
	}
	c, err := corraltest.New(corraltest.Config{
		Nodes: h.nodes, Node: h.nodeConfig, Setup: h.setup, Link: link, Seed: h.r.Uint64() | 1,
	})
	if err != nil {
		return err
	}
	h.c = c
	defer c.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 2*settleBound)
	err = c.WaitConverged(ctx)
	cancel()
	if err != nil {
		return fmt.Errorf("the first %d nodes did not converge: %w", h.nodes, err)
	}
	h.logf("", "%d nodes converged, link %+v", h.nodes, link)

	monitorDone := make(chan struct{})
	monitorStop := make(chan struct{})
	go func() { defer close(monitorDone); h.monitor(monitorStop) }()
	defer func() { close(monitorStop); <-monitorDone }()

	var clients sync.WaitGroup
	stop := time.Now().Add(workload)
	for i := range clientsCount {
		cr := rand.New(rand.NewPCG(h.r.Uint64(), uint64(i)))
		clients.Go(func() { h.client(cr, stop) })
	}
	clients.Go(func() { h.firstReads(stop) })
	h.faultSchedule()
	clients.Wait()

	// Heal everything, then let the views agree.
	h.c.Heal()
	for _, n := range h.c.Nodes() {
		h.c.Resume(n.Name())
	}
	h.mu.Lock()
	h.healedAt = h.now()
	h.mu.Unlock()
	ctx, cancel = context.WithTimeout(context.Background(), settleBound)
	err = c.WaitConverged(ctx)
	cancel()
	h.mu.Lock()
	if err == nil {
		h.settled = h.now() - h.healedAt
	}
	h.mu.Unlock()
	if err != nil {
		return nil // the check reports it, with the trace
	}
	// A last read of every key on every node, after the cluster settled.
	for _, n := range h.c.Nodes() {
		for k := range keysPerRun {
			h.get(n.Name(), h.groupOf(n.Name()), key(k), nil)
		}
	}
	return nil
}

// firstReads reads, every 250 ms until stop, a key of group g that nobody has read yet, on a
// random live node: the first read of a key whose owner is across a fault. Such a read finds
// no copy anywhere on its side, so it shows what a partition, a cut or a pause costs a Get
// that must be filled, where a warm key is answered by a copy. Its choices come from a
// source of its own, so that the clients draw as they did without it.
func (h *history) firstReads(stop time.Time) {
	r := rand.New(rand.NewPCG(h.seed, 0x6669727374)) // "first"
	for i := 0; time.Now().Before(stop); i++ {
		time.Sleep(250 * time.Millisecond)
		nodes := h.c.Nodes()
		if len(nodes) == 0 {
			continue
		}
		name := nodes[r.IntN(len(nodes))].Name()
		k := fmt.Sprint("first", i)
		h.mu.Lock()
		h.firsts = append(h.firsts, k)
		h.mu.Unlock()
		h.get(name, h.groupOf(name), k, nil)
	}
}

// gKeys returns every key of group g the history read. h.mu must be held.
func (h *history) gKeys() []string {
	out := make([]string, 0, keysPerRun+len(h.firsts))
	for k := range keysPerRun {
		out = append(out, key(k))
	}
	return append(out, h.firsts...)
}

// allKeys returns every key the history read, in either group. h.mu must be held.
func (h *history) allKeys() []string {
	out := h.gKeys()
	for k := range keysPerRun {
		out = append(out, skey(k))
	}
	return out
}

func (h *history) groupOf(name string) *corral.Group[string] {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.groups[name]
}

func key(k int) string {
	if k < hotKeys {
		return fmt.Sprint("hot", k)
	}
	return fmt.Sprint("cold", k)
}

// keyLocks serialise the writes of each key, so that "the newest write that returned" is
// well defined; one per key, shared by the clients of a history. They are channels, not
// mutexes: a goroutine waiting on a sync.Mutex does not block durably, so while one client
// holds the lock across a slow write, synctest could not move time on.
type keyLocks [keysPerRun]chan struct{}

func (l *keyLocks) lock(k int)   { l[k] <- struct{}{} }
func (l *keyLocks) unlock(k int) { <-l[k] }

// client sends a random stream of requests until stop.
func (h *history) client(r *rand.Rand, stop time.Time) {
	locks := &h.locks
	for time.Now().Before(stop) {
		time.Sleep(time.Duration(10+r.IntN(290)) * time.Millisecond)
		k := r.IntN(keysPerRun)
		if r.IntN(3) > 0 && hotKeys > 0 {
			k = r.IntN(hotKeys) // two thirds of the requests are for hot keys
		}
		if r.IntN(40) == 0 {
			h.getClosed(r, key(k))
			continue
		}
		if r.IntN(4) == 0 {
			h.swrOp(r, k)
			continue
		}
		name, g := h.group(r)
		if g == nil {
			continue
		}
		switch op := r.IntN(20); {
		case op < 6 && h.batches:
			h.getMany(name, g, manyKeysFrom(k, op))
		case op < 14:
			h.get(name, g, key(k), nil)
		case op < 15:
			d := time.Duration(1+r.IntN(50)) * time.Millisecond
			h.get(name, g, key(k), &d)
		case op < 19:
			locks.lock(k)
			h.write(name, g, key(k), op >= 18)
			locks.unlock(k)
		case r.IntN(3) == 0:
			h.purge(name, tagOf(key(k)))
		default:
			locks.lock(k)
			h.write(name, g, key(k), false)
			locks.unlock(k)
		}
	}
}

// purge purges tag through node name, and records it.
func (h *history) purge(name, tag string) {
	n := h.c.Node(name)
	if n == nil {
		return
	}
	rec := purgeRec{tag: tag, node: name, start: h.now()}
	ctx, done := context.WithTimeout(context.Background(), getDeadline)
	defer done()
	rec.err = n.RemoveByTag(ctx, tag)
	rec.end = h.now()
	h.mu.Lock()
	h.purges = append(h.purges, rec)
	h.trace = append(h.trace, event{at: rec.end, node: name, what: fmt.Sprintf("purge %s: %v", tag, rec.err)})
	h.mu.Unlock()
}

// get does one Get and records it; cancel, if set, ends its ctx early.
func (h *history) get(node string, g *corral.Group[string], k string, cancel *time.Duration) {
	d := getDeadline
	if cancel != nil {
		d = *cancel
	}
	ctx, done := context.WithTimeout(context.Background(), d)
	defer done()
	rec := getRec{key: k, node: node, start: h.now(), cancelled: cancel != nil, membersAsked: h.nodes + 2, group: g.Name(), closedAt: -1}
	v, err := g.Get(ctx, k)
	rec.end, rec.value, rec.err = h.now(), v, err
	h.mu.Lock()
	h.gets = append(h.gets, rec)
	h.mu.Unlock()
}

// manyKeysFrom returns the keys a GetMany reads: k and the next n%5 keys, so that a batch mixes
// hot and cold keys, owned here and elsewhere. It draws nothing: the history's choices stay
// the same whatever a batch does.
func manyKeysFrom(k, n int) []string {
	keys := []string{key(k)}
	for i := 1; i <= n%5; i++ {
		keys = append(keys, key((k+i*7)%keysPerRun))
	}
	return keys
}

// getMany does one GetMany and records a Get of each key: its value, its error in the
// *ManyError, ErrNotFound for a key absent without one, or the whole call's error.
func (h *history) getMany(node string, g *corral.Group[string], keys []string) {
	ctx, done := context.WithTimeout(context.Background(), getDeadline)
	defer done()
	start := h.now()
	values, err := g.GetMany(ctx, keys)
	end := h.now()
	var me *corral.ManyError
	errors.As(err, &me)
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, k := range keys {
		rec := getRec{key: k, node: node, start: start, end: end, membersAsked: h.nodes + 2, group: g.Name(), closedAt: -1, batch: true}
		switch v, ok := values[k]; {
		case ok:
			rec.value = v
		case me != nil && me.Errors[k] != nil:
			rec.err = me.Errors[k]
		case err != nil && me == nil:
			rec.err = err
		default:
			rec.err = corral.ErrNotFound
		}
		h.gets = append(h.gets, rec)
	}
}

// loadMany is group g's batch loader in the histories with batches: load's work for every
// key, in one call that takes as long as its slowest key and fails, whole, when one fails.
func (h *history) loadMany(node string) corral.BatchLoadFunc[string] {
	return func(ctx context.Context, keys []string) (map[string]string, error) {
		h.mu.Lock()
		gen := h.gen
		out := make(map[string]string, len(keys))
		var longest time.Duration
		fail := false
		for _, key := range keys {
			corral.TagKey(ctx, key, tagOf(key))
			h.made++
			value := fmt.Sprintf("%s@%d#f%d", key, gen, h.made)
			h.madeAt[value] = h.now()
			longest = max(longest, time.Duration(h.loadRand.Int64N(int64(30*time.Millisecond))))
			fail = fail || h.loadRand.Float64() < 0.03
			out[key] = value
		}
		for _, key := range keys {
			h.fills = append(h.fills, fillRec{key: key, node: node, at: h.now(), failed: fail})
		}
		h.trace = append(h.trace, event{at: h.now(), node: node, what: fmt.Sprintf("fill %v (gen %d, fail %v)", keys, gen, fail)})
		h.mu.Unlock()
		select {
		case <-time.After(longest):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if fail {
			return nil, errors.New("source unavailable")
		}
		return out, nil
	}
}

// write does one Set (of the next generation) or Remove, bumping the source's generation
// first, as an application writes its database before its cache.
func (h *history) write(node string, g *corral.Group[string], k string, remove bool) {
	h.mu.Lock()
	h.gen++
	gen := h.gen
	h.mu.Unlock()
	rec := writeRec{key: k, gen: gen, remove: remove, start: h.now(), group: g.Name()}
	ctx, done := context.WithTimeout(context.Background(), getDeadline)
	defer done()
	if remove {
		rec.err = g.Remove(ctx, k)
	} else {
		h.mu.Lock()
		h.made++
		value := fmt.Sprintf("%s@%d#w%d", k, gen, h.made)
		h.madeAt[value] = rec.start
		h.mu.Unlock()
		rec.err = g.SetWithTags(ctx, k, value, tagOf(k))
	}
	rec.end = h.now()
	h.mu.Lock()
	h.writes = append(h.writes, rec)
	what := "set"
	if remove {
		what = "remove"
	}
	h.trace = append(h.trace, event{at: rec.end, node: node, what: fmt.Sprintf("%s %s gen %d: %v", what, k, gen, rec.err)})
	h.mu.Unlock()
}

// faultSchedule applies 1 to 3 faults at random instants of the workload, each healed (or
// not) by the end of it.
func (h *history) faultSchedule() {
	type step struct {
		at time.Duration
		do func()
	}
	var steps []step
	add := func(at time.Duration, do func()) { steps = append(steps, step{at, do}) }
	for range 1 + h.r.IntN(3) {
		at := time.Duration(1+h.r.IntN(14)) * time.Second
		lasts := time.Duration(1+h.r.IntN(6)) * time.Second
		switch kind := h.r.IntN(7); kind {
		case 0: // crash, maybe a restart under the same name
			restart := h.r.IntN(2) == 0
			var victim string
			add(at, func() {
				victim = h.pickLive()
				if victim == "" || len(h.c.Nodes()) <= 2 {
					return
				}
				h.logf(victim, "crash")
				h.lifecycle(victim, true, true)
				g := h.groupOf(victim)
				h.c.Crash(victim)
				h.closedNode(victim, g)
			})
			if restart {
				add(at+lasts, func() {
					if victim == "" || h.c.Node(victim) != nil {
						return
					}
					h.logf(victim, "restart")
					h.lifecycle(victim, false, false)
					h.mu.Lock()
					h.restarts[victim]++
					h.faults["restart"]++
					h.mu.Unlock()
					if _, err := h.c.Restart(victim); err != nil {
						h.logf(victim, "restart failed: %v", err)
					}
				})
			}
		case 1: // graceful leave
			add(at, func() {
				name := h.pickLive()
				if name == "" || len(h.c.Nodes()) <= 2 {
					return
				}
				h.logf(name, "leave")
				h.lifecycle(name, true, false)
				g := h.groupOf(name)
				go func() { // Close takes a while; the workload goes on meanwhile
					if err := h.c.Leave(context.Background(), name); err != nil {
						// Another leave of the node, picked at the same instant, runs its
						// Close: the node is closed when that one returns, not now.
						h.logf(name, "leave: %v", err)
						return
					}
					h.closedNode(name, g)
				}()
			})
		case 2: // join
			add(at, func() {
				n, err := h.c.Add()
				if err != nil {
					h.logf("", "join failed: %v", err)
					return
				}
				h.logf(n.Name(), "join")
			})
		case 3, 4: // partition along a random cut, maybe one-way
			oneWay := kind == 4
			healed := func() {}
			add(at, func() {
				var a, b []string
				for _, n := range h.c.Nodes() {
					if h.r.IntN(2) == 0 {
						a = append(a, n.Name())
					} else {
						b = append(b, n.Name())
					}
				}
				if len(a) == 0 || len(b) == 0 {
					return
				}
				h.mu.Lock()
				h.faults["partition side"] += 2
				h.mu.Unlock()
				healed = h.splitFault()
				if oneWay {
					h.logf("", "cut %v -> %v", a, b)
					h.c.Network.Cut(h.hosts(a), h.hosts(b))
				} else {
					h.logf("", "partition %v | %v", a, b)
					h.c.Partition(a, b)
				}
			})
			add(at+lasts, func() { h.logf("", "heal"); h.c.Heal(); healed() })
		case 5: // pause
			var name string
			healed := func() {}
			add(at, func() {
				name = h.pickLive()
				if name == "" {
					return
				}
				h.mu.Lock()
				h.faults["pause"]++
				h.mu.Unlock()
				healed = h.splitFault()
				h.logf(name, "pause")
				h.c.Pause(name)
			})
			add(at+lasts, func() {
				if name != "" {
					h.logf(name, "resume")
					h.c.Resume(name)
					healed()
				}
			})
		case 6: // a slow, lossy link
			var a, b *memnet.Host
			healed := func() {}
			add(at, func() {
				x, y := h.pickLive(), h.pickLive()
				if x == "" || x == y {
					return
				}
				healed = h.splitFault()
				a, b = h.c.Host(x), h.c.Host(y)
				h.logf("", "slow link %s -> %s", x, y)
				h.c.Network.SetLink(a, b, memnet.Link{Delay: 20 * time.Millisecond, Jitter: 20 * time.Millisecond, Loss: 0.2})
			})
			add(at+lasts, func() {
				if a != nil {
					h.c.Network.ClearLink(a, b)
					healed()
				}
			})
		}
	}
	slices.SortStableFunc(steps, func(x, y step) int { return int(x.at - y.at) })
	for _, s := range steps {
		if d := s.at - h.now(); d > 0 {
			time.Sleep(d)
		}
		s.do()
	}
	if d := workload - h.now(); d > 0 {
		time.Sleep(d)
	}
}

// closedNode records that the node called name, whose group g was, closed (its Close
// returned, or it crashed).
func (h *history) closedNode(name string, g *corral.Group[string]) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = append(h.closed, closedGroup{name: name, g: g, closedAt: h.now()})
	h.trace = append(h.trace, event{at: h.now(), node: name, what: "closed"})
}

// getClosed does a Get on the group of a node that crashed or left, if there is one: it must
// return ErrClosed.
func (h *history) getClosed(r *rand.Rand, k string) {
	h.mu.Lock()
	if len(h.closed) == 0 {
		h.mu.Unlock()
		return
	}
	cg := h.closed[r.IntN(len(h.closed))]
	h.mu.Unlock()
	rec := getRec{key: k, node: cg.name, start: h.now(), membersAsked: h.nodes + 2, group: cg.g.Name(), closedAt: cg.closedAt}
	ctx, done := context.WithTimeout(context.Background(), getDeadline)
	defer done()
	v, err := cg.g.Get(ctx, k)
	rec.end, rec.value, rec.err = h.now(), v, err
	h.mu.Lock()
	h.gets = append(h.gets, rec)
	h.mu.Unlock()
}

func (h *history) pickLive() string {
	nodes := h.c.Nodes()
	if len(nodes) == 0 {
		return ""
	}
	return nodes[h.r.IntN(len(nodes))].Name()
}

func (h *history) hosts(names []string) []*memnet.Host {
	var out []*memnet.Host
	for _, n := range names {
		out = append(out, h.c.Host(n))
	}
	return out
}

// owners returns, per key, the distinct owners the key had in any node's view.
func (h *history) owners() map[string]map[string]bool {
	out := map[string]map[string]bool{}
	rings := map[string]*ring.Ring{}
	for _, views := range h.views {
		for _, v := range views {
			id := strings.Join(v, ",")
			if rings[id] == nil {
				rings[id], _ = ring.New(v, ring.DefaultConfig())
			}
		}
	}
	for _, name := range h.allKeys() {
		set := map[string]bool{}
		for _, r := range rings {
			set[r.Owner(name)] = true
		}
		out[name] = set
	}
	return out
}

// ownedAnywhere returns, per node name, the keys it owned in some view.
func (h *history) ownedAnywhere() map[string]map[string]bool {
	out := map[string]map[string]bool{}
	names := h.allKeys()
	for _, views := range h.views {
		for _, v := range views {
			r, err := ring.New(v, ring.DefaultConfig())
			if err != nil {
				continue
			}
			for _, name := range names {
				o := r.Owner(name)
				if out[o] == nil {
					out[o] = map[string]bool{}
				}
				out[o][name] = true
			}
		}
	}
	return out
}
