package fill

import (
	"context"
	"iter"
	"log/slog"
	"time"

	"github.com/maypok86/otter/v2"

	engine "github.com/corralcache/corral/internal/fill"
)

// LoadFunc loads the value of a key from the source of truth. It runs under the fill's own
// context (not the caller's): it carries the caller's values, the fill chain and the fill
// timeout as its deadline. It may return ErrNotFound.
type LoadFunc[V any] func(ctx context.Context, key string) (V, error)

// Config configures a Cache. The zero value of every field means its default; New validates
// and does not read the Config again.
type Config[V any] struct {
	// Name names the cache in errors, logs and fill chains: [a-zA-Z0-9_.-]{1,64}. "" = "default".
	Name string
	// TTL is how long a filled value stays fresh. 0 = it never expires.
	TTL time.Duration
	// Jitter spreads each stored TTL uniformly over TTL·(1 ± Jitter), so keys written together
	// do not expire together. In [0, 1); 0 = none.
	Jitter float64
	// Grace is the stale-while-revalidate window: for this long past TTL a read returns the
	// old value at once and starts one background refresh. 0 = none: past TTL is a miss.
	Grace time.Duration
	// RefreshAhead is XFetch's β: a fresh hit refreshes early with a probability that rises
	// near expiry, scaled by the measured fill time. 1 is the usual choice; 0 = off.
	RefreshAhead float64
	// NegativeTTL is how long a loader's ErrNotFound is remembered, so a missing key does not
	// reach the source on every read. 0 = not remembered.
	NegativeTTL time.Duration
	// FillTimeout bounds one fill, including its wait for an admission slot. 0 = 30 s.
	FillTimeout time.Duration
	// MaxBytes bounds the store: the weight of every entry (key, value and ≈128 bytes of
	// overhead) in bytes. Beyond it, otter's policy evicts. 0 = 64 MiB.
	MaxBytes int64
	// Weigher returns a value's size in bytes. nil = len for string and []byte, 64 otherwise.
	Weigher func(key string, v V) int64
	// Refreshes bounds concurrent background refreshes; share one Limiter between caches to
	// make the bound per process. A refresh that finds no free slot is skipped, and the key
	// refreshes on a later read. nil = a Limiter of DefaultMaxRefreshes of this cache's own.
	Refreshes *Limiter
	// Fills bounds concurrent fills (admission control); a fill over the bound waits for a
	// slot, within its fill timeout, while its callers wait within their own contexts. A fill
	// nested in one that holds a slot (its loader's Get) takes none. nil = unbounded.
	Fills *Limiter
	// SweepInterval is how often the cache drops the entries that can no longer be served: a
	// goroutine, stopped by Close. 0 = 1 min; negative = never (call Sweep).
	SweepInterval time.Duration
	// Clock is the time source. nil = a coarse clock of 1 ms resolution, stopped by Close.
	Clock Clock
	// Rand returns numbers uniform in [0, 1), for jitter and XFetch; it must be safe for
	// concurrent use. nil = math/rand/v2.Float64.
	Rand func() float64
	// Logger receives loader panics with their stacks. nil = discard.
	Logger *slog.Logger
	// OnFill, if set, is called after every loader run with its duration and error (for a
	// histogram). It is called from the fill's goroutine and must not block.
	OnFill func(d time.Duration, err error)
}

// Cache is a bounded, expiring, read-through store: Get returns the stored value while it is
// fresh and otherwise runs the loader once for all concurrent callers of the key. It is safe
// for concurrent use. Create it with New and stop it with Close.
type Cache[V any] struct{ c *engine.Cache[V] }

// New returns a Cache that fills missing keys with load. A nil load makes a cache without a
// loader: Get then returns ErrNotFound for a key that is not stored.
func New[V any](load LoadFunc[V], cfg Config[V]) (*Cache[V], error) {
	var l engine.LoadFunc[V]
	if load != nil {
		l = engine.LoadFunc[V](load)
	}
	c, err := engine.New(l, engine.Config[V]{
		Name: cfg.Name, TTL: cfg.TTL, Jitter: cfg.Jitter, Grace: cfg.Grace, RefreshAhead: cfg.RefreshAhead,
		NegativeTTL: cfg.NegativeTTL, FillTimeout: cfg.FillTimeout, MaxBytes: cfg.MaxBytes, Weigher: cfg.Weigher,
		Refreshes: cfg.Refreshes, Fills: cfg.Fills, SweepInterval: cfg.SweepInterval, Clock: cfg.Clock,
		Rand: cfg.Rand, Logger: cfg.Logger, OnFill: cfg.OnFill,
	})
	if err != nil {
		return nil, err
	}
	return &Cache[V]{c: c}, nil
}

