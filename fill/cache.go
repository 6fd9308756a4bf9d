package fill

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"regexp"
	"sync"
	"sync/atomic"
	"time"

	"github.com/maypok86/otter/v2"
)

// LoadFunc loads the value of a key from the source of truth. It runs under the fill's own
// context (not the caller's): it carries the caller's values, the fill chain, and the fill
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
	// FillTimeout bounds one fill, including its wait for an admission slot. 0 =
	// DefaultFillTimeout (30 s).
	FillTimeout time.Duration
	// MaxBytes bounds the store: the weight of every entry (key, value and ≈128 bytes of
	// overhead) in bytes. Beyond it, otter's policy evicts. 0 = DefaultMaxBytes (64 MiB).
	MaxBytes int64
	// Weigher returns a value's size in bytes. nil = len for string and []byte, 64 otherwise.
	Weigher func(key string, v V) int64
	// Refreshes bounds concurrent background refreshes; share one Limiter between caches to
	// make the bound per process. A refresh that finds no free slot is skipped, and the key
	// refreshes on a later read. nil = a Limiter of DefaultMaxRefreshes of this cache's own.
	Refreshes *Limiter
	// Fills bounds concurrent fills (admission control); a fill over the bound waits for a
	// slot, within its fill timeout, while its callers wait within their own contexts. A
	// fill nested in one that holds a slot — its loader's Get, here or through other
	// processes and back — takes none (see Limiter.AcquireFill). nil = unbounded.
	Fills *Limiter
	// SweepInterval is how often the cache drops the entries that can no longer be served
	// (past their grace, or a not-found past NegativeTTL): a goroutine, stopped by Close.
	// Between sweeps such entries hold memory (within MaxBytes) and nothing else: no read
	// serves them. 0 = 1 min; negative = never (call Sweep).
	SweepInterval time.Duration
	// Clock is the time source. nil = a coarse clock of 1 ms resolution, stopped by Close.
	Clock Clock
	// Rand returns numbers uniform in [0, 1), for jitter and XFetch; it must be safe for
	// concurrent use. nil = math/rand/v2.Float64.
	Rand func() float64
	// Logger receives loader panics with their stacks. nil = discard.
	Logger *slog.Logger
	// OnFill, if set, is called after every loader run with its duration and error (for a
	// histogram); a batch loader's run is one. It is called from the fill's goroutine and
	// must not block.
	OnFill func(d time.Duration, err error)

	// BatchLoad loads the keys the cache must fill in one call per batch instead of one
	// loader run per key (see BatchLoadFunc): every miss, refresh and GetMany goes to it.
	// New's load may then be nil. nil = no batches: each key is loaded on its own.
	BatchLoad BatchLoadFunc[V]
	// BatchWindow is how long a batch waits after its first key for more, from other
	// callers, before it loads; a GetMany's keys go in together. 0 = DefaultBatchWindow;
	// negative = no wait: a batch loads at once with the keys one call brought. At most
	// MaxBatchWindow.
	BatchWindow time.Duration
	// MaxBatch bounds the keys of one batch: a batch that reaches it loads at once, and
	// the rest go to the next. 0 = DefaultMaxBatch.
	MaxBatch int
}

// DefaultFillTimeout bounds one fill when Config.FillTimeout is 0.
const DefaultFillTimeout = 30 * time.Second

// DefaultMaxBytes bounds a store when Config.MaxBytes is 0: 64 MiB.
const DefaultMaxBytes = 64 << 20

// DefaultMaxRefreshes is the default bound on concurrent background refreshes.
const DefaultMaxRefreshes = 64

// DefaultSweepInterval is how often a Cache drops its dead entries by default: a walk of the
// store a minute (≈ 50 ms for a million entries) keeps dead entries' memory to a minute's
// worth while costing well under a tenth of a percent of a core.
const DefaultSweepInterval = time.Minute

var nameRE = regexp.MustCompile(`^[a-zA-Z0-9_.-]{1,64}$`)

// CheckName returns an error when name is not a valid cache (group) name.
func CheckName(name string) error {
	if !nameRE.MatchString(name) {
		return fmt.Errorf("corral: invalid name %q: want [a-zA-Z0-9_.-]{1,64}", name)
	}
	return nil
}

