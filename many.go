package corral

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/corralcache/corral/fill"
	"github.com/corralcache/corral/internal/group"
	"github.com/corralcache/corral/internal/tracing"
)

// Batch reads. A page that shows 100 items asks for 100 keys; GetMany reads them as 100 Gets
// would — near copies, local hits, stale-while-revalidate, one fill per key in the cluster,
// joining any fill of a key already in flight — but sends the keys that miss here as one
// request per owner, to every owner at once, and an owner with a batch loader (WithBatchLoad)
// loads the keys it must fill in one call: one database query per owner instead of one per
// key.

// BatchLoadFunc loads the values of several keys from the source of truth in one call (a
// SELECT … WHERE id IN (…)). It runs on the keys' owner only, under the fill's own context
// (the fill timeout is its deadline), for the keys that owner must fill together: those of one
// GetMany's request, with the misses of other callers that come within the group's batch
// window (WithBatchWindow), at most WithMaxBatch of them, each key once. A key absent from
// the map it returns is ErrNotFound; an error fails every key of the call, and nothing is
// stored (the next read loads again). Tag called with its ctx tags every value of the call,
// TagKey one of them.
type BatchLoadFunc[V any] func(ctx context.Context, keys []string) (map[string]V, error)

// WithBatchLoad gives the group a batch loader: each owner loads the keys it must fill — a
// GetMany's misses, and the misses of Gets — in one call per batch instead of one LoadFunc
// call per key (a Get's miss waits for the batch window; see WithBatchWindow). With it,
// NewGroup's load may be nil. Without it, a GetMany's misses are each loaded by the group's
// LoadFunc, concurrently.
func WithBatchLoad[V any](load BatchLoadFunc[V]) GroupOption {
	return optionFunc(func(o *groupOptions) error {
		if load == nil {
			return errors.New("corral: WithBatchLoad(nil)")
		}
		o.batchLoad = load
		return nil
	})
}

// WithBatchWindow sets how long a batch of the group's batch loader waits after its first key
// for the misses of other callers before it loads: 0 = no wait (a batch loads at once with
// the keys one request brought). The default is fill.DefaultBatchWindow (1 ms); at most
// fill.MaxBatchWindow (1 s).
func WithBatchWindow(d time.Duration) GroupOption {
	return optionFunc(func(o *groupOptions) error {
		if d < 0 || d > fill.MaxBatchWindow {
			return fmt.Errorf("corral: WithBatchWindow(%v): want [0, %v]", d, fill.MaxBatchWindow)
		}
		o.BatchWindow = d
		if d == 0 {
			o.BatchWindow = -1 // fill's "no wait"
		}
		return nil
	})
}

// WithMaxBatch bounds the keys of one call of the group's batch loader: a batch that reaches
// it loads at once, and the rest go to the next. The default is fill.DefaultMaxBatch (1024).
func WithMaxBatch(n int) GroupOption {
	return optionFunc(func(o *groupOptions) error {
		if n < 1 {
			return fmt.Errorf("corral: WithMaxBatch(%d): want ≥ 1", n)
		}
		o.MaxBatch = n
		return nil
	})
}

// MaxGetManyKeys bounds the keys of one GetMany.
const MaxGetManyKeys = group.MaxManyKeys

// ErrTooManyKeys is wrapped by the error of a GetMany of more than MaxGetManyKeys keys.
// Nothing is read.
var ErrTooManyKeys = group.ErrTooManyKeys

// ManyError is the error of a GetMany in which some keys failed: each failed key with the
// error Get would have returned for it (a *FillError, a *LimitError, ErrFillCycle, …). The
// keys that did not fail are in GetMany's map (or were not found). errors.As and errors.Is
// look into every key's error:
//
//	var le *corral.LimitError
//	if errors.As(err, &le) { … } // some key broke a limit
type ManyError struct {
	Group  string
	Errors map[string]error
}

func (e *ManyError) Error() string {
	keys := slices.Sorted(maps.Keys(e.Errors))
	var b strings.Builder
	fmt.Fprintf(&b, "corral: GetMany of %s: %d keys failed", e.Group, len(keys))
	const shown = 3
	for i, k := range keys {
		if i == shown {
			fmt.Fprintf(&b, "; and %d more", len(keys)-shown)
			break
		}
		fmt.Fprintf(&b, "; %q: %v", k, e.Errors[k])
	}
	return b.String()
}

// Unwrap returns every key's error, in the order of the keys.
func (e *ManyError) Unwrap() []error {
	keys := slices.Sorted(maps.Keys(e.Errors))
	out := make([]error, len(keys))
	for i, k := range keys {
		out[i] = e.Errors[k]
	}
	return out
}

// GetMany returns the values of keys, each read as Get would read it (see the package's
// batch reads above): the keys that miss here are asked of their owners in one request per
// owner, all at once, and each owner fills the keys it must in one call of the group's batch
// loader when it has one. Each key is filled once in the cluster, however many Gets and
// GetManys ask for it. A key asked for twice is read once; an empty list is an empty map.
//
// A key whose loader said ErrNotFound is absent from the map. When some keys failed, the
// error is a *ManyError with each one's error, beside the map of the values that were found.
// Errors of the whole call: one wrapping ErrTooManyKeys for more than MaxGetManyKeys keys;
// ctx.Err() alone when ctx ends first (the fills go on for the other callers and the store);
// ErrClosed after Close.
func (g *Group[V]) GetMany(ctx context.Context, keys []string) (_ map[string]V, err error) {
	if g.tr != nil {
		var span trace.Span
		ctx, span = g.tr.Start(ctx, "corral.GetMany", g.g.Name(), "", tracing.AttrKeys.Int(len(keys)))
		defer func() { tracing.End(span, err) }()
	}
	if err := group.CheckManyKeys(len(keys)); err != nil {
		return nil, err // before duplicates are dropped: the bound is on what was asked
	}
	// out holds a place for each key, which drops duplicates, until its answer comes: a value,
	// or a key that has none, dropped.
	out := make(map[string]V, len(keys))
	uniq := keys
	for i, key := range keys {
		if _, dup := out[key]; dup {
			if len(uniq) == len(keys) { // the first duplicate: uniq becomes a list of its own
				uniq = slices.Clone(keys[:i])
			}
			continue
		}
		var zero V
		out[key] = zero
		if len(uniq) < len(keys) { // past a duplicate
			uniq = append(uniq, key)
		}
	}
	var errs map[string]error
	answered := 0
	err = g.g.GetMany(ctx, uniq, func(key string, r group.Result[V]) {
		answered++
		switch {
		case r.Err == nil:
			out[key] = r.Value
		case errors.Is(r.Err, ErrNotFound):
			delete(out, key)
		default:
			delete(out, key)
			if errs == nil {
				errs = make(map[string]error)
			}
			errs[key] = publicErr(r.Err)
		}
	})
	if err != nil {
		return nil, publicErr(err)
	}
	if errs != nil {
		if len(errs) == answered && allClosed(errs) {
			return nil, ErrClosed
		}
		return out, &ManyError{Group: g.g.Name(), Errors: errs}
	}
	return out, nil
}

// allClosed reports whether every key failed because the node is closing.
func allClosed(errs map[string]error) bool {
	for _, err := range errs {
		if !errors.Is(err, ErrClosed) {
			return false
		}
	}
	return true
}
