package faults

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// settle checks, after a heal, that every write answered 202 during it reaches every node
// within bound (each node answers its generation or a newer one), then counts those writes
// as returned from then on; it returns how long that took. A write answered 202 while it
// checks is not counted: it was not checked (it used to be, and a 202 written in the
// moments after a heal then failed the reads of the node it named).
func settle(t *testing.T, c *cluster, d *driver, bound time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	weak := d.weakKeys()
	c.waitFor("every node to know the writes made during the fault", bound, func() bool {
		for k, gen := range weak {
			for _, n := range c.live() {
				code, body, _, err := do(c.addrOf(n), "GET", "/v1/groups/g/keys/"+k, "", 5*time.Second)
				if g, ok := genOf(k, body); err != nil || code != 200 || !ok || g < gen {
					return false
				}
			}
		}
		return true
	})
	d.strengthen(weak)
	return time.Since(start)
}

// refills returns the hot keys' origin calls past one each, and the most of one key.
func refills(c *cluster, hot []string) (total, most int) {
	oc := c.counts()
	for _, k := range hot {
		extra := max(oc.Calls[k]-1, 0)
		total += extra
		most = max(most, extra)
	}
	return total, most
}

// TestPartition cuts one node off the cluster network for 15 s (docker network disconnect;
// it stays on the origin-only network, so it can still fill), first a node that does not own
// the watched key, then its owner, and heals. Both sides serve every GET; a hot key costs at
// most one extra fill per side; views merge; after the heal no node serves a value older
// than a write made during the cut. On each side, every 250 ms, a GET of the watched key and
// one of a key nobody has read yet (with --fill-timeout 5s, as issue 33 measured it): none
// fails, and their p99 is within twice the silent-peer timeout and a fill — each silent-peer
// wait stretched by twice the timer lateness the nodes report, as the README promises for a
// node that runs late (none on an idle machine: corral_timer_lateness_seconds is 0 under
// 10 ms).
func TestPartition(t *testing.T) {
	c := newCluster(t, "part", "--ttl", "10m", "--fill-timeout", "5s")
	nodes := c.start("n", 5)
	hot := keys("h", 100)
	c.warm(hot)
	// A fill takes fill at the origin; a GET of a key whose owner is across the cut waits on
	// a silent member once (the owner it asks, or, cut off, the probe of all of them) and on
	// an acting owner that finds the owner silent too, each within the silent-peer timeout.
	const fill = 100 * time.Millisecond
	if err := c.originPost("/delay?d=" + fill.String()); err != nil {
		t.Fatal(err)
	}
	silent := silentPeerTimeout(t)
	d := newDriver(c, hot, keys("w", 10))
	d.start()
	defer d.halt()
	d.take()
	watched := hot[0]
	owner := c.owner(nodes[0], watched)
	for _, tc := range []struct {
		name   string
		victim *node
	}{
		{"non-owner", others(nodes, owner)[0]},
		{"owner", owner},
	} {
		before := c.counts()
		c.partition(tc.victim)
		cut := time.Now()
		sides := []*rounds{
			startRounds(d, tc.name+"-isolated", []*node{tc.victim}, watched),
			startRounds(d, tc.name+"-majority", others(nodes, tc.victim), watched),
		}
		time.Sleep(15 * time.Second) // the fault's length is the subject; the load runs meanwhile
		// The largest delay of each node's timers over the last 15 to 30 s: the cut's.
		late := time.Duration(metricMax(c, nodes, "corral_timer_lateness_seconds") * float64(time.Second))
		bound := 2*(silent+2*late) + fill
		t.Logf("%s's partition: the nodes' timers ran up to %v late; the GETs' p99 bound %v", tc.name, late, bound)
		var reads []string
		for _, r := range sides {
			s := r.halt()
			side := strings.TrimPrefix(r.name, tc.name+"-")
			reads = append(reads, fmt.Sprintf("%s side %d GETs, p99 %v, max %v", side, s.reads, s.p99.Round(time.Millisecond), s.max.Round(time.Millisecond)))
			t.Logf("%s's partition, %s side: %d GETs of %s and new keys, %d failed, p99 %v, max %v", tc.name, side, s.reads, watched, s.failed, s.p99, s.max)
			for _, note := range s.notes {
				t.Logf("  %s", note)
			}
			if s.failed > 0 {
				t.Errorf("%s's partition: %d of the %s side's GETs failed", tc.name, s.failed, side)
			}
			if s.p99 > bound {
				t.Errorf("%s's partition: the %s side's GETs of %s and new keys took %v at p99, past %v (twice the silent-peer timeout %v, each stretched by twice the nodes' lateness %v, and a fill)", tc.name, side, watched, s.p99, bound, silent, late)
			}
		}
		c.heal(tc.victim)
		healed := time.Now()
		conv := c.converge("views merge after the heal", nodes, 90*time.Second)
		st := settle(t, c, d, 60*time.Second)
		time.Sleep(3 * time.Second) // reads after the heal, checked against every write
		after := c.counts()
		extra, most := 0, 0
		for _, k := range hot {
			e := after.Calls[k] - before.Calls[k]
			extra += e
			most = max(most, e)
		}
		finish(t, d, row{scenario: fmt.Sprintf("partition of the %s of %s for 15 s, then heal", tc.name, watched),
			calls: extra, ideal: fmt.Sprintf("≤ %d (≤ 1 per key per side)", 2*len(hot)), converge: conv,
			note: fmt.Sprintf("cut %v; most fills of one key %d; writes of the cut seen everywhere %v after the views merged; every 250 ms a GET of %s and of a new key: %s (bound %v)",
				healed.Sub(cut).Round(100*time.Millisecond), most, st.Round(100*time.Millisecond), watched, strings.Join(reads, "; "), bound)})
		if most > 2 {
			t.Errorf("a hot key was filled %d times during the %s's partition, want ≤ 2 (one per side)", most, tc.name)
		}
	}
}

