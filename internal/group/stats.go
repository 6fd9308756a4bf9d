package group

import "github.com/corralcache/corral/internal/node"

// Stats returns this group's counters on this node.
func (g *Group[V]) Stats() node.GroupStats {
	l, nr := g.local.Stats(), g.near.Stats()
	granted, lapsed, rejected := g.leases.Stats()
	return node.GroupStats{
		// Each is a monotonic count, and so is their sum: peer requests are not counted in
		// local's Gets (ServeGet uses Lookup), so nothing is subtracted.
		Gets:        l.Gets + g.remoteGets.Load(),
		Fills:       g.loads.Load(),
		Coalesced:   l.Coalesced + nr.Coalesced,
		FillErrors:  l.FillErrors,
		StaleServed: l.StaleServed,
		Refreshes:   l.Refreshes,
		NearHits:    g.nearHits.Load(),
		PeerGets:    g.peerGets.Load(),
		Entries:     l.Entries,
		Bytes:       l.Bytes,

		LeasesGranted: granted,
		LeasesLapsed:  lapsed,
		LeaseRejected: rejected,

		Purged: l.Purged + nr.Purged,
	}
}
