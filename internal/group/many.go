package group

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/corralcache/corral/fill"
	"github.com/corralcache/corral/internal/handoff"
	"github.com/corralcache/corral/internal/route"
	"github.com/corralcache/corral/internal/view"
	"github.com/corralcache/corral/transport"
	"github.com/corralcache/corral/transport/peerpb"
)

// Batches (GetMany) take the paths of a Get, a key set at a time:
//
//  1. The keys this node owns go to its store (fill.Replica.GetEach): hits at once, and the
//     misses filled together — with the group's batch loader in one call (fillMany), the
//     misses of other callers within its window included, else each with the loader.
//  2. The others go to the near cache: its copies answer at once, a fill of a key already in
//     flight is joined, and the rest are asked of their owners by fetchMany: the keys grouped
//     by owner, one request to each (route.Router.OnOwners), all at once, on the owners'
//     streams, each owner failing over as a Get's does.
//  3. An owner serves a batch (serveMany) as it serves a Get of each key, and answers every
//     key on its own: its entry, or the error a Get of it alone would have had. A batch whose
//     keys are all held there is answered on the stream's receive loop, as a Get's hit is
//     (ServeHeld); any other runs on a goroutine of its own (ServeGet).
//
// Every key is still filled once in the cluster: each is a fill of its own in the engine,
// which any Get or GetMany of the key joins, on the asking node as on the owner. What a page
// costs beside that is per page, not per key, wherever it can be: the answers travel by index
// (a key's place in the page), not through a map at each layer; the engine's fills of one
// GetMany are one allocation and share one channel; and on the wire (batchwire.go) a page's
// keys are one buffer and its answer a few columns.

// MaxManyKeys bounds the keys of one GetMany, and of a peer's batch request.
const MaxManyKeys = 10_000

// ErrTooManyKeys is the error of a GetMany of more than MaxManyKeys keys
// (corral.ErrTooManyKeys).
var ErrTooManyKeys = errors.New("corral: too many keys")

// CheckManyKeys returns the error of a GetMany of n keys when they are too many (wrapping
// ErrTooManyKeys), else nil.
func CheckManyKeys(n int) error {
	if n > MaxManyKeys {
		return fmt.Errorf("%w: %d keys in one GetMany, at most %d", ErrTooManyKeys, n, MaxManyKeys)
	}
	return nil
}

// Result is one key's answer of GetMany: as Get's, with Info.
type Result[V any] struct {
	Value V
	Info  Info
	Err   error // as Get would return it; fill.ErrNotFound (wrapped) for a key that is not found
}

// GetMany answers each of keys, which holds each key once, as Get would (see the top of this
// file), with answer: once per key, and never from two goroutines at once. Errors:
// ErrTooManyKeys (nothing is answered), and ctx.Err() when ctx ends first (the fills go on for
// the other callers and the store; what was answered by then is to be dropped).
func (g *Group[V]) GetMany(ctx context.Context, keys []string, answer func(key string, r Result[V])) error {
	if err := CheckManyKeys(len(keys)); err != nil {
		return err
	}
	v := g.env.View.Load()
	var owned, remote []string
	for _, key := range keys {
		if err := g.env.Limits.Key(key); err != nil {
			answer(key, Result[V]{Err: err})
			continue
		}
		if v.Owner(key) == v.Self && !v.Stopped {
			owned = appendSized(owned, key, len(keys))
		} else {
			remote = appendSized(remote, key, len(keys))
		}
	}
	if v.Stopped {
		// As getStopped: this node serves nothing from its stores any more.
		if g.env.State.Closed.Load() {
			for _, key := range remote {
				answer(key, Result[V]{Err: view.ErrClosed})
			}
			return nil
		}
		return g.manyStopped(ctx, remote, answer)
	}
	// The keys owned here and the others are read at once when there are both; answer is
	// then called under mu.
	both := len(owned) > 0 && len(remote) > 0
	var mu sync.Mutex
	local := func() {
		g.local.GetEach(ctx, owned, func(i int, r fill.Result[V]) {
			key := owned[i]
			res := Result[V]{Value: r.Entry.Value, Info: Info{How: r.Source, Tags: r.Entry.Tags}, Err: g.wrapErr(key, r.Err)}
			if both {
				mu.Lock()
				defer mu.Unlock()
			}
			answer(key, res)
		})
	}
	var wg sync.WaitGroup
	if both {
		wg.Go(local)
	} else if len(owned) > 0 {
		local()
	}
	if len(remote) > 0 {
		g.remoteGets.Add(uint64(len(remote)))
		g.near.GetEach(ctx, remote, func(i int, r fill.Result[V]) {
			key := remote[i]
			if r.Err == nil && r.Source == fill.SourceHit {
				g.nearHits.Add(1)
			}
			res := Result[V]{Value: r.Entry.Value, Info: Info{How: r.Source, Remote: true, Tags: r.Entry.Tags},
				Err: g.wrapErr(key, g.blamePeers(ctx, key, r.Err))}
			if both {
				mu.Lock()
				defer mu.Unlock()
			}
			answer(key, res)
		})
	}
	wg.Wait()
	return ctx.Err()
}

