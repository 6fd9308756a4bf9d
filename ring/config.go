package ring

import (
	"fmt"
	"math"
)

// Limits on Config. They keep New's cost (time and memory grow with
// PartitionCount, and with members × ReplicationFactor) within reason for a
// ring that is rebuilt on every membership change.
const (
	MaxPartitionCount    = 1 << 20
	MaxReplicationFactor = 1 << 10
)

// Config shapes a Ring. Every replica of a cluster must use the same Config:
// it is part of the Epoch, and two rings over the same members but with
// different configs route keys differently.
type Config struct {
	// PartitionCount is the number of partitions keys hash into; a key lives
	// in partition xxhash64(key) mod PartitionCount, and each partition has
	// one owner. More partitions give smoother shares and a slower New (it
	// is linear in PartitionCount) and cost 16 bytes each per Ring. A prime
	// spreads keys best. If zero, it defaults to 1021. At most
	// MaxPartitionCount.
	PartitionCount int

	// ReplicationFactor is the number of virtual nodes each member places on
	// the hash circle. If zero, it defaults to 20. At most
	// MaxReplicationFactor.
	ReplicationFactor int

	// Load is the bounded-load factor: no member owns more than
	// ceil(Load × PartitionCount / members) partitions. 1 balances
	// partitions as evenly as possible and moves the most on churn; larger
	// values let more partitions stay put. If zero, it defaults to 1.25.
	// It must be finite and at least 1, since below 1 the members together
	// cannot hold every partition.
	Load float64
}

// DefaultConfig returns the production defaults: 1021 partitions (a prime;
// about 100 per member at 10 members, so shares move in steps of 0.1% while
// New stays near 0.2 ms), 20 virtual nodes per member (consistent's
// default) and a load bound of 1.25 (consistent's default; 1 would move
// about a third more keys per membership change at 10 members).
func DefaultConfig() Config {
	return Config{
		PartitionCount:    1021,
		ReplicationFactor: 20,
		Load:              1.25,
	}
}

// withDefaults returns cfg with its zero fields replaced by defaults, or an
// error naming the first field out of range.
func (cfg Config) withDefaults() (Config, error) {
	def := DefaultConfig()
	if cfg.PartitionCount == 0 {
		cfg.PartitionCount = def.PartitionCount
	}
	if cfg.ReplicationFactor == 0 {
		cfg.ReplicationFactor = def.ReplicationFactor
	}
	if cfg.Load == 0 {
		cfg.Load = def.Load
	}
	switch {
	case cfg.PartitionCount < 1 || cfg.PartitionCount > MaxPartitionCount:
		return Config{}, fmt.Errorf("%w: PartitionCount %d not in [1, %d]",
			ErrInvalidConfig, cfg.PartitionCount, MaxPartitionCount)
	case cfg.ReplicationFactor < 1 || cfg.ReplicationFactor > MaxReplicationFactor:
		return Config{}, fmt.Errorf("%w: ReplicationFactor %d not in [1, %d]",
			ErrInvalidConfig, cfg.ReplicationFactor, MaxReplicationFactor)
	case math.IsNaN(cfg.Load) || math.IsInf(cfg.Load, 0) || cfg.Load < 1:
		// consistent panics ("not enough room to distribute partitions")
		// when the bound leaves less room than there are partitions. With
		// Load ≥ 1 the room is members × ceil(Load × P / members) ≥ P, so
		// it cannot; a NaN bound admits nothing and always would.
		return Config{}, fmt.Errorf("%w: Load %v must be finite and at least 1",
			ErrInvalidConfig, cfg.Load)
	}
	return cfg, nil
}
