package group

import "github.com/corralcache/corral/fill"

// Stats are one group's counters on one node, by the part that counts them: package corral
// sums them into its GroupStats. Each is monotonic but Local's Entries and Bytes.
type Stats struct {
	Local fill.Stats // the store of the keys this node owns
	Near  fill.Stats // the near cache: owner requests and near copies
	// RemoteGets are Gets routed to another member (near hits included), NearHits those a
	// near copy answered, Loads the runs of the application's loader, and PeerGets the Gets
	// this node served for peers.
	RemoteGets, NearHits, Loads, PeerGets uint64
	// Leases granted (tokens handed out), lapsed without a FillSet, and FillSets rejected for
	// a token no longer live, on this node as the keys' owner.
	LeasesGranted, LeasesLapsed, LeasesRejected uint64
	// BatchesSent are the batched requests this node sent to owners (GetMany), and
	// BatchKeysSent their keys; the store's BatchLoads and BatchKeys count its batch
	// loader's calls and their keys.
	BatchesSent, BatchKeysSent uint64
	// BackupEntries are the backups this node keeps for other owners now; BackupsSent the
	// entries it gave its keys' backups; BackupsTaken the backups it took as its own value
	// on coming to own their keys.
	BackupEntries             int
	BackupsSent, BackupsTaken uint64
}

// Stats returns this group's counters on this node.
func (g *Group[V]) Stats() Stats {
	granted, lapsed, rejected := g.leases.Stats()
	var backups int
	if g.backup != nil {
		backups = g.backup.Stats().Entries
	}
	return Stats{
		Local: g.local.Stats(), Near: g.near.Stats(),
		RemoteGets: g.remoteGets.Load(), NearHits: g.nearHits.Load(), Loads: g.loads.Load(), PeerGets: g.peerGets.Load(),
		LeasesGranted: granted, LeasesLapsed: lapsed, LeasesRejected: rejected,
		BatchesSent: g.batchesSent.Load(), BatchKeysSent: g.batchKeysSent.Load(),
		BackupEntries: backups, BackupsSent: g.backupsSent.Load(), BackupsTaken: g.promoted.Load(),
	}
}