// appendSized appends key to keys, made with room for n keys at first.
func appendSized(keys []string, key string, n int) []string {
	if keys == nil {
		keys = make([]string, 0, n)
	}
	return append(keys, key)
}

// manyStopped is GetMany on a node that serves nothing from its stores any more: every key is
// asked of its owner among the other members, in batches, and nothing is kept (see
// getStopped).
func (g *Group[V]) manyStopped(ctx context.Context, keys []string, answer func(key string, r Result[V])) error {
	out := make([]Result[V], len(keys)) // the last answer of each key (a failover may ask again)
	set := func(at int, v V, _ *fill.Copy, tags []string, err error) {
		out[at] = Result[V]{Value: v, Info: Info{How: fill.SourceFill, Remote: true, Tags: tags}, Err: err}
	}
	failed := func(p route.Part, err error) {
		for _, at := range p.At {
			out[at] = Result[V]{Err: err}
		}
	}
	g.env.Router.OnOwners(ctx, keys, func(p route.Part) { failed(p, view.ErrClosed) },
		func(ctx context.Context, st *view.MemberState, p route.Part) error {
			return g.askOwnerMany(ctx, st, p, set)
		}, failed, nil)
	if err := ctx.Err(); err != nil {
		return err
	}
	for i, r := range out {
		if r.Err != nil {
			r.Err = g.wrapErr(keys[i], route.FromWire(r.Err))
		}
		answer(keys[i], r)
	}
	return nil
}

// fetchMany is the near cache's batch loader: one request to each owner of keys for all its
// keys, all at once (the batch's ctx carries the near cache's own link in the fill chain,
// which is dropped before the chain goes out, as fetch drops it).
func (g *Group[V]) fetchMany(ctx context.Context, keys []string, out []fill.Loaded[V]) error {
	set := func(at int, v V, cp *fill.Copy, _ []string, err error) {
		out[at] = fill.Loaded[V]{Value: v, Copy: cp, Err: err}
	}
	g.env.Router.OnOwners(ctx, keys,
		func(p route.Part) {
			// Acting owner after a failover (or the view changed under us): fill here; the
			// values live in the local store, so keep no near copies (no lifetime).
			g.local.GetEach(fill.Outer(ctx), p.Keys, func(i int, r fill.Result[V]) {
				set(p.At[i], r.Entry.Value, &fill.Copy{}, nil, r.Err)
			})
		},
		func(ctx context.Context, st *view.MemberState, p route.Part) error {
			return g.askOwnerMany(ctx, st, p, set)
		},
		func(p route.Part, err error) {
			err = route.FromWire(err)
			for _, at := range p.At {
				out[at] = fill.Loaded[V]{Err: err}
			}
		},
		g.near.Go) // on the near cache's workers, whose stacks have grown already
	return nil
}

