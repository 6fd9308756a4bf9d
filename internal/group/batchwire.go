package group

import (
	"errors"
	"fmt"

	"github.com/corralcache/corral/fill"
	"github.com/corralcache/corral/internal/route"
	"github.com/corralcache/corral/internal/view"
	"github.com/corralcache/corral/transport"
	"github.com/corralcache/corral/transport/peerpb"
)

// A batch on the wire costs a few allocations on either side beside its values: the keys
// travel in one buffer (GetRequest.keys and key_sizes), and the answer in columns, one row
// per key (peerpb.BatchResult) — only keys answered otherwise than with an untagged value
// (a failure, a not-found, tags, a key left out) have a message of their own. The owner
// answers a page of held keys without a map or a message per key, its values put on the wire
// straight from its store; the asker decodes each value from the buffer the wire gave it,
// which is the value's own (see ownedDecoder).

// ownedDecoder is a Codec that can decode bytes given to it for good — never written again,
// nor kept by anyone else — without a copy (a string over them). A batch's values arrive so.
type ownedDecoder[V any] interface {
	DecodeOwned(b []byte) (V, error)
}

// decodeOwned decodes b, which is the caller's own (see ownedDecoder).
func (g *Group[V]) decodeOwned(b []byte) (V, error) {
	if d, ok := g.codec.(ownedDecoder[V]); ok {
		return d.DecodeOwned(b)
	}
	return g.codec.Decode(b)
}

// packKeys returns keys as a batch request carries them.
func packKeys(keys []string) ([]byte, []uint32) {
	n := 0
	for _, k := range keys {
		n += len(k)
	}
	buf := make([]byte, 0, n)
	sizes := make([]uint32, len(keys))
	for i, k := range keys {
		buf = append(buf, k...)
		sizes[i] = uint32(len(k))
	}
	return buf, sizes
}

// errBadBatch is the error of a batch request whose keys and their sizes disagree.
var errBadBatch = errors.New("batch keys and key sizes disagree")

// batchKeys returns the keys of a batch request, in order: with own, each a string of its
// own (a fill may keep it); without, substrings of one (only looked up).
func batchKeys(req *peerpb.GetRequest, own bool) ([]string, error) {
	raw, sizes := req.GetKeys(), req.GetKeySizes()
	if len(sizes) > MaxManyKeys {
		return nil, fmt.Errorf("%d keys in one batch, at most %d", len(sizes), MaxManyKeys)
	}
	total := 0
	for _, s := range sizes {
		total += int(s)
		if total > len(raw) {
			return nil, errBadBatch
		}
	}
	if total != len(raw) {
		return nil, errBadBatch
	}
	keys := make([]string, len(sizes))
	var all string
	if !own {
		all = string(raw)
	}
	off := 0
	for i, s := range sizes {
		end := off + int(s)
		if own {
			keys[i] = string(raw[off:end])
		} else {
			keys[i] = all[off:end]
		}
		off = end
	}
	return keys, nil
}

// batchWriter builds the answer to a batch of n keys: each key's row, or its answer in
// others, within the room an answer has for values.
type batchWriter struct {
	b      *peerpb.BatchResult
	values [][]byte // each row's value, put together in b.Values by done
	room   int
	full   bool
}

func newBatchWriter(n, room int) *batchWriter {
	return &batchWriter{
		b: &peerpb.BatchResult{
			FreshForNanos: make([]int64, n),
			Versions:      make([]uint64, n),
		},
		values: make([][]byte, n),
		room:   room,
	}
}

// rowOverhead is what a row costs in an answer beside its value, at most: its value's tag
// and size, its freshness and its version, as varints.
const rowOverhead = 5 + 2*10

// fits takes size bytes of the answer's room for row i, and reports whether they fit: past
// the first key left out, every key is left out, so that the asker asks again in order. The
// first key always fits: a value is never larger than the room.
func (w *batchWriter) fits(i, size int) bool {
	if w.full || i > 0 && size > w.room {
		w.full = true
		w.other(i, &peerpb.KeyResult{Again: true})
		return false
	}
	w.room -= size
	return true
}

// other answers row i with r.
func (w *batchWriter) other(i int, r *peerpb.KeyResult) {
	r.Index = uint32(i)
	w.b.Others = append(w.b.Others, r)
}

// fail answers row i with err, a Handler's error.
func (w *batchWriter) fail(i int, f *peerpb.Failure) { w.other(i, &peerpb.KeyResult{Failure: f}) }

// done returns the answer.
func (w *batchWriter) done() *peerpb.GetResponse {
	w.b.Values = w.values
	return &peerpb.GetResponse{Batch: w.b}
}

// checkBatch checks that b answers a batch of n keys: a row for each, every key answered once.
func checkBatch(b *peerpb.BatchResult, n int) error {
	if b == nil {
		return errors.New("no batch answer")
	}
	if len(b.GetValues()) != n || len(b.GetFreshForNanos()) != n || len(b.GetVersions()) != n {
		return fmt.Errorf("columns of %d, %d and %d rows for %d keys",
			len(b.GetValues()), len(b.GetFreshForNanos()), len(b.GetVersions()), n)
	}
	for _, r := range b.GetOthers() {
		if int(r.GetIndex()) >= n {
			return fmt.Errorf("an answer for key %d of %d", r.GetIndex(), n)
		}
	}
	return nil
}

// readBatch records with set, by its index (p.At), each key's answer in b, the answer st
// gave to a batch of the keys of p (checked by checkBatch), and returns the keys st left out,
// in order (to ask again).
func (g *Group[V]) readBatch(st *view.MemberState, p route.Part, b *peerpb.BatchResult,
	set func(at int, v V, cp *fill.Copy, tags []string, err error)) (route.Part, error) {
	keys := p.Keys
	var others []int32 // with others: row i is answered by others[i]-1, if positive
	if len(b.GetOthers()) > 0 {
		others = make([]int32, len(keys))
		for j, r := range b.GetOthers() {
			if others[r.GetIndex()] != 0 {
				return route.Part{}, fmt.Errorf("two answers for key %d", r.GetIndex())
			}
			others[r.GetIndex()] = int32(j) + 1
		}
	}
	copies := make([]fill.Copy, len(keys)-len(b.GetOthers())) // what a near cache keeps of each row
	var again route.Part
	for i, key := range keys {
		if others != nil && others[i] > 0 {
			r := b.GetOthers()[others[i]-1]
			switch {
			case r.GetAgain():
				again.Keys, again.At = append(again.Keys, key), append(again.At, p.At[i])
			case r.GetFailure() != nil:
				var zero V
				set(p.At[i], zero, nil, nil, route.FromWire(transport.KeyError(st.PeerAddr, r.GetFailure())))
			default:
				v, cp, err := g.fromOwner(st, key, r.GetEntry())
				set(p.At[i], v, cp, r.GetEntry().GetTags(), err)
			}
			continue
		}
		cp := &copies[0]
		copies = copies[1:]
		v, err := g.ownerValue(st, key, b.GetValues()[i], b.GetVersions()[i], b.GetFreshForNanos()[i], nil, 0, cp)
		if err != nil {
			var zero V
			set(p.At[i], zero, nil, nil, err)
			continue
		}
		set(p.At[i], v, cp, nil, nil)
	}
	return again, nil
}
