package peer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
)

// A Discoverer finds the gossip addresses of a cluster's members by a means other than DNS, for
// the seeds of a scheme registered with RegisterScheme: package peer/k8s watches a Kubernetes
// Service's EndpointSlices for "k8s://namespace/service".
type Discoverer interface {
	// Run watches until ctx ends. It calls update with the whole set of addresses found, each
	// "ip:port" (IPv6 as "[ip]:port"), once it first knows them and again after every change;
	// calls come from one goroutine, never concurrently, and update returns at once. Run logs
	// its transient failures (a watch that broke, a refused list) to log and keeps trying; it
	// returns an error only for a failure that trying again cannot mend. It returns only after
	// every goroutine it started has ended, and soon after ctx ends.
	Run(ctx context.Context, log *slog.Logger, update func(addrs []string)) error
}

// schemes holds the registered discovery schemes, by name.
var schemes struct {
	mu sync.RWMutex
	// guards m
	m map[string]func(target string) (Discoverer, error)
}

// knownSchemes names the package to import for a scheme that is not registered.
var knownSchemes = map[string]string{"k8s": "github.com/corralcache/corral/peer/k8s"}

// RegisterScheme makes seeds "name://target" valid: New and Join call open(target) while they
// parse their seeds, and run the Discoverer it returns while the Membership lives. open must
// check target and return an error naming what is wrong with it; it must not start goroutines
// or reach the network, which is Run's job (a Config that fails validation must leak nothing).
//
// It is meant to be called from the init function of the package that implements the scheme,
// as database/sql drivers register themselves: importing github.com/corralcache/corral/peer/k8s
// registers "k8s". Registering a name again replaces the earlier open; a nil open removes the
// scheme. RegisterScheme may be called from several goroutines at once.
func RegisterScheme(name string, open func(target string) (Discoverer, error)) {
	schemes.mu.Lock()
	defer schemes.mu.Unlock()
	if open == nil {
		delete(schemes.m, name)
		return
	}
	if schemes.m == nil {
		schemes.m = make(map[string]func(string) (Discoverer, error))
	}
	schemes.m[name] = open
}

// openScheme opens the Discoverer of the seed raw, "scheme://target".
func openScheme(raw, scheme, target string) (*discovery, error) {
	schemes.mu.RLock()
	open := schemes.m[scheme]
	schemes.mu.RUnlock()
	if open == nil {
		if pkg, ok := knownSchemes[scheme]; ok {
			return nil, fmt.Errorf("peer: seed %q: %s:// discovery is not linked in (import _ %q)", raw, scheme, pkg)
		}
		return nil, fmt.Errorf("peer: seed %q: no discovery is registered for %s:// (use host:port or dns+name:port)", raw, scheme)
	}
	d, err := open(target)
	if err != nil {
		return nil, fmt.Errorf("peer: seed %q: %w", raw, err)
	}
	return &discovery{d: d, raw: raw, known: make(chan struct{})}, nil
}

// discovery is the running state of one seed's Discoverer.
type discovery struct {
	d   Discoverer
	raw string // the seed, for logs and errors
	// changed receives a value, without blocking, when addresses appear that were not there
	// before. Every discovery of one parseSeeds call shares it, so the join loop waits on one
	// channel; it holds one value, because one pending wake-up makes a join that takes them all.
	changed chan struct{}

	start sync.Once     // starts Run
	known chan struct{} // closed by the first update, or when Run returns

	mu sync.Mutex
	// guards addrs and err
	addrs []string
	err   error // why Run returned, once it has
}

// seedChanges returns the channel on which the seeds' discoveries report new addresses; nil,
// which blocks forever, when no seed has a discovery.
func seedChanges(seeds []seed) <-chan struct{} {
	for _, sd := range seeds {
		if sd.disc != nil {
			return sd.disc.changed
		}
	}
	return nil
}

// runDiscoveries starts the Run of every seed's Discoverer that is not running yet, under ctx,
// as goroutines of m.wg: ctx is m.ctx or a child of it, so Close ends them and waits for them.
func (m *Membership) runDiscoveries(ctx context.Context, seeds []seed) error {
	m.lifeMu.Lock()
	defer m.lifeMu.Unlock()
	if m.closed {
		return ErrClosed
	}
	for _, sd := range seeds {
		if ds := sd.disc; ds != nil {
			ds.start.Do(func() { m.wg.Go(func() { ds.run(ctx, m.log) }) })
		}
	}
	return nil
}

func (ds *discovery) run(ctx context.Context, log *slog.Logger) {
	log = log.With("seed", ds.raw)
	var first sync.Once
	err := ds.d.Run(ctx, log, func(addrs []string) {
		addrs = slices.Clone(addrs)
		ds.mu.Lock()
		added := slices.ContainsFunc(addrs, func(a string) bool { return !slices.Contains(ds.addrs, a) })
		ds.addrs = addrs
		ds.mu.Unlock()
		first.Do(func() { close(ds.known) })
		if added && ds.changed != nil {
			select {
			case ds.changed <- struct{}{}:
			default: // a wake-up is pending already
			}
		}
	})
	if ctx.Err() == nil {
		if err == nil {
			err = errors.New("discovery stopped")
		}
		log.Error("seed discovery stopped; its addresses are no longer updated", "err", err)
	}
	ds.mu.Lock()
	ds.err = err
	ds.mu.Unlock()
	first.Do(func() { close(ds.known) })
}

// current returns the addresses found last, waiting for the first answer until ctx ends.
func (ds *discovery) current(ctx context.Context) ([]string, error) {
	select {
	case <-ds.known:
	case <-ctx.Done():
		return nil, fmt.Errorf("discover seed %q: no answer yet: %w", ds.raw, ctx.Err())
	}
	ds.mu.Lock()
	defer ds.mu.Unlock()
	if ds.addrs == nil && ds.err != nil {
		return nil, fmt.Errorf("discover seed %q: %w", ds.raw, ds.err)
	}
	return ds.addrs, nil
}