// Get returns the value of key: the stored value while it is fresh; a stale value within grace
// (starting one background refresh); otherwise the result of one fill shared by every
// concurrent Get of the key.
//
// Errors: a *KeyError for a bad key; ErrFillCycle when ctx is the context of a fill of key;
// ctx.Err() alone when ctx ends first (the fill goes on and serves the other callers and the
// store); a *FillError when the fill failed; ErrNotFound for a remembered not-found;
// ErrClosed after Close.
func (c *Cache[V]) Get(ctx context.Context, key string) (V, error) { return c.c.Get(ctx, key) }

// GetEntry is Get that also returns the entry's remaining lifetime and tags, and how the call
// was answered.
func (c *Cache[V]) GetEntry(ctx context.Context, key string) (Entry[V], Source, error) {
	return c.c.GetEntry(ctx, key)
}

// Peek returns the stored entry of key if it can still be served (fresh or within grace),
// without filling, counting or refreshing.
func (c *Cache[V]) Peek(key string) (Entry[V], bool) { return c.c.Peek(key) }

// Set stores v for key with the cache's TTL, jitter and grace, tagged with tags, and returns
// the write's version (versions order the cache's writes and rise with each). A fill of key in
// flight when Set lands does not store its (older) result. Errors: a *KeyError, a *TagError,
// ErrClosed.
func (c *Cache[V]) Set(key string, v V, tags ...string) (uint64, error) {
	return c.c.Set(key, v, tags...)
}

// Remove deletes key and returns the removal's version. A fill of key in flight when Remove
// lands does not store its result, though its waiters still get it; Gets after Remove start a
// new fill. Errors: a *KeyError, ErrClosed.
func (c *Cache[V]) Remove(key string) (uint64, error) { return c.c.Remove(key) }

// RemoveByTag removes every entry stored with tag before the call, and every fill of such a
// value in flight, at once (see the package documentation), and returns the purge's version.
// Errors: a *TagError.
func (c *Cache[V]) RemoveByTag(tag string) (uint64, error) { return c.c.RemoveByTag(tag) }

// All yields every stored entry that can still be served — fresh, stale within grace, or a
// remembered not-found within its TTL (with NotFound set) — in no particular order. Entries
// written while it runs may or may not be seen.
func (c *Cache[V]) All() iter.Seq2[string, Entry[V]] { return c.c.All() }

// Hottest returns the keys the store's policy considers hottest, hottest first, at most n.
func (c *Cache[V]) Hottest(n int) []string { return c.c.Hottest(n) }

// FillTimeout returns the bound on one fill (Config.FillTimeout, default applied).
func (c *Cache[V]) FillTimeout() time.Duration { return c.c.FillTimeout() }

// Clock returns the cache's time source.
func (c *Cache[V]) Clock() Clock { return c.c.Clock() }

// Stats returns the cache's counters now.
func (c *Cache[V]) Stats() Stats { return c.c.Stats() }

// Sweep drops every entry that can no longer be served, and returns how many it dropped (the
// cache sweeps itself every Config.SweepInterval).
func (c *Cache[V]) Sweep() int { return c.c.Sweep() }

// Name returns the cache's name.
func (c *Cache[V]) Name() string { return c.c.Name() }

// Close stops the cache: later calls get ErrClosed, fills in flight may finish (their results
// are not stored), and Close waits for their goroutines until ctx ends. It is safe to call
// more than once.
func (c *Cache[V]) Close(ctx context.Context) error { return c.c.Close(ctx) }