func (c *Config[V]) validate() error {
	if c.Name == "" {
		c.Name = "default"
	}
	if err := CheckName(c.Name); err != nil {
		return err
	}
	switch {
	case c.TTL < 0:
		return fmt.Errorf("corral: negative TTL %v", c.TTL)
	case c.Jitter < 0 || c.Jitter >= 1 || math.IsNaN(c.Jitter):
		return fmt.Errorf("corral: jitter %v out of [0, 1)", c.Jitter)
	case c.Grace < 0:
		return fmt.Errorf("corral: negative grace %v", c.Grace)
	case c.RefreshAhead < 0 || math.IsNaN(c.RefreshAhead) || math.IsInf(c.RefreshAhead, 0):
		return fmt.Errorf("corral: refresh-ahead β %v must be ≥ 0", c.RefreshAhead)
	case c.NegativeTTL < 0:
		return fmt.Errorf("corral: negative NegativeTTL %v", c.NegativeTTL)
	case c.FillTimeout < 0:
		return fmt.Errorf("corral: negative fill timeout %v", c.FillTimeout)
	case c.MaxBytes < 0:
		return fmt.Errorf("corral: negative MaxBytes %d", c.MaxBytes)
	case c.BatchWindow > MaxBatchWindow:
		return fmt.Errorf("corral: batch window %v over %v", c.BatchWindow, MaxBatchWindow)
	case c.MaxBatch < 0:
		return fmt.Errorf("corral: negative MaxBatch %d", c.MaxBatch)
	}
	if c.BatchWindow == 0 {
		c.BatchWindow = DefaultBatchWindow
	}
	if c.MaxBatch == 0 {
		c.MaxBatch = DefaultMaxBatch
	}
	if c.FillTimeout == 0 {
		c.FillTimeout = DefaultFillTimeout
	}
	if c.SweepInterval == 0 {
		c.SweepInterval = DefaultSweepInterval
	}
	if c.MaxBytes == 0 {
		c.MaxBytes = DefaultMaxBytes
	}
	if c.Weigher == nil {
		c.Weigher = defaultWeigher[V]
	}
	if c.Refreshes == nil {
		c.Refreshes = NewLimiter(DefaultMaxRefreshes)
	}
	if c.Rand == nil {
		c.Rand = rand.Float64
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

func defaultWeigher[V any](_ string, v V) int64 {
	switch x := any(v).(type) {
	case string:
		return int64(len(x))
	case []byte:
		return int64(len(x))
	}
	return 64
}

// Cache is a bounded, expiring, read-through store: Get returns the stored value while it is
// fresh and otherwise runs the loader once for all concurrent callers of the key. It is safe
// for concurrent use. Create it with New and stop it with Close.
type Cache[V any] struct {
	cfg  Config[V]
	rc   ReplicaConfig
	load ReplicaLoadFunc[V] // nil: no loader
	// batchLoad is the batch loader (Config.BatchLoad, or a Replica's); nil: none.
	batchLoad ReplicaBatchLoadFunc[V]
	store     *otter.Cache[string, *entry[V]]
	clock     Clock
	coarse    *coarse // clock, when it is one: read without an interface call on hits
	stop      func()  // stops an owned clock; nil when the clock is the caller's

	// mu guards calls and closed, and orders every store write that must not race with a
	// revocation: a fill's store, Set, Put and Remove.
	mu      sync.Mutex
	calls   map[string]*call[V]
	closed  bool
	pending [2]*batch[V] // the batches filling up, of misses and of refreshes (batch.go)

	wg sync.WaitGroup // fills and fill workers (workers.go)
	// tasks hands a fill to a worker waiting for one; idleWorkers counts those waiting;
	// quit, closed by Close, ends them.
	tasks       chan fillTask[V]
	idleWorkers atomic.Int32
	workers     atomic.Int32 // workers alive, idle or not (TestFillWorkers reads it)
	quit        chan struct{}
	versions    atomic.Uint64 // last version handed out, without Config.NextVersion

	// sweepStop ends the sweeper goroutine, which closes sweepDone; nil without one.
	sweepStop, sweepDone chan struct{}
	tombs                *Tombstones
	tags                 *Tags
	stats                counters
}

// New returns a Cache that fills missing keys with load, or with Config.BatchLoad when it is
// set. A cache with neither has no loader: Get then returns ErrNotFound for a key that is
// not stored.
func New[V any](load LoadFunc[V], cfg Config[V]) (*Cache[V], error) {
	var l ReplicaLoadFunc[V]
	if load != nil {
		l = func(ctx context.Context, key string) (V, *Copy, error) {
			v, err := load(ctx, key)
			return v, nil, err
		}
	}
	return newCache(l, nil, cfg, ReplicaConfig{})
}

func newCache[V any](load ReplicaLoadFunc[V], batchLoad ReplicaBatchLoadFunc[V], cfg Config[V], rc ReplicaConfig) (*Cache[V], error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if batchLoad == nil && cfg.BatchLoad != nil {
		batchLoad = func(ctx context.Context, keys []string, out []Loaded[V]) error {
			vs, err := cfg.BatchLoad(ctx, keys)
			if err != nil {
				return err
			}
			for i, k := range keys {
				if v, ok := vs[k]; ok {
					out[i] = Loaded[V]{Value: v}
				}
			}
			return nil
		}
	}
	c := &Cache[V]{cfg: cfg, rc: rc, load: load, batchLoad: batchLoad, calls: make(map[string]*call[V]),
		tasks: make(chan fillTask[V]), quit: make(chan struct{})}
	switch clk := cfg.Clock.(type) {
	case nil:
		cc := NewCoarseClock(CoarseClockResolution)
		c.clock, c.coarse, c.stop = cc, cc.c, cc.Stop
	case *CoarseClock:
		c.clock, c.coarse = clk, clk.c
	default:
		c.clock = clk
	}
	// The store bounds weight only: every read checks freshness itself, against c.clock, so
	// otter's own expiry would only add a clock read and an expiry check to every hit (a
	// fifth of a hit, measured) and a goroutine per store. Entries that can no longer be
	// served are dropped by Sweep, by a write of the key, or by eviction.
	store, err := otter.New(&otter.Options[string, *entry[V]]{
		MaximumWeight: uint64(cfg.MaxBytes),
		Weigher: func(key string, e *entry[V]) uint32 {
			if e.notFound() {
				return uint32(len(key)) + entryOverhead
			}
			return uint32(min(c.weigh(key, e.value), math.MaxUint32))
		},
	})
	if err != nil {
		if c.stop != nil {
			c.stop()
		}
		return nil, fmt.Errorf("corral: store: %w", err)
	}
	c.store = store
	c.tombs = rc.Tombstones
	if c.tombs == nil {
		c.tombs = NewTombstones(TombstoneConfig{Clock: c.clock})
	}
	c.tags = rc.Tags
	if c.tags == nil {
		c.tags = NewTags(TagsConfig{Clock: c.clock})
	}
	if cfg.SweepInterval > 0 { // last: the sweeper reads the fields above
		c.sweepStop, c.sweepDone = make(chan struct{}), make(chan struct{})
		go c.sweepEvery(cfg.SweepInterval)
	}
	return c, nil
}

// Name returns the cache's name.
func (c *Cache[V]) Name() string { return c.cfg.Name }

// FillTimeout returns the bound on one fill (Config.FillTimeout, default applied).
func (c *Cache[V]) FillTimeout() time.Duration { return c.cfg.FillTimeout }

// Clock returns the cache's time source.
func (c *Cache[V]) Clock() Clock { return c.clock }

// Close stops the cache: later calls get ErrClosed, fills in flight may finish (their
// results are not stored), and Close waits for their goroutines until ctx ends. It is safe
// to call more than once.
func (c *Cache[V]) Close(ctx context.Context) error {
	c.mu.Lock()
	already := c.closed
	c.closed = true
	c.mu.Unlock()
	if already {
		return nil
	}
	close(c.quit) // idle workers end; busy ones end after their fill
	done := make(chan struct{})
	go func() { c.wg.Wait(); close(done) }()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = fmt.Errorf("corral: close %s: fills still running: %w", c.cfg.Name, ctx.Err())
	}
	if c.sweepStop != nil {
		close(c.sweepStop)
		<-c.sweepDone
	}
	c.store.StopAllGoroutines()
	if c.stop != nil {
		c.stop()
	}
	return err
}

func (c *Cache[V]) rand() float64 { return c.cfg.Rand() }

// nextVersion returns the version of a write.
func (c *Cache[V]) nextVersion() uint64 {
	if c.rc.NextVersion != nil {
		return c.rc.NextVersion()
	}
	return c.versions.Add(1)
}

// Tombstones returns the writes this cache remembers.
func (r *Replica[V]) Tombstones() *Tombstones { return r.tombs }

// Tags returns the tag registry this cache stores its tags in.
func (r *Replica[V]) Tags() *Tags { return r.tags }

// versionNow returns the version clock's reading: the born of a value made now.
func (c *Cache[V]) versionNow() uint64 {
	switch {
	case c.rc.VersionNow != nil:
		return c.rc.VersionNow()
	case c.rc.NextVersion != nil:
		return c.rc.NextVersion() // a new version is above every one seen too
	}
	return c.versions.Load()
}

// RemoveByTag removes every entry of this cache (and of the caches sharing its Tags) that
// carries tag and was stored before the call, and every fill of such a value in flight; it
// returns the purge's version. Entries tagged after it are served as usual. It costs one
// registry update, whatever the number of entries: they are gone for every read at once,
// and the sweep reclaims their memory. Errors: a *TagError for a malformed tag.
func (c *Cache[V]) RemoveByTag(tag string) (uint64, error) {
	if err := CheckTag(tag); err != nil {
		return 0, err
	}
	v := c.nextVersion()
	c.tags.Purge(tag, v)
	return v, nil
}
