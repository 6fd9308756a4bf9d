package faults

import (
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"
)

// TestStampede: 5 nodes, 250 concurrent GETs of a cold key spread over them run the origin
// once; when it expires (TTL 3 s, no grace), once more. The load runs alongside with writes and
// a TTL check: a value the origin replaced without a write is gone within TTL·1.1 + 1 s.
func TestStampede(t *testing.T) {
	c := newCluster(t, "stampede", "--ttl", "3s", "--swr", "0s")
	nodes := c.start("n", 5)
	hot := keys("h", 50)
	d := newDriver(c, hot, keys("w", 10))
	d.ttlBound = 3*time.Second*11/10 + time.Second
	d.start()
	defer d.halt()
	if err := c.originPost("/delay?d=300ms"); err != nil {
		t.Fatal(err)
	}
	sk := keys("s", 3)
	for _, k := range sk {
		burst(d, nodes, k, 50, 5*time.Second)
	}
	for _, k := range hot[:5] {
		if err := d.silentBump(k); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(3*time.Second*11/10 + 200*time.Millisecond) // every s-key has expired (the TTL is the subject)
	for _, k := range sk {
		burst(d, nodes, k, 50, 5*time.Second)
	}
	time.Sleep(2 * time.Second) // the load reads the silently bumped keys past their TTL bound
	calls := c.counts().calls("s-")
	finish(t, d, row{scenario: "stampede, 5 nodes: 3 cold keys, then at expiry (250 GETs each)", calls: calls, ideal: "6 (1 per key per expiry)"})
	if calls != 6 {
		t.Errorf("origin calls for the stampede keys = %d, want 6", calls)
	}
}

// TestOwnerCrashMidFill: the owner of a key is killed (docker kill) while it fills it for 200
// waiting GETs on the other nodes: every GET is answered, the origin is called twice. The 50
// hot keys of the load were warm before: the victim's cost at most one refill each, and with
// --backups 1 none (a value on its way when the owner died is held nowhere: the key being
// filled costs its second call either way).
func TestOwnerCrashMidFill(t *testing.T) {
	for _, backups := range []int{0, 1} {
		t.Run(fmt.Sprintf("backups=%d", backups), func(t *testing.T) { ownerCrashMidFill(t, backups) })
	}
}

func ownerCrashMidFill(t *testing.T, backups int) {
	c := newCluster(t, fmt.Sprintf("crash%d", backups), "--ttl", "1m", "--backups", strconv.Itoa(backups))
	nodes := c.start("n", 5)
	hot := keys("h", 50)
	c.warm(hot)
	d := newDriver(c, hot, keys("w", 10))
	d.start()
	defer d.halt()
	key := "k-crash"
	owner := c.owner(nodes[0], key)
	owned := ownedBy(c, nodes[0], owner, hot)
	rest := others(nodes, owner)
	c.setUp(owner, false)
	oc0 := c.counts()
	if err := c.originPost("/delay?d=1s"); err != nil {
		t.Fatal(err)
	}
	done := make(chan []time.Duration)
	go func() { done <- burst(d, rest, key, 50, 10*time.Second) }()
	c.waitFor("the owner's fill to start", 10*time.Second, func() bool { return c.counts().Calls[key] >= 1 })
	docker(t, "kill", owner.ctr)
	killed := time.Now()
	lat := <-done
	c.drop(owner)
	conv := c.converge("the survivors drop the owner", rest, 60*time.Second)
	c.warm(hot) // every hot key once more, after the survivors dropped it
	calls := c.counts().Calls[key]
	rf := refillsSince(c, oc0, hot, owned, killed)
	scenario, ideal := "owner crash mid-fill (docker kill), 200 waiting GETs", "2 (+1)"
	if backups > 0 {
		scenario += fmt.Sprintf(", --backups %d", backups)
	}
	s := finish(t, d, row{scenario: scenario, calls: calls, ideal: ideal, converge: conv,
		note: fmt.Sprintf("burst max %v; views agree %v after the kill; the %d hot keys it owned (of 50): %s",
			slices.Max(lat).Round(time.Millisecond), time.Since(killed).Round(100*time.Millisecond), len(owned), rf.note(backups, 1))})
	_ = s
	if calls > 2 {
		t.Errorf("origin calls = %d, want ≤ 2", calls)
	}
	rf.check(t, backups, 1)
}

// TestHungOwner: the owner of 10 warm keys is paused (docker pause). GETs of them on the other
// nodes fail over within twice SilentPeerTimeout (300 ms) plus the fill (200 ms); the origin is
// called once more per key; writes do not wait on the paused member either.
func TestHungOwner(t *testing.T) {
	c := newCluster(t, "pause", "--ttl", "1m")
	nodes := c.start("n", 5)
	d := newDriver(c, keys("h", 50), keys("w", 10))
	victim := nodes[0]
	var owned []string
	for i := 0; len(owned) < 10 && i < 1000; i++ {
		k := fmt.Sprintf("p-%d", i)
		if c.owner(nodes[1], k) == victim {
			owned = append(owned, k)
		}
	}
	// Warm them through their owner alone, so no other node holds a near copy.
	for _, k := range owned {
		if code, body, _, err := do(c.addrOf(victim), "GET", "/v1/groups/g/keys/"+k, "", 5*time.Second); err != nil || code != 200 {
			t.Fatalf("warming %s: %d %v %s", k, code, err, body)
		}
	}
	if err := c.originPost("/delay?d=200ms"); err != nil {
		t.Fatal(err)
	}
	d.start()
	defer d.halt()
	c.setUp(victim, false)
	docker(t, "pause", victim.ctr)
	paused := true
	defer func() {
		if paused {
			docker(t, "unpause", victim.ctr)
		}
	}()
	bound := 2*300*time.Millisecond + 200*time.Millisecond + 700*time.Millisecond // 700 ms for a busy 2-core machine
	rest := others(nodes, victim)
	// Writes first, while no request has found the member silent yet: each must return within the same kind of bound,
	// naming the paused member (202), rather than wait a whole call timeout.
	var writeWorst time.Duration
	for i := range 5 {
		k := fmt.Sprintf("pw-%d", i) // not the driver's keys: their writes are ordered by the driver
		gen, err := c.bump(k)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		code, body, _, err := do(c.addrOf(rest[i%len(rest)]), "PUT", "/v1/groups/g/keys/"+k, fmt.Sprintf("%s@%d", k, gen), 10*time.Second)
		writeWorst = max(writeWorst, time.Since(start))
		if err != nil || (code != 204 && code != 202) {
			d.fail("PUT %s during the pause: %d %v %s", k, code, err, body)
		}
	}
	var worst time.Duration
	for _, k := range owned {
		lat := burst(d, rest, k, 5, 5*time.Second)
		worst = max(worst, slices.Max(lat))
	}
	docker(t, "unpause", victim.ctr)
	paused = false
	conv := c.converge("views agree after the pause", nodes, 60*time.Second)
	c.setUp(victim, true)
	calls := c.counts().calls("p-")
	finish(t, d, row{scenario: "hung owner (docker pause), 10 warm keys × 20 GETs", calls: calls, ideal: "20 (+1 per key)", converge: conv,
		note: fmt.Sprintf("slowest failover GET %v (bound %v); slowest write %v", worst.Round(time.Millisecond), bound, writeWorst.Round(time.Millisecond))})
	if worst > bound {
		t.Errorf("a GET of a paused owner's key took %v, past the bound %v", worst, bound)
	}
	if writeWorst > bound {
		t.Errorf("a write during the pause took %v, past the bound %v", writeWorst, bound)
	}
	if calls > 2*len(owned) {
		t.Errorf("origin calls = %d, want ≤ %d", calls, 2*len(owned))
	}
}
