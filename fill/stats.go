package fill

import "sync/atomic"

// Stats are a Cache's counters since New. Each is monotonic.
type Stats struct {
	Gets             uint64 // Get and GetEntry calls
	Fills            uint64 // loader runs (each ended: success, error, panic or timeout)
	Coalesced        uint64 // Gets that waited on a fill already in flight
	FillErrors       uint64 // loader runs that failed, panicked or timed out (ErrNotFound is not a failure)
	StaleServed      uint64 // Gets answered with a stale value
	Refreshes        uint64 // background refreshes started (stale-while-revalidate and refresh-ahead)
	RefreshesSkipped uint64 // refreshes not started because the per-node cap was reached
	NegativeHits     uint64 // Gets answered by a remembered ErrNotFound
	Purged           uint64 // values dropped for a tag purged after they were made: found on a read or a sweep, or a fill's result
	BatchLoads       uint64 // batch loader calls (Config.BatchLoad)
	BatchKeys        uint64 // keys those calls were given, in all
	Entries          int    // entries held now (an estimate)
	Bytes            uint64 // weight held now
}

// counters is the live form of Stats. The ones on the hit path are striped; the others
// count slow-path events.
type counters struct {
	gets, staleServed, negativeHits                           Counter
	fills, coalesced, fillErrors, refreshes, refreshesSkipped atomic.Uint64
	purged                                                    atomic.Uint64
	batchLoads, batchKeys                                     atomic.Uint64
}

// Stats returns the counters now.
func (c *Cache[V]) Stats() Stats {
	return Stats{
		Gets:             c.stats.gets.Load(),
		Fills:            c.stats.fills.Load(),
		Coalesced:        c.stats.coalesced.Load(),
		FillErrors:       c.stats.fillErrors.Load(),
		StaleServed:      c.stats.staleServed.Load(),
		Refreshes:        c.stats.refreshes.Load(),
		RefreshesSkipped: c.stats.refreshesSkipped.Load(),
		NegativeHits:     c.stats.negativeHits.Load(),
		Purged:           c.stats.purged.Load(),
		BatchLoads:       c.stats.batchLoads.Load(),
		BatchKeys:        c.stats.batchKeys.Load(),
		Entries:          c.store.EstimatedSize(),
		Bytes:            c.store.WeightedSize(),
	}
}
