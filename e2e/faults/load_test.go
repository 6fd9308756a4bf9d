package faults

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// driver is the load: a bounded, steady stream of GETs over hot and cold keys to every node
// that is up, with writes interleaved (bump the origin's generation, then PUT key@gen or
// DELETE through corral). It checks every answer:
//   - a value carries its generation; no GET started after a write returned 204 may return
//     an older one (a write answered 202 reached the owner but not every member: it is
//     checked once the test says the cluster healed, see strengthen);
//   - no value outlives the TTL + grace: a generation the origin replaced (without a write
//     through corral) more than ttlBound before a GET started is stale;
//   - no request is past its deadline (the client gives up then and counts a failure).
type driver struct {
	c        *cluster
	hot      []string // read, never written: their origin calls count refills
	written  []string // read and written
	workers  int
	pace     time.Duration // between one worker's requests
	maxOps   int           // bound on the requests of one run
	deadline time.Duration
	ttlBound time.Duration // TTL·(1+jitter) + grace + slack; 0 = no TTL check

	ops, cold atomic.Int64
	mu        sync.Mutex
	// guards the fields below
	keys       map[string]*keyState
	lat        []time.Duration
	failed     int
	failures   []string
	stale      []string
	unreached  int // writes answered 202
	notes      []string
	writeLat   []time.Duration
	stop, done chan struct{}
}

type keyState struct {
	strong int       // the generation of the last write that returned 204
	weak   int       // the generation of the last write that returned 202 (some member not told)
	side   [2]int    // during a cut: the last write answered 204 through a node of each side
	silent int       // a generation the origin moved to without a write through corral
	at     time.Time // when silent was set
	busy   sync.Mutex
}

func newDriver(c *cluster, hot, written []string) *driver {
	return &driver{c: c, hot: hot, written: written, workers: 4, pace: 20 * time.Millisecond,
		maxOps: 200000, deadline: 5 * time.Second, keys: map[string]*keyState{}}
}

func (d *driver) key(k string) *keyState {
	d.mu.Lock()
	defer d.mu.Unlock()
	ks, ok := d.keys[k]
	if !ok {
		ks = &keyState{}
		d.keys[k] = ks
	}
	return ks
}

// start runs the load until stop (or maxOps, or 10 minutes).
func (d *driver) start() {
	d.stop, d.done = make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	for w := range d.workers {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
			limit := time.Now().Add(10 * time.Minute)
			for d.ops.Add(1) <= int64(d.maxOps) && time.Now().Before(limit) {
				select {
				case <-d.stop:
					return
				case <-time.After(d.pace):
				}
				d.one(r)
			}
		})
	}
	go func() { wg.Wait(); close(d.done) }()
}

func (d *driver) halt() {
	close(d.stop)
	<-d.done
}

func (d *driver) one(r *rand.Rand) {
	switch x := r.IntN(100); {
	case x < 5 && len(d.written) > 0:
		d.write(r, d.written[r.IntN(len(d.written))])
	case x < 25 && len(d.written) > 0:
		d.get(r, d.written[r.IntN(len(d.written))])
	case x < 30:
		d.get(r, fmt.Sprintf("c-%s-%d", d.c.id, d.cold.Add(1)))
	case len(d.hot) > 0:
		d.get(r, d.hot[r.IntN(len(d.hot))])
	}
}

func (d *driver) fail(format string, args ...any) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.failed++
	if len(d.failures) < 20 {
		d.failures = append(d.failures, time.Now().Format("15:04:05.000 ")+fmt.Sprintf(format, args...))
	}
}

func (d *driver) get(r *rand.Rand, key string) {
	ks := d.key(key)
	n, addr := d.c.pick(r)
	if n == nil {
		return
	}
	defer n.inflight.Done()
	// During a cut each side is told only of its own writes (docs/design.md, "Writes under
	// churn": the one exception), so a node is held to the writes made through its side.
	d.mu.Lock()
	floor, silent, silentAt := max(ks.strong, ks.side[d.c.side(n)]), ks.silent, ks.at
	d.mu.Unlock()
	start := time.Now()
	code, body, src, err := do(addr, "GET", "/v1/groups/g/keys/"+key, "", d.deadline)
	el := time.Since(start)
	d.mu.Lock()
	d.lat = append(d.lat, el)
	d.mu.Unlock()
	if err != nil || code != 200 {
		d.fail("GET %s on %s: %d %v %q", key, n.name, code, err, strings.TrimSpace(body))
		return
	}
	gen, ok := genOf(key, body)
	if !ok {
		d.fail("GET %s on %s: bad value %q", key, n.name, body)
		return
	}
	if gen < floor {
		d.staleAnswer("GET %s on %s (%s) = gen %d, after a write of gen %d had returned", key, n.name, src, gen, floor)
	}
	if d.ttlBound > 0 && gen < silent && start.Sub(silentAt) > d.ttlBound {
		d.staleAnswer("GET %s on %s (%s) = gen %d, %v after the origin moved to %d (bound %v)",
			key, n.name, src, gen, start.Sub(silentAt).Round(time.Millisecond), silent, d.ttlBound)
	}
}

