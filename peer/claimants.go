package peer

import (
	"sync"
	"time"
)

// A member that crashed and comes back under its name at a new address (a pod rescheduled
// onto another IP) is kept out by every member that saw it die, until the old entry has been
// dead for DeadNodeReclaimTime (memberlist refuses a name claimed from a second address before
// then, see "Conflicting addresses" in doc.go). Its own membership, meanwhile, learnt every
// member from the join's state exchange, so it thinks it is one: it owns keys and asks the
// others for them, and those that do not know its address refuse it — so it filled every key
// it was asked for from the origin, for up to half a minute. The claimants are those members,
// remembered from the conflict memberlist reports: they passed the same checks as any member
// (gossip key, label, meta) and differ only in reusing a dead member's name, so the root
// package serves them as it serves the live set.

// claimantTTL is how long a claim is remembered after it was last heard: past the longest
// time memberlist can keep refusing the new address (DeadNodeReclaimTime after failure
// detection) and a full state exchange that then admits it.
func claimantTTL(s settings) time.Duration {
	return 2*s.DeadNodeReclaimTime + 2*s.PushPullInterval
}

// claimants are the members that claimed the name of a dead member from a new address, by
// name.
type claimants struct {
	mu sync.Mutex
	// guards m
	m map[string]claimant
}

type claimant struct {
	Member
	until time.Time
}

// maxClaimants bounds the set; past it the claim remembered longest gives way.
const maxClaimants = 64

func (c *claimants) add(m Member, until time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[string]claimant)
	}
	if _, ok := c.m[m.Name]; !ok && len(c.m) >= maxClaimants {
		var oldest string
		for name, cl := range c.m {
			if oldest == "" || cl.until.Before(c.m[oldest].until) {
				oldest = name
			}
		}
		delete(c.m, oldest)
	}
	c.m[m.Name] = claimant{Member: m, until: until}
}

// list returns the claims remembered at now, sorted by name, and forgets the expired ones.
func (c *claimants) list(now time.Time) []Member {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []Member
	for name, cl := range c.m {
		if now.After(cl.until) {
			delete(c.m, name)
			continue
		}
		out = append(out, cl.Member)
	}
	sortMembers(out)
	return out
}
