package corral

import "github.com/corralcache/corral/internal/group"

// GroupStats are one group's counters on one node, each monotonic but Entries and Bytes.
type GroupStats struct {
	Gets        uint64 // Get calls on this node
	Fills       uint64 // loader runs on this node
	Coalesced   uint64 // Gets answered by a fill or owner request already in flight
	FillErrors  uint64 // loader runs that failed or panicked
	StaleServed uint64 // reads answered with a stale value
	Refreshes   uint64 // background refreshes started
	NearHits    uint64 // Gets answered by a near copy
	PeerGets    uint64 // Get requests this node served for peers
	Entries     int    // entries held as owner now
	Bytes       uint64 // their weight

	// Leases (see Group.Lease), counted on the key's owner.
	LeasesGranted uint64 // tokens handed out (FILL, and STALE with a token)
	LeasesLapsed  uint64 // leases that lapsed without a FillSet
	LeaseRejected uint64 // FillSets refused: the token was no longer live

	// Tags (see RemoveByTag).
	Purged uint64 // values dropped because a tag of theirs was purged after they were made

	// Batches (see GetMany).
	BatchRequests    uint64 // batched requests this node sent to keys' owners
	BatchRequestKeys uint64 // their keys
	BatchLoads       uint64 // calls of the group's batch loader on this node
	BatchLoadKeys    uint64 // their keys

	// Backups (see WithBackups).
	BackupEntries int    // copies this node keeps now as a backup of other owners' keys
	BackupsSent   uint64 // entries this node gave its keys' backups
	BackupsTaken  uint64 // backups this node took as its own value on coming to own their keys
}

// statsOf sums a group's counters by part into its GroupStats.
func statsOf(s group.Stats) GroupStats {
	return GroupStats{
		// Each is a monotonic count, and so is their sum: peer requests are not counted in
		// the store's Gets (the owner's side uses Lookup, which counts no Get), so nothing is
		// subtracted.
		Gets:        s.Local.Gets + s.RemoteGets,
		Fills:       s.Loads,
		Coalesced:   s.Local.Coalesced + s.Near.Coalesced,
		FillErrors:  s.Local.FillErrors,
		StaleServed: s.Local.StaleServed,
		Refreshes:   s.Local.Refreshes,
		NearHits:    s.NearHits,
		PeerGets:    s.PeerGets,
		Entries:     s.Local.Entries,
		Bytes:       s.Local.Bytes,

		LeasesGranted: s.LeasesGranted,
		LeasesLapsed:  s.LeasesLapsed,
		LeaseRejected: s.LeasesRejected,

		Purged: s.Local.Purged + s.Near.Purged,

		BatchRequests:    s.BatchesSent,
		BatchRequestKeys: s.BatchKeysSent,
		BatchLoads:       s.Local.BatchLoads,
		BatchLoadKeys:    s.Local.BatchKeys,

		BackupEntries: s.BackupEntries,
		BackupsSent:   s.BackupsSent,
		BackupsTaken:  s.BackupsTaken,
	}
}
