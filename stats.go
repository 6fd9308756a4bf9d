package corral

// GroupStats are one group's counters on one node, each monotonic.
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
}
