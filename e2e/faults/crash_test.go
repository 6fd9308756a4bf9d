package faults

import (
	"bufio"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

// ownedBy returns the keys of ks that via routes to owner.
func ownedBy(c *cluster, via, owner *node, ks []string) []string {
	c.t.Helper()
	var out []string
	for _, k := range ks {
		v, err := viewOf(c.addrOf(via), k)
		if err != nil {
			c.t.Fatalf("owner of %s: %v", k, err)
		}
		if v.Owner == owner.name {
			out = append(out, k)
		}
	}
	return out
}

// mostOwning returns the node of nodes that owns the most of ks, as via routes them, with the
// keys it owns.
func mostOwning(c *cluster, via *node, nodes []*node, ks []string) (*node, []string) {
	c.t.Helper()
	byName := map[string][]string{}
	for _, k := range ks {
		v, err := viewOf(c.addrOf(via), k)
		if err != nil {
			c.t.Fatalf("owner of %s: %v", k, err)
		}
		byName[v.Owner] = append(byName[v.Owner], k)
	}
	var best *node
	for _, n := range nodes {
		if best == nil || len(byName[n.name]) > len(byName[best.name]) {
			best = n
		}
	}
	return best, byName[best.name]
}

// crashRefills is what a crash cost the hot keys: the origin calls of each since the crash.
type crashRefills struct {
	owned, total, ownOnes, most int
	byName                      map[string]int // the calls by the node that made them
	others                      []string       // other members' keys refilled, with who filled them when
	twice                       []string       // keys filled more than once, with who filled them when
}

// refillsSince counts the origin calls of the hot keys since oc0, owned being the crashed
// member's; every hot key was held before (warm).
func refillsSince(c *cluster, oc0 originCounts, hot, owned []string, killed time.Time) crashRefills {
	oc := c.counts(true)
	mine := map[string]bool{}
	for _, k := range owned {
		mine[k] = true
	}
	r := crashRefills{owned: len(owned), byName: map[string]int{}}
	for _, k := range hot {
		e := oc.Calls[k] - oc0.Calls[k]
		if e == 0 {
			continue
		}
		r.total += e
		r.most = max(r.most, e)
		// Who filled it, when: the calls since oc0 (the origin keeps the first 8 of a key).
		var fills []string
		for i := oc0.Calls[k]; i < len(oc.From[k]); i++ {
			name := c.nameAt(oc.From[k][i])
			r.byName[name]++
			fills = append(fills, fmt.Sprintf("%s %v", name, oc.Times[k][i].Sub(killed).Round(time.Millisecond)))
		}
		how := fmt.Sprintf("%s (filled by %s after the kill)", k, strings.Join(fills, ", "))
		if mine[k] {
			r.ownOnes += e
		} else {
			r.others = append(r.others, how)
		}
		if e > 1 {
			r.twice = append(r.twice, how)
		}
	}
	return r
}

func (r crashRefills) note(backups, perKey int) string {
	want := "≤ 1 each"
	if perKey > 1 {
		want = fmt.Sprintf("≤ 1 each, %d allowed: an open flaw", perKey)
	}
	if backups > 0 {
		want = "0"
	}
	s := fmt.Sprintf("refilled %d (want %s), most of one key %d; other members' keys refilled %d", r.ownOnes, want, r.most, len(r.others))
	if len(r.twice) > 0 {
		s += "; filled twice: " + strings.Join(r.twice[:min(3, len(r.twice))], "; ")
	}
	return s
}

// check holds the crash to its contract: at most perKey refills per key the crashed member
// owned (1, but see restartInPlace), none with backups, and none of the keys other members own.
func (r crashRefills) check(t *testing.T, backups, perKey int) {
	t.Helper()
	if len(r.others) > 0 {
		t.Errorf("the crash refilled %d hot keys other members owned, want 0: %s", len(r.others), strings.Join(r.others[:min(5, len(r.others))], "; "))
	}
	if r.most > perKey {
		t.Errorf("a hot key was filled %d times after the crash, want ≤ %d: %s", r.most, perKey, strings.Join(r.twice[:min(5, len(r.twice))], "; "))
	}
	if backups > 0 && r.total > 0 {
		t.Errorf("the crash of the owner of %d hot keys cost %d fills with --backups %d, want 0", r.owned, r.total, backups)
	}
}

// metricSum sums a counter or gauge over nodes' /metrics, of the series whose labels contain
// match.
func metricSum(c *cluster, nodes []*node, name, match string) float64 {
	var sum float64
	scrape(c, nodes, func(series string, v float64) {
		if strings.HasPrefix(series, name+"{") && strings.Contains(series, match) {
			sum += v
		}
	})
	return sum
}

// metricMax is the largest value over nodes' /metrics of the unlabeled series name.
func metricMax(c *cluster, nodes []*node, name string) float64 {
	var most float64
	scrape(c, nodes, func(series string, v float64) {
		if series == name {
			most = max(most, v)
		}
	})
	return most
}

// scrape calls each with every series and value of each of nodes' /metrics (a node that does
// not answer has none).
func scrape(c *cluster, nodes []*node, each func(series string, v float64)) {
	for _, n := range nodes {
		resp, err := client.Get("http://" + c.addrOf(n) + "/metrics")
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			if f := strings.Fields(sc.Text()); len(f) == 2 && !strings.HasPrefix(f[0], "#") {
				v, _ := strconv.ParseFloat(f[1], 64)
				each(f[0], v)
			}
		}
		resp.Body.Close()
	}
}