// TestRollingRestart stops and starts every node in turn (docker stop: SIGTERM, a graceful
// leave; docker start: the same name and address, a new process) under load with 1000 hot
// keys: at most 1% are filled again, no request fails.
func TestRollingRestart(t *testing.T) {
	c := newCluster(t, "roll", "--ttl", "10m", "--drain", "1s")
	nodes := c.start("n", 5)
	hot := keys("h", 1000)
	c.warm(hot)
	d := newDriver(c, hot, keys("w", 10))
	d.start()
	defer d.halt()
	d.take()
	var conv time.Duration
	for _, n := range nodes {
		c.setUp(n, false)
		start := time.Now()
		docker(t, "stop", "-t", "20", n.ctr)
		docker(t, "start", n.ctr)
		c.converge("views agree after restarting "+n.name, nodes, 90*time.Second)
		conv = max(conv, time.Since(start))
		c.setUp(n, true)
	}
	time.Sleep(2 * time.Second) // reads after the last restart
	total, most := refills(c, hot)
	finish(t, d, row{scenario: "rolling restart of 5 nodes (docker stop/start), 1000 hot keys", calls: total, ideal: "≤ 10 refills (1%)",
		converge: conv, note: fmt.Sprintf("refills, not calls; most of one key %d; converge = the slowest stop, start and views agreeing", most)})
	if total > len(hot)/100 {
		t.Errorf("%d hot keys refilled, want ≤ %d", total, len(hot)/100)
	}
}

