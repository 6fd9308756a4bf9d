package peer

import (
	"context"
	"math"
	"time"
)

// Leave, StartLeaving and UpdateMeta queue a message about this member (memberlist's dead or
// alive broadcast) and wait for memberlist to have sent it. memberlist sends a broadcast a
// fixed number of times — RetransmitMult × ⌈log10(n+1)⌉ for n members, 4 in a cluster of up to
// 9 — piggybacked on its gossip and probes, and only to members it holds live (or dead since
// less than GossipToTheDeadTime: they may still refute). At least one send goes out every
// GossipInterval while one such member remains, so a broadcast is done within that many
// gossip rounds. When none remains, it is never done: memberlist's wait runs to its timeout.
//
// That is what happens when every member stops at once (helm uninstall, a scale to zero): each
// one's leave reaches the others, each drops the others as left, and the last ones to queue
// their leave find nobody to send it to — after they had checked, when they queued it, that
// somebody was there. A leave with nobody left to tell is a normal end, not an error, and it
// should not cost the whole shutdown budget either. So the wait is bounded by broadcastWait,
// a few times what the sends take, and a wait that ran out is no error when no other member
// is live any more.

// broadcastSlack is how many times the gossip rounds a broadcast needs its wait may take: room
// for a busy machine, whose gossip rounds come late.
const broadcastSlack = 4

// minBroadcastWait is the least broadcastWait, for clusters that gossip very often (tests).
const minBroadcastWait = 2 * time.Second

// awaitBroadcast runs wait, a memberlist call that queues a broadcast and waits for it to have
// been sent (UpdateNode, Leave), with a timeout of broadcastWait, or less when ctx's deadline
// comes first (10s without one). It returns wait's error, unless no other member is live by
// then: nobody is left to tell, and the broadcast could never be sent.
func (m *Membership) awaitBroadcast(ctx context.Context, wait func(timeout time.Duration) error) error {
	err := wait(min(waitBudget(ctx), m.broadcastWait()))
	if err != nil && !m.othersLive() {
		m.log.Debug("no other member is live: nobody is left to tell", "member", m.s.Name, "err", err)
		return nil
	}
	return err
}

// broadcastWait is how long a broadcast may take to be sent: broadcastSlack times the gossip
// rounds of its sends, at least minBroadcastWait. With memberlist's LAN defaults and up to 9
// members that is 4 × 4 × 200ms = 3.2s.
func (m *Membership) broadcastWait() time.Duration {
	n := max(len(m.ml.Members()), 1)
	sends := m.retransmitMult * int(math.Ceil(math.Log10(float64(n+1))))
	return max(minBroadcastWait, time.Duration(broadcastSlack*sends)*m.s.GossipInterval)
}

// othersLive reports whether memberlist holds a member other than this one live (alive or
// suspect): the members a broadcast is sent to. Dead and left members are not.
func (m *Membership) othersLive() bool {
	for _, n := range m.ml.Members() {
		if n.Name != m.s.Name {
			return true
		}
	}
	return false
}