func (d *driver) staleAnswer(format string, args ...any) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.stale) < 20 {
		d.stale = append(d.stale, time.Now().Format("15:04:05.000 ")+fmt.Sprintf(format, args...))
	} else {
		d.stale = append(d.stale[:20], "…")
	}
}

func genOf(key, body string) (int, bool) {
	k, g, ok := strings.Cut(body, "@")
	if !ok || k != key {
		return 0, false
	}
	gen, err := strconv.Atoi(g)
	return gen, err == nil
}

// write bumps key's generation at the origin and writes it through corral: a PUT of the new
// value or a DELETE (after which the next fill reads the new generation). Writes of one key
// are serialised, so its generations only grow.
func (d *driver) write(r *rand.Rand, key string) {
	ks := d.key(key)
	if !ks.busy.TryLock() {
		return
	}
	defer ks.busy.Unlock()
	gen, err := d.c.bump(key)
	if err != nil {
		d.fail("bump %s: %v", key, err)
		return
	}
	n, addr := d.c.pick(r)
	if n == nil {
		return
	}
	defer n.inflight.Done()
	method, body := "DELETE", ""
	if r.IntN(2) == 0 {
		method, body = "PUT", fmt.Sprintf("%s@%d", key, gen)
	}
	start := time.Now()
	code, resp, _, err := do(addr, method, "/v1/groups/g/keys/"+key, body, d.deadline)
	el := time.Since(start)
	d.mu.Lock()
	defer d.mu.Unlock()
	d.writeLat = append(d.writeLat, el)
	switch {
	case err == nil && code == 204 && d.c.cutActive():
		ks.side[d.c.side(n)] = max(ks.side[d.c.side(n)], gen)
		ks.weak = max(ks.weak, gen)
	case err == nil && code == 204:
		ks.strong = max(ks.strong, gen)
	case err == nil && code == 202:
		ks.weak = max(ks.weak, gen)
		d.unreached++
		if d.unreached <= 3 {
			d.notes = append(d.notes, fmt.Sprintf("%s %s on %s: 202 %s", method, key, n.name, strings.TrimSpace(resp)))
		}
	default:
		d.failed++
		if len(d.failures) < 20 {
			d.failures = append(d.failures, fmt.Sprintf("%s %s on %s: %d %v %q", method, key, n.name, code, err, strings.TrimSpace(resp)))
		}
		// It may have been applied: a later GET may return gen, or older; neither is wrong.
	}
}

// silentBump moves key's generation at the origin without telling corral: answers older than
// it must stop within the TTL bound.
func (d *driver) silentBump(key string) error {
	ks := d.key(key)
	ks.busy.Lock()
	defer ks.busy.Unlock()
	gen, err := d.c.bump(key)
	if err != nil {
		return err
	}
	d.mu.Lock()
	ks.silent, ks.at = gen, time.Now()
	d.mu.Unlock()
	return nil
}

// strengthen makes the writes settle checked — weak, key to generation, from weakKeys — and
// every write of a cut count as returned: called once the cluster has healed and every
// member has learnt of them. A write answered 202 after weak was taken stays weak.
func (d *driver) strengthen(weak map[string]int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for k, ks := range d.keys {
		ks.strong = max(ks.strong, weak[k], ks.side[0], ks.side[1])
		ks.side = [2]int{}
	}
	d.c.mu.Lock()
	d.c.cut = nil
	d.c.mu.Unlock()
}

// weakKeys returns the keys with a write answered 202 newer than any answered 204, with it.
func (d *driver) weakKeys() map[string]int {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := map[string]int{}
	for k, ks := range d.keys {
		if ks.weak > ks.strong {
			out[k] = ks.weak
		}
	}
	return out
}

// stats are the latencies and failures since the last reset.
type stats struct {
	requests, failed, unreached int
	p50, p99, max, writeMax     time.Duration
	failures, stale, notes      []string
}

func (d *driver) take() stats {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := stats{requests: len(d.lat), failed: d.failed, unreached: d.unreached,
		failures: d.failures, stale: d.stale, notes: d.notes}
	slices.Sort(d.lat)
	if n := len(d.lat); n > 0 {
		s.p50, s.p99, s.max = d.lat[n/2], d.lat[min(n-1, n*99/100)], d.lat[n-1]
	}
	if len(d.writeLat) > 0 {
		s.writeMax = slices.Max(d.writeLat)
	}
	d.lat, d.writeLat, d.failed, d.unreached, d.failures, d.stale, d.notes = nil, nil, 0, 0, nil, nil, nil
	return s
}