// TestScaleUp grows 3 nodes to 6 at once, shrinks back to 3 (graceful leaves) and grows to 6
// again one node at a time, under load with 1000 hot keys: at most 1% refilled each time.
// Then a node is killed and started again under its name at a new address: it rejoins.
func TestScaleUp(t *testing.T) {
	c := newCluster(t, "scale", "--ttl", "10m", "--drain", "1s")
	first := c.start("n", 3)
	hot := keys("h", 1000)
	c.warm(hot)
	d := newDriver(c, hot, keys("w", 10))
	d.start()
	defer d.halt()
	d.take()

	before, _ := refills(c, hot)
	var added []*node
	start := time.Now()
	for i := range 3 {
		added = append(added, c.add(fmt.Sprintf("a%d", i)))
	}
	c.converge("views agree on 6", c.live(), 90*time.Second)
	conv := time.Since(start)
	for _, n := range added {
		c.setUp(n, true)
	}
	time.Sleep(3 * time.Second) // reads on the grown cluster
	total, _ := refills(c, hot)
	finish(t, d, row{scenario: "scale-up 3 → 6 at once, 1000 hot keys", calls: total - before, ideal: "≤ 10 refills (1%)", converge: conv,
		note: "converge from the first docker run"})
	if total-before > len(hot)/100 {
		t.Errorf("scale-up at once refilled %d, want ≤ %d", total-before, len(hot)/100)
	}

	for _, n := range added {
		c.setUp(n, false)
		docker(t, "stop", "-t", "20", n.ctr)
		c.drop(n)
	}
	c.converge("views agree on 3", c.live(), 90*time.Second)
	d.take()
	before, _ = refills(c, hot)
	conv = 0
	for i := range 3 {
		start := time.Now()
		n := c.add(fmt.Sprintf("b%d", i))
		c.converge("views agree after adding "+n.name, c.live(), 90*time.Second)
		conv = max(conv, time.Since(start))
		c.setUp(n, true)
	}
	time.Sleep(3 * time.Second)
	total, _ = refills(c, hot)
	finish(t, d, row{scenario: "scale-up 3 → 6 one by one (after shrinking back to 3), 1000 hot keys", calls: total - before, ideal: "≤ 10 refills (1%)",
		converge: conv, note: "converge = the slowest docker run and views agreeing"})
	if total-before > len(hot)/100 {
		t.Errorf("scale-up one by one refilled %d, want ≤ %d", total-before, len(hot)/100)
	}

	// Killed, then back under its name at a new address, three joins after the first warm-up.
	rejoinAtNewAddress(t, c, d, hot, first[0], first[1], 0)
}

// TestRejoinAtNewAddressBackups is TestScaleUp's last scenario with --backups 1: 3 nodes
// warmed, 3 more joining one by one, then a node killed and started under its name at a new
// address. The crash costs no hot key a fill, before it comes back or after.
func TestRejoinAtNewAddressBackups(t *testing.T) {
	c := newCluster(t, "rejoin", "--ttl", "10m", "--drain", "1s", "--backups", "1")
	first := c.start("n", 3)
	hot := keys("h", 1000)
	c.warm(hot)
	d := newDriver(c, hot, keys("w", 10))
	d.start()
	defer d.halt()
	for i := range 3 {
		n := c.add(fmt.Sprintf("b%d", i))
		c.converge("views agree after adding "+n.name, c.live(), 90*time.Second)
		c.setUp(n, true)
	}
	time.Sleep(3 * time.Second) // reads on the grown cluster, as TestScaleUp's
	d.take()
	rejoinAtNewAddress(t, c, d, hot, first[0], first[1], 1)
}