// askOwnerMany asks st, the owner of the keys of p, for all of them in one request on its
// stream, and records each key's answer with set, by its index (p.At): its value and what a
// near cache keeps of it (see fromOwner), or its error. The keys the owner had no room for in
// its answer are asked again. It returns an error when the request itself failed (the caller
// fails over on it).
func (g *Group[V]) askOwnerMany(ctx context.Context, st *view.MemberState, p route.Part,
	set func(at int, v V, cp *fill.Copy, tags []string, err error)) error {
	for ask := p; len(ask.Keys) > 0; {
		req := &peerpb.GetRequest{Header: g.env.Router.HeaderWith(fill.OuterChain(ctx)), Group: g.name}
		req.Keys, req.KeySizes = packKeys(ask.Keys)
		resp, err := g.env.Client.GetFrom(ctx, st.PeerAddr, st.Gone.Done(), req)
		if err != nil {
			return err
		}
		g.batchesSent.Add(1)
		g.batchKeysSent.Add(uint64(len(ask.Keys)))
		b := resp.GetBatch()
		if err := checkBatch(b, len(ask.Keys)); err != nil {
			return fmt.Errorf("%w: %s answered a batch of %d keys: %v", transport.ErrInvalidArgument, st.Name, len(ask.Keys), err)
		}
		again, err := g.readBatch(st, ask, b, set)
		if err != nil {
			return fmt.Errorf("%w: %s answered a batch of %d keys: %v", transport.ErrInvalidArgument, st.Name, len(ask.Keys), err)
		}
		if len(again.Keys) == len(ask.Keys) {
			return fmt.Errorf("%w: %s answered no key of %d", transport.ErrInvalidArgument, st.Name, len(ask.Keys))
		}
		ask = again
	}
	return nil
}

// serveMany serves a peer's batch of keys (a GetRequest with Keys, unpacked by batchKeys) as
// the keys' acting owner: each key as ServeGet serves a Get of it, all filled together (see
// GetMany), and answered on its own. With held, it answers only when every valid key is held
// here (fresh, or stale within grace), without waiting, and reports false otherwise, leaving
// the batch to ServeGet; without, its keys are the batch's own strings (a fill keeps them).
// The answer stops taking values once they fill the room a message has for them
// (Config.MaxValueBytes): the keys past that are answered "again", and the peer asks again
// for them (the store holds them by then).
func (g *Group[V]) serveMany(ctx context.Context, req *peerpb.GetRequest, keys []string, held bool) (*peerpb.GetResponse, bool) {
	w := newBatchWriter(len(keys), g.env.Limits.MaxValueBytes)
	if held {
		valid := 0
		for i, key := range keys {
			if err := g.env.Limits.Key(key); err != nil {
				w.fail(i, transport.KeyFailure(ctx, route.ToWire(err)))
				continue
			}
			e, src, ok := g.local.LookupHeld(ctx, key)
			if !ok {
				return nil, false // ServeGet answers the batch
			}
			valid++
			g.answerRow(ctx, w, i, key, e, src)
		}
		g.peerGets.Add(uint64(valid))
		return w.done(), true
	}
	valid := route.Part{Keys: make([]string, 0, len(keys)), At: make([]int, 0, len(keys))}
	for i, key := range keys {
		if fill.CheckKey(key) == nil {
			valid.Keys, valid.At = append(valid.Keys, key), append(valid.At, i)
		}
	}
	var chain []string
	for _, link := range req.GetHeader().GetChain() {
		chain = append(chain, string(link))
	}
	res := make([]fill.Result[V], len(keys))
	g.local.LookupEach(fill.WithChain(ctx, chain), valid.Keys, func(i int, r fill.Result[V]) { res[valid.At[i]] = r })
	g.peerGets.Add(uint64(len(valid.Keys)))
	for i, key := range keys {
		if err := g.env.Limits.Key(key); err != nil {
			w.fail(i, transport.KeyFailure(ctx, route.ToWire(err)))
			continue
		}
		r := res[i]
		if r.Err != nil {
			w.fail(i, transport.KeyFailure(ctx, route.ToWire(r.Err)))
			continue
		}
		g.answerRow(ctx, w, i, key, r.Entry, r.Source)
	}
	return w.done(), true
}