// TestOwnerCrash SIGKILLs (docker kill) the member that owns the most of 1000 warm hot keys,
// under load, and reads every hot key through the survivors at once — before they have
// dropped it — and again after. Without backups it costs at most one refill per key it owned
// and none of the others' keys; with --backups 1 none at all: its successors hold its entries
// and serve them (corral_backups_taken_total).
func TestOwnerCrash(t *testing.T) {
	for _, backups := range []int{0, 1} {
		t.Run(fmt.Sprintf("backups=%d", backups), func(t *testing.T) { ownerCrash(t, backups) })
	}
}

func ownerCrash(t *testing.T, backups int) {
	c := newCluster(t, fmt.Sprintf("kill%d", backups), "--ttl", "10m", "--backups", strconv.Itoa(backups))
	nodes := c.start("n", 5)
	hot := keys("h", 1000)
	c.warm(hot)
	d := newDriver(c, hot, keys("w", 10))
	d.start()
	defer d.halt()
	victim, owned := mostOwning(c, nodes[0], nodes, hot)
	rest := others(nodes, victim)
	d.take()
	c.setUp(victim, false)
	oc0 := c.counts()
	docker(t, "kill", victim.ctr)
	killed := time.Now()
	c.drop(victim)
	c.warm(hot) // through the survivors, before they have dropped it
	first := time.Since(killed)
	conv := c.converge("the survivors drop the owner", rest, 60*time.Second)
	c.warm(hot) // and after
	rf := refillsSince(c, oc0, hot, owned, killed)
	scenario, ideal := "an owner of many hot keys SIGKILLed (docker kill), 1000 hot keys", fmt.Sprintf("≤ %d (1 per hot key it owned)", len(owned))
	if backups > 0 {
		scenario += fmt.Sprintf(", --backups %d", backups)
		ideal = "0"
	}
	note := fmt.Sprintf("it owned %d; %s; every hot key read through the survivors at once after the kill (done %v after it), and again once they had dropped it",
		len(owned), rf.note(backups, 1), first.Round(100*time.Millisecond))
	if backups > 0 {
		note += fmt.Sprintf("; backups taken %.0f", metricSum(c, rest, "corral_backups_taken_total", `group="g"`))
	}
	finish(t, d, row{scenario: scenario, calls: rf.total, ideal: ideal, converge: conv, note: note})
	rf.check(t, backups, 1)
}

// TestRestartInPlace SIGKILLs (docker kill) the member that owns the most of 1000 warm hot
// keys and starts its container again at once (docker start: the same name and address, a new
// process with an empty cache) — what the kubelet does with a crashed container in its pod —
// under load, then reads every hot key through every node. A crash costs at most one refill
// per key the member owned, its return none; with --backups 1 nothing.
func TestRestartInPlace(t *testing.T) {
	for _, backups := range []int{0, 1} {
		t.Run(fmt.Sprintf("backups=%d", backups), func(t *testing.T) { restartInPlace(t, backups) })
	}
}

func restartInPlace(t *testing.T, backups int) {
	c := newCluster(t, fmt.Sprintf("inplace%d", backups), "--ttl", "10m", "--backups", strconv.Itoa(backups))
	nodes := c.start("n", 5)
	hot := keys("h", 1000)
	c.warm(hot)
	d := newDriver(c, hot, keys("w", 10))
	d.start()
	defer d.halt()
	victim, owned := mostOwning(c, nodes[0], nodes, hot)
	d.take()
	c.setUp(victim, false)
	oc0 := c.counts()
	docker(t, "kill", victim.ctr)
	killed := time.Now()
	docker(t, "start", victim.ctr)
	started := time.Since(killed)
	conv := c.converge("views agree after the restart in place", nodes, 90*time.Second)
	c.setUp(victim, true)
	time.Sleep(2 * time.Second) // the load's reads, on every node
	c.warm(hot)                 // every hot key once, through every node in turn
	rf := refillsSince(c, oc0, hot, owned, killed)
	scenario, ideal := "an owner of many hot keys SIGKILLed and restarted in place (docker kill, docker start), 1000 hot keys", fmt.Sprintf("≤ %d (1 per hot key it owned; a few twice, see the notes above)", len(owned))
	if backups > 0 {
		scenario += fmt.Sprintf(", --backups %d", backups)
		ideal = "0"
	}
	// What the new life (its counters start at 0) took from the others at its first misses:
	// warm pulls from its successors, which hold what they filled for it while it was down,
	// and with backups every entry it had.
	pulled := metricSum(c, []*node{victim}, "corral_handoff_keys_total", `direction="received"`)
	// Without backups a key may cost two fills here, an open flaw (docs/design.md, "A restart
	// in place"): for a moment the new life and the key's successor both act as its owner, and
	// each loads it when the other holds nothing yet — their warm pulls asking each other at
	// once, or the successor failing over for members that cannot reach the new life yet.
	// This suite measured 1 such key of 243 in 2 runs of 7. With backups, none.
	perKey := 1
	if backups == 0 {
		perKey = 2
	}
	note := fmt.Sprintf("it owned %d; %s; filled by the restarted node %d, by the others %d; the restarted node took %.0f entries from the others (warm pulls); started again %v after the kill",
		len(owned), rf.note(backups, perKey), rf.byName[victim.name], rf.total-rf.byName[victim.name], pulled, started.Round(100*time.Millisecond))
	finish(t, d, row{scenario: scenario, calls: rf.total, ideal: ideal, converge: conv, note: note})
	rf.check(t, backups, perKey)
}