// rejoinAtNewAddress kills victim (docker rm -f), waits until the others have dropped it,
// starts it again under its name at a new address, asks for 20 new keys it owns, and records
// the row; via is a node that stays. A crash refills only the hot keys the victim owned, at
// most once each — with backups none — and its return none; each new key costs one call.
func rejoinAtNewAddress(t *testing.T, c *cluster, d *driver, hot []string, via, victim *node, backups int) {
	t.Helper()
	ownerBefore := map[string]string{} // of each hot key
	owns := 0
	for _, k := range hot {
		if v, err := viewOf(c.addrOf(via), k); err == nil {
			ownerBefore[k] = v.Owner
			if v.Owner == victim.name {
				owns++
			}
		}
	}
	oc0 := c.counts()
	c.setUp(victim, false)
	docker(t, "rm", "-f", victim.ctr)
	killed := time.Now()
	c.converge("the survivors drop the killed node", others(c.live(), victim), 90*time.Second)
	time.Sleep(2 * time.Second) // reads of its keys on the survivors
	ocCrash := c.counts(true)
	var crashOwned int
	var crashOther []string // hot keys of other members refilled before it came back: how
	for _, k := range hot {
		e := ocCrash.Calls[k] - oc0.Calls[k]
		switch {
		case e == 0:
		case ownerBefore[k] == victim.name:
			crashOwned += e
		default:
			var fills []string
			for i, ip := range ocCrash.From[k] {
				fills = append(fills, fmt.Sprintf("%s %v", c.nameAt(ip), ocCrash.Times[k][i].Sub(killed).Round(time.Millisecond)))
			}
			crashOther = append(crashOther, fmt.Sprintf("%s (owner %s; filled by %s after the kill)", k, ownerBefore[k], strings.Join(fills, ", ")))
		}
	}
	c.nextIP++
	victim.ip = fmt.Sprintf("%s%d", c.prefix, c.nextIP)
	victim.addr = fmt.Sprintf("%s%d:8080", c.oprefix, c.nextIP)
	c.run(victim)
	c.converge("views agree on the new address", c.live(), 90*time.Second)
	conv := time.Since(killed)
	c.setUp(victim, true)
	// The new life owns keys again and is asked for them at once.
	var mine []string
	for i := 0; len(mine) < 20 && i < 5000; i++ {
		if k := fmt.Sprintf("r-%d", i); c.owner(via, k) == victim {
			mine = append(mine, k)
		}
	}
	var slowest time.Duration
	for _, k := range mine {
		lat := burst(d, others(c.live(), victim), k, 2, 5*time.Second)
		for _, l := range lat {
			slowest = max(slowest, l)
		}
	}
	oc := c.counts()
	owned := 0
	for _, k := range mine {
		owned += oc.Calls[k]
	}
	after := c.counts()
	total, most := 0, 0
	for _, k := range hot {
		e := after.Calls[k] - oc0.Calls[k]
		total += e
		most = max(most, e)
	}
	scenario := "a node killed and started under its name at a new address"
	want := "≤ 1 per key"
	if backups > 0 {
		scenario += fmt.Sprintf(", --backups %d", backups)
		want = "0"
	}
	finish(t, d, row{scenario: scenario, calls: owned, ideal: fmt.Sprintf("%d (1 per new key it owns)", len(mine)),
		converge: conv, note: fmt.Sprintf("converge from the kill (memberlist holds a dead name on its old address for DeadNodeReclaimTime, 30 s); hot keys refilled %d (want %s), most of one key %d; before it came back: %d refills of the %d hot keys it owned, %d of other members' keys (a crash refills only its own); slowest GET of its new keys %v",
			total, want, most, crashOwned, owns, len(crashOther), slowest.Round(time.Millisecond))})
	// A crash costs at most one refill per key it owned, none with backups, and none of the
	// keys other members own: those that moved away from it at the joins before were given to
	// their new owners at once, not left on it until their first read (docs/design.md).
	if len(crashOther) > 0 {
		t.Errorf("the crash refilled %d hot keys other members owned, want 0: %s", len(crashOther), strings.Join(crashOther[:min(5, len(crashOther))], "; "))
	}
	if backups > 0 && total > 0 {
		t.Errorf("the crash and the return of a node at a new address cost %d fills of hot keys with --backups %d, want 0", total, backups)
	}
	// docs/design.md promises one refill per key for a crash and none for a join. The new life used
	// to fill again keys the crash had already cost one fill: the survivors refused it as a
	// non-member until memberlist admitted its new address (DeadNodeReclaimTime), and it
	// filled what it was asked for (see peer's claimants.go).
	if most > 1 {
		t.Errorf("a hot key was filled %d times after the crash and the restart at a new address, want ≤ 1: a crash costs at most one refill per key, a join none", most)
		oc := c.counts(true)
		shown := 0
		for _, k := range hot {
			if after.Calls[k]-oc0.Calls[k] > 1 && shown < 5 {
				shown++
				var at []string
				for i, when := range oc.Times[k][1:] {
					at = append(at, fmt.Sprintf("%s %v", c.nameAt(oc.From[k][i+1]), when.Sub(killed).Round(time.Millisecond)))
				}
				v, _ := viewOf(c.addrOf(via), k)
				t.Logf("%s (owner now %s) filled again at %v after the kill (restarted node's views agreed %v after it)", k, v.Owner, at, conv.Round(time.Millisecond))
			}
		}
	}
	if owned != len(mine) {
		t.Errorf("the new keys of the restarted node cost %d origin calls, want %d", owned, len(mine))
	}
}