// answerRow answers row i of w, key, with e, found as src: in the columns when e is an
// untagged value, else in others.
func (g *Group[V]) answerRow(ctx context.Context, w *batchWriter, i int, key string, e fill.Entry[V], src fill.Source) {
	if e.NotFound || len(e.Tags) > 0 {
		pe, err := g.encodeEntry(key, e)
		if err != nil {
			w.fail(i, transport.KeyFailure(ctx, route.ToWire(err)))
			return
		}
		if w.fits(i, len(pe.GetValue())+len(pe.GetKey())+entryOverhead) {
			w.other(i, &peerpb.KeyResult{Entry: pe, Source: wireSource(src)})
		}
		return
	}
	b, err := g.codec.Encode(e.Value)
	if err == nil {
		err = g.env.Limits.Value(len(b))
	} else {
		err = fmt.Errorf("corral: encode value of %s/%q: %w", g.name, key, err)
	}
	if err != nil {
		w.fail(i, transport.KeyFailure(ctx, route.ToWire(err)))
		return
	}
	if w.fits(i, len(b)+rowOverhead) {
		w.values[i] = b
		w.b.FreshForNanos[i] = int64(e.FreshFor)
		w.b.Versions[i] = e.Version
	}
}

// entryOverhead is what an entry costs in an answer beside its key and value, at most: its
// fields and tags' framing (the tags themselves are bounded by fill.MaxTagsBytes).
const entryOverhead = 64 + fill.MaxTagsBytes

// fillMany is the store's batch loader, for a group with one: it takes the copies that other
// members still hold of keys that moved here lately (warm pulls, all at once, as fillLocal
// takes one), and loads the rest from the source in one call of the group's batch loader.
func (g *Group[V]) fillMany(ctx context.Context, keys []string, out []fill.Loaded[V]) error {
	rest := route.Part{Keys: keys}
	if fill.IsRefresh(ctx) {
		rest.At = make([]int, len(keys))
		for i := range rest.At {
			rest.At[i] = i
		}
	} else {
		rest = g.pullMany(ctx, keys, out)
	}
	if len(rest.Keys) == 0 {
		return nil
	}
	// From here on the fill waits for no other member (see fillLocal).
	fill.Loading(ctx)
	g.loads.Add(uint64(len(rest.Keys)))
	values, err := g.batchLoad(ctx, rest.Keys)
	if err != nil {
		if len(rest.Keys) == len(keys) {
			return err
		}
		for _, at := range rest.At {
			out[at] = fill.Loaded[V]{Err: err}
		}
		return nil
	}
	for i, key := range rest.Keys {
		if v, ok := values[key]; ok { // a key left out is not found
			out[rest.At[i]] = fill.Loaded[V]{Value: v}
		}
	}
	return nil
}

// pullMany takes, into out, the backups this node keeps of keys it now owns, and the copies
// other members hold of those that moved here lately (see handoff.Pull), all at once, and
// returns the keys it found none of, with their indexes.
func (g *Group[V]) pullMany(ctx context.Context, keys []string, out []fill.Loaded[V]) route.Part {
	var moved, rest route.Part
	for i, key := range keys {
		if e, ok := g.fromBackup(key); ok { // see fillLocal
			l := fill.Loaded[V]{Value: e.Value, Copy: copyOf(e)}
			if e.NotFound {
				l.Err = fill.ErrNotFound
			}
			out[i] = l
			continue
		}
		p := &rest
		if g.env.Mover.Moved(key) {
			p = &moved
		}
		p.Keys, p.At = append(p.Keys, key), append(p.At, i)
	}
	if len(moved.Keys) == 0 {
		return rest
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, maxPulls)
	for j, key := range moved.Keys {
		at := moved.At[j]
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			e, ok := handoff.Pull(ctx, g.env.Mover, g.name, key, g.tombs.Floor, g.decodeEntry)
			if !ok {
				mu.Lock()
				defer mu.Unlock()
				rest.Keys, rest.At = append(rest.Keys, key), append(rest.At, at)
				return
			}
			g.env.Received()
			l := fill.Loaded[V]{Value: e.Value, Copy: copyOf(e)}
			if e.NotFound {
				l.Err = fill.ErrNotFound
			}
			out[at] = l
		})
	}
	wg.Wait()
	return rest
}

// maxPulls bounds the warm pulls of one batch at once.
const maxPulls = 16
