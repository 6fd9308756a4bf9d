package version

import (
	"encoding/binary"
	"math"
	"testing"
	"time"

	"github.com/corralcache/corral/internal/fuzzcorpus"
)

// FuzzMergeState feeds the state of a full state exchange — bytes any member that speaks
// gossip sends on a join or a push-pull — to the version clock. Whatever they hold, the
// clock's next version is larger than every version it handed out or saw before, and larger
// than the clock a well-formed state carries, when that one is in range.
func FuzzMergeState(f *testing.F) {
	f.Fuzz(func(t *testing.T, state []byte) {
		c := Clock{id: 7, now: time.Now}
		before := c.Next()
		c.MergeState(state, true)
		after := c.Next()
		if after <= before {
			t.Fatalf("state %x moved the clock back: %#x after %#x", state, after, before)
		}
		if len(state) >= 9 && state[0] == stateFormat {
			if v := binary.BigEndian.Uint64(state[1:9]); v <= Max && after <= v {
				t.Fatalf("state %x: the next version %#x is not past the state's clock %#x", state, after, v)
			}
		}
	})
}

// fuzzClock is a realistic version: a write at 2025-06-01 12:00 UTC by a node of id 0x2a.
var fuzzClock = uint64(time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC).UnixMilli())<<16 | 0x2a

// TestFuzzCorpus keeps testdata/fuzz in step with the seeds in code (see package fuzzcorpus;
// -fuzzcorpus.update writes them).
func TestFuzzCorpus(t *testing.T) {
	fuzzcorpus.Check(t, "FuzzMergeState", mergeStateSeeds())
}

// mergeStateSeeds are FuzzMergeState's seed corpus.
func mergeStateSeeds() []fuzzcorpus.Seed {
	state := func(clock uint64) []byte { return binary.BigEndian.AppendUint64([]byte{stateFormat}, clock) }
	return []fuzzcorpus.Seed{
		{Name: "clock", Values: []any{state(fuzzClock)}},
		{Name: "clock-zero", Values: []any{state(0)}},
		{Name: "clock-max", Values: []any{state(math.MaxUint64)}},
		{Name: "trailing-bytes", Values: []any{append(state(fuzzClock), "later fields"...)}},
		{Name: "short", Values: []any{state(fuzzClock)[:5]}},
		{Name: "other-format", Values: []any{append([]byte{2}, state(fuzzClock)[1:]...)}},
		{Name: "empty", Values: []any{[]byte{}}},
	}
}