// SetExpiry lets a loader choose how long the value it is about to return stays fresh and
// then stale, overriding the cache's TTL, jitter and grace for this one value (for example
// from an HTTP origin's Cache-Control). It must be called with the ctx the loader was given,
// before the loader returns. It reports false, and does nothing, when ctx is not a loader's
// context or a duration is negative. freshFor 0 means the value is stale at once; Never
// means it never expires.
func SetExpiry(ctx context.Context, freshFor, staleFor time.Duration) bool {
	return engine.SetExpiry(ctx, freshFor, staleFor)
}

// Tag adds tags to the value the loader is about to return (see Cache.RemoveByTag); calls add
// up. It must be called with the ctx the loader was given, before the loader returns. Tags
// that break a limit (CheckTags) fail the fill with a *TagError.
func Tag(ctx context.Context, tags ...string) { engine.Tag(ctx, tags...) }

// Entry is a stored value as seen at one instant, with its remaining lifetime (FreshFor,
// StaleFor), tags and the version of the latest write it reflects.
type Entry[V any] = engine.Entry[V]

// Source says how a Get was answered.
type Source = engine.Source

// How a Get was answered.
const (
	SourceHit       = engine.SourceHit       // a fresh stored value
	SourceFill      = engine.SourceFill      // this Get ran the loader
	SourceCoalesced = engine.SourceCoalesced // this Get waited on a fill in flight
	SourceStale     = engine.SourceStale     // a stale value within grace; a refresh runs
)

// Stats are a Cache's counters since New. Each is monotonic.
type Stats = engine.Stats

// Limiter bounds how many operations run at once; share one between caches to make the
// bound per process.
type Limiter = engine.Limiter

// NewLimiter returns a Limiter that admits n operations at once. n < 1 is treated as 1.
func NewLimiter(n int) *Limiter { return engine.NewLimiter(n) }

// Clock is a cache's time source: NowNano returns monotonic nanoseconds.
type Clock = engine.Clock

// FakeClock is a Clock that moves only when told: for tests.
type FakeClock = engine.FakeClock

// SystemClock is a Clock on the monotonic clock.
type SystemClock = engine.SystemClock

// NewSystemClock returns a SystemClock starting now.
func NewSystemClock() SystemClock { return engine.NewSystemClock() }

// NewCoarseClock returns otter's coarse clock, ticking every resolution: reading it costs a
// hit less than reading the system clock. Stop it when done.
func NewCoarseClock(resolution time.Duration) *otter.CoarseClock {
	return engine.NewCoarseClock(resolution)
}

// Errors and limits.
var (
	ErrNotFound  = engine.ErrNotFound  // a loader returns it for a key that does not exist; Get returns it, remembered for NegativeTTL
	ErrFillCycle = engine.ErrFillCycle // a loader asked, through its ctx, for a key whose fill it is part of
	ErrClosed    = engine.ErrClosed    // returned after Close
)

type (
	FillError    = engine.FillError    // the error of every caller of a fill that failed
	TimeoutError = engine.TimeoutError // a fill that ran past the fill timeout
	PanicError   = engine.PanicError   // a loader panic, recovered, with its stack
	KeyError     = engine.KeyError     // a key that is empty or longer than MaxKeyBytes
	TagError     = engine.TagError     // tags that break a limit or are not well formed
)

// Limits.
const (
	MaxKeyBytes          = engine.MaxKeyBytes          // the longest key, in bytes
	MaxTags              = engine.MaxTags              // tags of one entry
	MaxTagBytes          = engine.MaxTagBytes          // bytes of one tag
	MaxTagsBytes         = engine.MaxTagsBytes         // bytes of one entry's tags together
	Never                = engine.Never                // FreshFor and StaleFor of an entry that never expires
	DefaultMaxRefreshes  = engine.DefaultMaxRefreshes  // the default bound on concurrent background refreshes
	DefaultSweepInterval = engine.DefaultSweepInterval // how often a Cache drops dead entries by default
)

// CheckKey returns a *KeyError for a key that is empty or longer than MaxKeyBytes.
func CheckKey(key string) error { return engine.CheckKey(key) }

// CheckName returns an error when name is not a valid cache name.
func CheckName(name string) error { return engine.CheckName(name) }

// CheckTags returns a *TagError when tags break a limit.
func CheckTags(tags []string) error { return engine.CheckTags(tags) }
