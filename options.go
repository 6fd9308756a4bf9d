package corral

import (
	"fmt"
	"time"

	"github.com/corralcache/corral/internal/group"
)

// GroupOption configures a group in NewGroup.
type GroupOption interface {
	apply(*groupOptions) error
}

// groupOptions are what the GroupOptions of NewGroup set: the group's options, and its codec.
type groupOptions struct {
	group.Options
	codec     any // a Codec[V], checked against V by NewGroup
	batchLoad any // a BatchLoadFunc[V], checked against V by NewGroup
}

type optionFunc func(*groupOptions) error

func (f optionFunc) apply(o *groupOptions) error { return f(o) }

// WithTTL sets how long a filled value stays fresh. 0 (the default) = it never expires.
func WithTTL(d time.Duration) GroupOption {
	return optionFunc(func(o *groupOptions) error {
		if d < 0 {
			return fmt.Errorf("corral: WithTTL(%v): negative", d)
		}
		o.TTL = d
		return nil
	})
}

// WithJitter spreads each stored TTL uniformly over TTL·(1 ± fraction), so keys filled
// together do not expire together. fraction in [0, 1); the default is 0.
func WithJitter(fraction float64) GroupOption {
	return optionFunc(func(o *groupOptions) error {
		if !(fraction >= 0 && fraction < 1) {
			return fmt.Errorf("corral: WithJitter(%v): want [0, 1)", fraction)
		}
		o.Jitter = fraction
		return nil
	})
}

// WithStaleWhileRevalidate serves a value for grace past its TTL while one background
// refresh — on the owner, so one in the cluster — replaces it. The default is 0: past TTL is
// a miss.
func WithStaleWhileRevalidate(grace time.Duration) GroupOption {
	return optionFunc(func(o *groupOptions) error {
		if grace < 0 {
			return fmt.Errorf("corral: WithStaleWhileRevalidate(%v): negative", grace)
		}
		o.Grace = grace
		return nil
	})
}

// WithFillTimeout bounds one loader run. The default is fill.DefaultFillTimeout (30 s).
func WithFillTimeout(d time.Duration) GroupOption {
	return optionFunc(func(o *groupOptions) error {
		if d <= 0 {
			return fmt.Errorf("corral: WithFillTimeout(%v): want > 0", d)
		}
		o.FillTimeout = d
		return nil
	})
}

// WithMaxBytes bounds the memory of this group's store on each node, in bytes. The default
// is fill.DefaultMaxBytes (64 MiB).
func WithMaxBytes(n int64) GroupOption {
	return optionFunc(func(o *groupOptions) error {
		if n <= 0 {
			return fmt.Errorf("corral: WithMaxBytes(%d): want > 0", n)
		}
		o.MaxBytes = n
		return nil
	})
}

// WithNegativeTTL remembers a loader's ErrNotFound for d, so a missing key does not reach
// the source on every read. The default is 0: not remembered.
func WithNegativeTTL(d time.Duration) GroupOption {
	return optionFunc(func(o *groupOptions) error {
		if d < 0 {
			return fmt.Errorf("corral: WithNegativeTTL(%v): negative", d)
		}
		o.NegativeTTL = d
		return nil
	})
}

// WithRefreshAhead turns on probabilistic early refresh (XFetch) with factor beta: a hit
// shortly before expiry refreshes the value in the background, with a probability that
// rises towards expiry and with the fill's measured duration. 1 is the usual choice; the
// default is 0 (off).
func WithRefreshAhead(beta float64) GroupOption {
	return optionFunc(func(o *groupOptions) error {
		if !(beta >= 0) {
			return fmt.Errorf("corral: WithRefreshAhead(%v): want ≥ 0", beta)
		}
		o.RefreshAhead = beta
		return nil
	})
}

// WithCodec sets how values cross the wire. The default is raw bytes for []byte and string
// and JSON otherwise. NewGroup fails when the codec's type is not the group's.
func WithCodec[V any](c Codec[V]) GroupOption {
	return optionFunc(func(o *groupOptions) error {
		if c == nil {
			return fmt.Errorf("corral: WithCodec(nil)")
		}
		o.codec = c
		return nil
	})
}

// WithBackups has each entry of the group also kept by the key's next n members on the ring —
// the members that would own it, in order, if its owner were gone — so that an owner that
// crashes costs no fill: its successor already holds its entries (fresh, stale within grace,
// or a remembered not-found). The owner gives a copy to the backups whenever it stores an
// entry (a fill, a refresh, a warm pull, a Set, a FillSet) before any caller sees it or the
// write returns, and after each membership change to the members that became backups, so a
// group stays at n copies. Reads and fills stay on the owner. n is 0 (none, the default) to
// 2; each backup costs the group's memory again on some member, and every fill and write a
// round trip to each backup.
func WithBackups(n int) GroupOption {
	return optionFunc(func(o *groupOptions) error {
		if n < 0 || n > group.MaxBackups {
			return fmt.Errorf("corral: WithBackups(%d): want 0 to %d", n, group.MaxBackups)
		}
		o.Backups = n
		return nil
	})
}
