package group

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	grpcpeer "google.golang.org/grpc/peer"
	"google.golang.org/protobuf/proto"

	"github.com/corralcache/corral/fill"
	"github.com/corralcache/corral/internal/fuzzcorpus"
	"github.com/corralcache/corral/internal/lease"
	"github.com/corralcache/corral/internal/route"
	"github.com/corralcache/corral/internal/version"
	"github.com/corralcache/corral/internal/view"
	"github.com/corralcache/corral/internal/write"
	"github.com/corralcache/corral/transport"
	"github.com/corralcache/corral/transport/peerpb"
)

// The peer protocol under fuzzing: bytes as a peer's gRPC request would carry them, decoded
// into the request type the method takes, and served by this node's handler
// (owner.Server) on a one-node test node. Whatever the bytes, the handler must not panic; a message that
// breaks a rule (a bad key, an unknown group, a value the group's codec refuses, a lease
// argument out of range, a version out of range) gets an error that says so, never a silent
// success nor an Internal error; and no message, good or bad, changes a key it does not
// name, nor stops this node's later writes from landing.

// fuzzMethods are the peer protocol's requests, in the order of FuzzPeerHandler's first
// argument (modulo their number).
var fuzzMethods = []string{"Get", "Set", "Remove", "Invalidate", "Handoff", "WaitsFor", "Reconcile", "Lease", "FillSet", "GetHit"}

// fuzzGetHit is GetHit's index in fuzzMethods: a Get that the peer's stream asks the handler
// to answer at once, when it holds the value.
const fuzzGetHit = 9

func fuzzRequest(method int) proto.Message {
	return [...]proto.Message{
		&peerpb.GetRequest{}, &peerpb.SetRequest{}, &peerpb.RemoveRequest{}, &peerpb.InvalidateRequest{},
		&peerpb.Entry{}, &peerpb.WaitsForRequest{}, &peerpb.ReconcileRequest{}, &peerpb.LeaseRequest{},
		&peerpb.FillSetRequest{}, &peerpb.GetRequest{},
	}[method]
}

// fuzzValue is the value of the JSON group "j", whose codec can refuse a value.
type fuzzValue struct {
	N int    `json:"n"`
	S string `json:"s,omitempty"`
}

// fuzzSentinel is the key, in both fixed groups, that the harness writes before every
// message and reads after it.
const fuzzSentinel = "sentinel"

// maxFuzzAutoGroups bounds the groups AutoGroup registers for messages, as corral serve's
// --max-groups does: each costs two stores.
const maxFuzzAutoGroups = 4

// fuzzNode is a one-node cluster serving two groups — "s" of strings, whose codec takes any
// bytes, and "j" of JSON values — and registering up to maxFuzzAutoGroups more, "auto…",
// when a message names one (AutoGroup, as in corral serve).
type fuzzNode struct {
	n     *testNode
	str   *Group[string]
	js    *Group[fuzzValue]
	autos atomic.Int32
	seq   atomic.Int64 // makes each sentinel value new
	// member is the context of a request from a member's address (this node's own), so that
	// messages pass the member check as a peer's do.
	member context.Context
}

func newFuzzNode(tb testing.TB) *fuzzNode {
	tb.Helper()
	fz := &fuzzNode{}
	fz.n = newTestNode(tb, testNodeConfig{autoGroup: func(name string) error {
		if !strings.HasPrefix(name, "auto") || fz.autos.Add(1) > maxFuzzAutoGroups {
			return fmt.Errorf("fuzz: no group %q here", name)
		}
		g, err := New(fz.n.env, name, fuzzLoadString, nil, stringCodec{}, Options{MaxBytes: 1 << 20})
		if err == nil {
			fz.n.register(name, g)
		}
		return err
	}})
	fz.str = newGroup(tb, fz.n, "s", fuzzLoadString, stringCodec{}, Options{TTL: time.Hour, MaxBytes: 1 << 20})
	fz.js = newGroup[fuzzValue](tb, fz.n, "j", fuzzLoadJSON, jsonCodec[fuzzValue]{}, Options{TTL: time.Hour, MaxBytes: 1 << 20})
	ip, _, _ := net.SplitHostPort(testAddr)
	fz.member = grpcpeer.NewContext(context.Background(), &grpcpeer.Peer{Addr: &net.TCPAddr{IP: net.ParseIP(ip), Port: 50000}})
	return fz
}

// fuzzLoadString finds every key but those starting with "missing".
func fuzzLoadString(_ context.Context, key string) (string, error) {
	if strings.HasPrefix(key, "missing") {
		return "", fill.ErrNotFound
	}
	return "loaded:" + key, nil
}

func fuzzLoadJSON(_ context.Context, key string) (fuzzValue, error) {
	return fuzzValue{N: len(key), S: "loaded"}, nil
}

// jsonCodec is the codec corral gives a group of values other than strings and bytes.
type jsonCodec[V any] struct{}

func (jsonCodec[V]) Encode(v V) ([]byte, error) { return json.Marshal(v) }

func (jsonCodec[V]) Decode(b []byte) (V, error) {
	var v V
	if err := json.Unmarshal(b, &v); err != nil {
		return v, fmt.Errorf("decode: %w", err)
	}
	return v, nil
}

// groupKey names a key of a group.
type groupKey struct{ group, key string }

// fuzzUnreachable stands for every address a message gives for its sender: a loopback port
// nothing listens on, so that the node's attempts to tell such a "member" of writes stay on
// this machine and fail at once.
const fuzzUnreachable = "127.0.0.1:1"

// hermetic points the sender address of req's header, which the node dials to tell it of
// writes, at fuzzUnreachable.
func hermetic(req proto.Message) {
	type headed interface{ GetHeader() *peerpb.Header }
	if r, ok := req.(headed); ok && r.GetHeader().GetSenderAddr() != "" {
		r.GetHeader().SenderAddr = fuzzUnreachable
	}
}

func FuzzPeerHandler(f *testing.F) {
	fz := newFuzzNode(f)
	f.Fuzz(func(t *testing.T, method byte, msg []byte) {
		fz.serve(t, int(method)%len(fuzzMethods), msg)
	})
}

// serve runs one message through the handler and checks what it did.
func (fz *fuzzNode) serve(t *testing.T, method int, msg []byte) {
	name := fuzzMethods[method]
	req := fuzzRequest(method)
	if proto.Unmarshal(msg, req) != nil {
		return // gRPC refuses what does not decode: the handler never sees it
	}
	hermetic(req)
	ctx, cancel := context.WithTimeout(fz.member, 20*time.Second)
	defer cancel()

	want := fz.writeSentinels(t, ctx)
	before := fz.n.env.Versions.Now()
	var err error
	var hit, got *peerpb.GetResponse
	if method == fuzzGetHit {
		if r, ok := fz.n.server.GetHit(ctx, req.(*peerpb.GetRequest)); ok {
			hit = r
		}
	} else if r, ok := req.(*peerpb.GetRequest); ok {
		got, err = fz.n.server.Get(ctx, r)
	} else {
		err = fz.call(ctx, req)
	}
	if ctx.Err() != nil {
		t.Fatalf("%s did not answer within 20 s: %v", name, err)
	}
	if v := fz.n.env.Versions.Next(); v <= before {
		t.Fatalf("%s moved the version clock back: %#x after %#x", name, v, before)
	}
	bad, named, writes := fz.judge(req)
	batch := -1 // the keys of a batch, if req is one
	if r, ok := req.(*peerpb.GetRequest); ok && len(r.GetKeySizes()) > 0 {
		batch = len(r.GetKeySizes())
	}
	switch {
	case method == fuzzGetHit && batch >= 0:
		// A batch is answered at once only when well-formed, with a row for every key.
		if hit != nil && (bad != "" || checkBatch(hit.GetBatch(), batch) != nil) {
			t.Fatalf("GetHit of a batch (%s) answered %v", bad, hit)
		}
	case method == fuzzGetHit:
		// A hit is answered only for a well-formed request, with the key asked for; anything
		// else is left to Get, which says why.
		r := req.(*peerpb.GetRequest)
		if hit != nil && (bad != "" || r.GetPeek() || !hit.GetFound() || !bytes.Equal(hit.GetEntry().GetKey(), r.GetKey()) || hit.GetEntry().GetGroup() != r.GetGroup()) {
			t.Fatalf("GetHit (%s) answered %v", bad, hit)
		}
	case batch >= 0 && bad == "" && err == nil && checkBatch(got.GetBatch(), batch) != nil:
		t.Fatalf("a batch of %d keys answered with %v: %v", batch, got, checkBatch(got.GetBatch(), batch))
	case bad != "" && err == nil:
		t.Fatalf("%s with %s: no error", name, bad)
	case bad != "" && !errors.Is(err, transport.ErrInvalidArgument) && !errors.Is(err, transport.ErrUnknownGroup):
		t.Fatalf("%s with %s: %v, which is neither ErrInvalidArgument nor ErrUnknownGroup", name, bad, err)
	case bad == "" && err != nil && !(method == 0 && (errors.Is(err, transport.ErrNotFound) || errors.Is(err, transport.ErrFillCycle))):
		t.Fatalf("well-formed %s: %v", name, err)
	}
	fz.checkSentinels(t, ctx, name, want, writes)
	// A later write of the sentinels still lands: the message left the clock and the
	// stores able to order writes.
	fz.checkSentinels(t, ctx, name+", then a write,", fz.writeSentinels(t, ctx), nil)
	fz.forget(named)
}

func (fz *fuzzNode) call(ctx context.Context, req proto.Message) error {
	s := fz.n.server
	var err error
	switch r := req.(type) {
	case *peerpb.GetRequest:
		_, err = s.Get(ctx, r)
	case *peerpb.SetRequest:
		_, err = s.Set(ctx, r)
	case *peerpb.RemoveRequest:
		_, err = s.Remove(ctx, r)
	case *peerpb.InvalidateRequest:
		_, err = s.Invalidate(ctx, r)
	case *peerpb.Entry:
		_, err = s.Handoff(ctx, r)
	case *peerpb.WaitsForRequest:
		_, err = s.WaitsFor(ctx, r)
	case *peerpb.ReconcileRequest:
		_, err = s.Reconcile(ctx, r)
	case *peerpb.LeaseRequest:
		_, err = s.Lease(ctx, r)
	case *peerpb.FillSetRequest:
		_, err = s.FillSet(ctx, r)
	default:
		panic(fmt.Sprintf("fuzz: no handler for %T", req))
	}
	return err
}

// judge says, from the rules and not from the handler's code, why req is bad ("" when it is
// well-formed), which keys it names, and which of them it may write.
func (fz *fuzzNode) judge(req proto.Message) (bad string, named, writes []groupKey) {
	var reasons []string
	// A group is unknown when it is not registered after the call: AutoGroup had its chance.
	group := func(g string) {
		if _, ok := fz.n.groups.Lookup(g); !ok {
			reasons = append(reasons, fmt.Sprintf("unknown group %q", g))
		}
	}
	key := func(k []byte) {
		if len(k) == 0 || len(k) > fill.MaxKeyBytes {
			reasons = append(reasons, fmt.Sprintf("a key of %d bytes", len(k)))
		}
	}
	value := func(g string, b []byte) {
		if g == "j" && json.Unmarshal(b, new(fuzzValue)) != nil {
			reasons = append(reasons, fmt.Sprintf("a value that is not JSON: %q", b))
		}
	}
	version := func(what string, v uint64) {
		if v > version.Max {
			reasons = append(reasons, fmt.Sprintf("%s %#x above version.Max", what, v))
		}
	}
	header := func(h *peerpb.Header) { version("clock", h.GetClock()) }
	entry := func(e *peerpb.Entry) {
		group(e.GetGroup())
		key(e.GetKey())
		value(e.GetGroup(), e.GetValue())
		if err := fill.CheckTags(e.GetTags()); err != nil {
			reasons = append(reasons, fmt.Sprintf("bad tags: %v", err))
		}
		version("version", e.GetVersion())
		named = append(named, groupKey{e.GetGroup(), string(e.GetKey())})
		writes = named
	}
	switch r := req.(type) {
	case *peerpb.GetRequest:
		header(r.GetHeader())
		if r.GetPeek() && r.GetGroup() == "" {
			// A probe of a silent peer: it names no group, and its answer is all it asks for.
			break
		}
		group(r.GetGroup())
		if sizes := r.GetKeySizes(); len(sizes) > 0 {
			// A batch: each key is answered on its own, a bad one with its error; the request
			// itself is bad only when its keys and their sizes disagree, or they are too many.
			total := 0
			for _, n := range sizes {
				total += int(n)
			}
			if total != len(r.GetKeys()) {
				reasons = append(reasons, fmt.Sprintf("batch keys of %d bytes, sized %d", len(r.GetKeys()), total))
				break
			}
			if len(sizes) > MaxManyKeys {
				reasons = append(reasons, fmt.Sprintf("a batch of %d keys", len(sizes)))
			}
			off := 0
			for _, n := range sizes {
				named = append(named, groupKey{r.GetGroup(), string(r.GetKeys()[off : off+int(n)])})
				off += int(n)
			}
			break
		}
		key(r.GetKey())
		named = []groupKey{{r.GetGroup(), string(r.GetKey())}}
	case *peerpb.SetRequest:
		header(r.GetHeader())
		entry(r.GetEntry())
	case *peerpb.RemoveRequest:
		header(r.GetHeader())
		group(r.GetGroup())
		key(r.GetKey())
		version("version", r.GetVersion())
		named = []groupKey{{r.GetGroup(), string(r.GetKey())}}
		writes = named
	case *peerpb.InvalidateRequest:
		header(r.GetHeader())
		if r.GetTag() != "" {
			// A purge of a tag: it names no group or key, and the sentinels carry no tag.
			if err := fill.CheckTag(r.GetTag()); err != nil {
				reasons = append(reasons, fmt.Sprintf("a bad tag: %v", err))
			}
			version("version", r.GetVersion())
			break
		}
		// A node without the group holds no copy: an unknown group is no error here.
		key(r.GetKey())
		version("version", r.GetVersion())
		named = []groupKey{{r.GetGroup(), string(r.GetKey())}}
		writes = named
	case *peerpb.Entry:
		entry(r)
	case *peerpb.WaitsForRequest:
		header(r.GetHeader())
	case *peerpb.ReconcileRequest:
		header(r.GetHeader())
		group(r.GetGroup())
		for _, w := range r.GetWrites() {
			version("a write's version", w.GetVersion())
			named = append(named, groupKey{r.GetGroup(), string(w.GetKey())})
		}
		writes = named
	case *peerpb.LeaseRequest:
		header(r.GetHeader())
		group(r.GetGroup())
		key(r.GetKey())
		if d := time.Duration(r.GetFillNanos()); d < lease.MinFill || d > lease.MaxFill {
			reasons = append(reasons, fmt.Sprintf("lease fill %v", d))
		}
		if d := time.Duration(r.GetWaitNanos()); d < 0 || d > lease.MaxWait {
			reasons = append(reasons, fmt.Sprintf("lease wait %v", d))
		}
		named = []groupKey{{r.GetGroup(), string(r.GetKey())}}
	case *peerpb.FillSetRequest:
		header(r.GetHeader())
		entry(r.GetEntry())
		if e := r.GetEntry(); e.GetFreshForNanos() < 0 || e.GetStaleForNanos() < 0 {
			reasons = append(reasons, fmt.Sprintf("a negative lifetime %d+%d ns", e.GetFreshForNanos(), e.GetStaleForNanos()))
		}
	}
	return strings.Join(reasons, ", "), named, writes
}

// sentinels are the values the harness wrote before a message.
type sentinels struct {
	s string
	j fuzzValue
}

// writeSentinels writes a new value of fuzzSentinel in both fixed groups. A write that stands
// but could not be told to a "member" a message made up (UnreachedError) counts as written.
func (fz *fuzzNode) writeSentinels(t *testing.T, ctx context.Context) sentinels {
	t.Helper()
	seq := fz.seq.Add(1)
	want := sentinels{s: fmt.Sprintf("sentinel-%d", seq), j: fuzzValue{N: int(seq), S: "sentinel"}}
	var ue *write.UnreachedError
	if err := fz.str.Set(ctx, fuzzSentinel, want.s); err != nil && !errors.As(err, &ue) {
		t.Fatalf("set the sentinel: %v", err)
	}
	if err := fz.js.Set(ctx, fuzzSentinel, want.j); err != nil && !errors.As(err, &ue) {
		t.Fatalf("set the sentinel: %v", err)
	}
	return want
}

// checkSentinels fails t when a sentinel that writes does not name lost its value.
func (fz *fuzzNode) checkSentinels(t *testing.T, ctx context.Context, what string, want sentinels, writes []groupKey) {
	t.Helper()
	touched := func(group string) bool {
		for _, w := range writes {
			if w == (groupKey{group, fuzzSentinel}) {
				return true
			}
		}
		return false
	}
	if !touched("s") {
		if got, err := fz.str.Get(ctx, fuzzSentinel); err != nil || got != want.s {
			t.Fatalf("%s changed s/%s, which it does not write: %q, %v; want %q", what, fuzzSentinel, got, err, want.s)
		}
	}
	if !touched("j") {
		if got, err := fz.js.Get(ctx, fuzzSentinel); err != nil || got != want.j {
			t.Fatalf("%s changed j/%s, which it does not write: %+v, %v; want %+v", what, fuzzSentinel, got, err, want.j)
		}
	}
}

// forget drops what a message left of the keys it named — values, leases — so that the next
// message finds none of it: a lease left held would make a later Lease wait for it.
func (fz *fuzzNode) forget(named []groupKey) {
	for _, gk := range named {
		if g, ok := fz.n.groups.Lookup(gk.group); ok && fill.CheckKey(gk.key) == nil {
			g.Invalidate(gk.key, fz.n.env.Versions.Next())
		}
	}
}

// FuzzPeerAnswer feeds bytes to what a node does with an owner's answer to its Lease: the
// lease state and the entry, whose value the group's codec decodes (a remembered not-found's
// has none). An answer of no known state, or whose value does not decode, is an error; none
// moves the version clock back.
func FuzzPeerAnswer(f *testing.F) {
	fz := newFuzzNode(f)
	f.Fuzz(func(t *testing.T, jsonGroup bool, msg []byte) {
		var resp peerpb.LeaseResponse
		if proto.Unmarshal(msg, &resp) != nil {
			return
		}
		before := fz.n.env.Versions.Now()
		var state lease.State
		var err error
		if jsonGroup {
			var ans lease.Answer[fuzzValue]
			ans, err = fz.js.leaseFromWire(&resp)
			state = ans.State
		} else {
			var ans lease.Answer[string]
			ans, err = fz.str.leaseFromWire(&resp)
			state = ans.State
		}
		if v := fz.n.env.Versions.Next(); v <= before {
			t.Fatalf("the answer moved the version clock back: %#x after %#x", v, before)
		}
		valued := resp.GetState() == peerpb.LeaseState_LEASE_STATE_HIT || resp.GetState() == peerpb.LeaseState_LEASE_STATE_STALE
		var bad string
		switch {
		case resp.GetState() < peerpb.LeaseState_LEASE_STATE_HIT || resp.GetState() > peerpb.LeaseState_LEASE_STATE_MOVED:
			bad = fmt.Sprintf("state %v", resp.GetState())
		case valued && jsonGroup && !resp.GetEntry().GetNotFound() && json.Unmarshal(resp.GetEntry().GetValue(), new(fuzzValue)) != nil:
			// (A remembered not-found has no value to decode, whatever bytes come with it.)
			bad = "a value that is not JSON"
		case valued && resp.GetEntry().GetVersion() > version.Max:
			bad = "a version above version.Max"
		}
		switch {
		case bad != "" && err == nil:
			t.Fatalf("an answer with %s: no error (state %q)", bad, state)
		case bad == "" && err != nil:
			t.Fatalf("a well-formed answer: %v", err)
		}
	})
}

// FuzzBatchAnswer feeds bytes to what a node does with an owner's answer to a batch of keys
// (a BatchResult, for a batch of keys k0, k1, …): whatever the bytes, no panic; an answer
// whose rows and keys disagree is an error; otherwise every key is answered once — with the
// value of its row or its entry, an error, or asked again — and a value is what its row says
// (when the group's codec takes it); none moves the version clock back.
func FuzzBatchAnswer(f *testing.F) {
	fz := newFuzzNode(f)
	st := &view.MemberState{Member: view.Member{Name: "n1", PeerAddr: fuzzUnreachable}}
	f.Fuzz(func(t *testing.T, jsonGroup bool, n uint8, msg []byte) {
		var b peerpb.BatchResult
		if proto.Unmarshal(msg, &b) != nil {
			return
		}
		keys := make([]string, n%64)
		for i := range keys {
			keys[i] = fmt.Sprint("k", i)
		}
		before := fz.n.env.Versions.Now()
		answered := map[string]int{}
		var again []string
		var err error
		check := func(key string, v any, err error, row int) {
			answered[key]++
			if err != nil || row < 0 {
				return
			}
			raw := b.GetValues()[row]
			if b.GetVersions()[row] > version.Max {
				t.Fatalf("%s: a version above version.Max taken", key)
			}
			if s, ok := v.(string); ok && s != string(raw) {
				t.Fatalf("%s = %q, its row holds %q", key, s, raw)
			}
			if jv, ok := v.(fuzzValue); ok {
				var want fuzzValue
				if json.Unmarshal(raw, &want) != nil || jv != want {
					t.Fatalf("%s = %+v from %q", key, jv, raw)
				}
			}
		}
		rowOf := func(key string) int { // -1: answered in others
			i := slices.Index(keys, key)
			for _, r := range b.GetOthers() {
				if int(r.GetIndex()) == i {
					return -1
				}
			}
			return i
		}
		if cerr := checkBatch(&b, len(keys)); cerr != nil {
			return // the asker fails the request (askOwnerMany)
		}
		p := route.Part{Keys: keys, At: make([]int, len(keys))}
		for i := range p.At {
			p.At[i] = i
		}
		var againPart route.Part
		if jsonGroup {
			againPart, err = fz.js.readBatch(st, p, &b, func(at int, v fuzzValue, _ *fill.Copy, _ []string, err error) {
				check(keys[at], v, err, rowOf(keys[at]))
			})
		} else {
			againPart, err = fz.str.readBatch(st, p, &b, func(at int, v string, _ *fill.Copy, _ []string, err error) {
				check(keys[at], v, err, rowOf(keys[at]))
			})
		}
		again = againPart.Keys
		if v := fz.n.env.Versions.Next(); v <= before {
			t.Fatalf("the answer moved the version clock back: %#x after %#x", v, before)
		}
		if err != nil {
			return // two answers for one key: the asker fails the request
		}
		for _, k := range again {
			answered[k]++
		}
		for _, k := range keys {
			if answered[k] != 1 {
				t.Fatalf("%s answered %d times", k, answered[k])
			}
		}
	})
}

// fuzzClock is a realistic version: a write at 2025-06-01 12:00 UTC by a node of id 0x2a.
var fuzzClock = uint64(time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC).UnixMilli())<<16 | 0x2a

func fuzzMarshal(m proto.Message) []byte {
	b, err := proto.Marshal(m)
	if err != nil {
		panic(err)
	}
	return b
}

// TestFuzzCorpus keeps testdata/fuzz in step with the seeds in code (see package fuzzcorpus;
// -fuzzcorpus.update writes them).
func TestFuzzCorpus(t *testing.T) {
	fuzzcorpus.Check(t, "FuzzPeerHandler", peerSeeds())
	fuzzcorpus.Check(t, "FuzzPeerAnswer", answerSeeds())
	fuzzcorpus.Check(t, "FuzzBatchAnswer", batchAnswerSeeds())
}

// batchAnswerSeeds are FuzzBatchAnswer's seed corpus: answers to a batch of 3 keys.
func batchAnswerSeeds() []fuzzcorpus.Seed {
	seed := func(name string, jsonGroup bool, b *peerpb.BatchResult) fuzzcorpus.Seed {
		return fuzzcorpus.Seed{Name: name, Values: []any{jsonGroup, uint8(3), fuzzMarshal(b)}}
	}
	hour := int64(time.Hour)
	rows := func(values ...string) *peerpb.BatchResult {
		b := &peerpb.BatchResult{}
		for _, v := range values {
			b.Values = append(b.Values, []byte(v))
			b.FreshForNanos = append(b.FreshForNanos, hour)
			b.Versions = append(b.Versions, fuzzClock)
		}
		return b
	}
	withOthers := func(b *peerpb.BatchResult, others ...*peerpb.KeyResult) *peerpb.BatchResult {
		b.Others = others
		return b
	}
	failure := &peerpb.Failure{Code: 5, Message: "not found"}
	tagged := &peerpb.Entry{Group: "s", Key: []byte("k1"), Value: []byte("tagged"), FreshForNanos: hour, Version: fuzzClock, Tags: []string{"t"}, Born: fuzzClock}
	return []fuzzcorpus.Seed{
		seed("rows", false, rows("a", "bb", "")),
		seed("rows-json", true, rows(`{"n":1}`, `{"n":2,"s":"x"}`, `{}`)),
		seed("rows-json-bad", true, rows(`{"n":1}`, `{"n":`, `{}`)),
		seed("others", false, withOthers(rows("a", "", ""), &peerpb.KeyResult{Index: 1, Entry: tagged}, &peerpb.KeyResult{Index: 2, Failure: failure})),
		seed("again", false, withOthers(rows("a", "", ""), &peerpb.KeyResult{Index: 1, Again: true}, &peerpb.KeyResult{Index: 2, Again: true})),
		seed("two-answers", false, withOthers(rows("a", "", ""), &peerpb.KeyResult{Index: 1, Again: true}, &peerpb.KeyResult{Index: 1, Failure: failure})),
		seed("index-out-of-range", false, withOthers(rows("a", "b", "c"), &peerpb.KeyResult{Index: 7, Again: true})),
		seed("short-columns", false, &peerpb.BatchResult{Values: [][]byte{[]byte("a"), []byte("b")}, FreshForNanos: []int64{hour}, Versions: []uint64{1, 2, 3}}),
		seed("version-max", false, func() *peerpb.BatchResult { b := rows("a", "b", "c"); b.Versions[1] = math.MaxUint64; return b }()),
		seed("empty", false, &peerpb.BatchResult{}),
	}
}

// peerSeeds are FuzzPeerHandler's seed corpus: one realistic message of each method, and the
// hostile ones a fuzzer would take long to build.
func peerSeeds() []fuzzcorpus.Seed {
	h := &peerpb.Header{Sender: "n1", Epoch: 3, Clock: fuzzClock, SenderAddr: "10.0.0.8:7947"}
	long := bytes.Repeat([]byte("k"), fill.MaxKeyBytes+1)
	seed := func(name string, method int, m proto.Message) fuzzcorpus.Seed {
		return fuzzcorpus.Seed{Name: name, Values: []any{byte(method), fuzzMarshal(m)}}
	}
	entry := func(group, key, value string) *peerpb.Entry {
		return &peerpb.Entry{Group: group, Key: []byte(key), Value: []byte(value),
			FreshForNanos: int64(time.Minute), StaleForNanos: int64(90 * time.Second), Version: fuzzClock, FillNanos: int64(3 * time.Millisecond)}
	}
	return []fuzzcorpus.Seed{
		seed("get", 0, &peerpb.GetRequest{Header: h, Group: "s", Key: []byte("user:42")}),
		seed("get-peek", 0, &peerpb.GetRequest{Header: h, Group: "s", Key: []byte("user:42"), Peek: true}),
		seed("get-json", 0, &peerpb.GetRequest{Header: h, Group: "j", Key: []byte("user:42")}),
		seed("get-missing", 0, &peerpb.GetRequest{Header: h, Group: "s", Key: []byte("missing:7")}),
		seed("get-fill-cycle", 0, &peerpb.GetRequest{Header: &peerpb.Header{Sender: "n1", Chain: [][]byte{[]byte("s/a"), []byte("s/user:42")}}, Group: "s", Key: []byte("user:42")}),
		seed("get-auto-group", 0, &peerpb.GetRequest{Header: h, Group: "auto1", Key: []byte("user:42")}),
		seed("get-unknown-group", 0, &peerpb.GetRequest{Header: h, Group: "nope", Key: []byte("user:42")}),
		seed("get-bad-group-name", 0, &peerpb.GetRequest{Header: h, Group: "auto/../s", Key: []byte("user:42")}),
		seed("get-empty-key", 0, &peerpb.GetRequest{Header: h, Group: "s"}),
		seed("get-long-key", 0, &peerpb.GetRequest{Header: h, Group: "s", Key: long}),
		seed("get-binary-key", 0, &peerpb.GetRequest{Header: h, Group: "s", Key: []byte("\xff\x00\xfe/\n")}),
		seed("get-clock-max", 0, &peerpb.GetRequest{Header: &peerpb.Header{Sender: "n1", Clock: math.MaxUint64}, Group: "s", Key: []byte("user:42")}),
		seed("get-no-header", 0, &peerpb.GetRequest{Group: "s", Key: []byte("user:42")}),
		seed("get-batch", 0, batchRequest(h, "s", "user:42", "missing:7", fuzzSentinel)),
		seed("get-batch-json", 0, batchRequest(h, "j", "user:42", fuzzSentinel)),
		seed("get-batch-bad-keys", 0, batchRequest(h, "s", "user:42", "", string(long))),
		seed("get-batch-sizes-short", 0, &peerpb.GetRequest{Header: h, Group: "s", Keys: []byte("user:42user:7"), KeySizes: []uint32{7}}),
		seed("get-batch-sizes-long", 0, &peerpb.GetRequest{Header: h, Group: "s", Keys: []byte("user:42"), KeySizes: []uint32{7, math.MaxUint32}}),
		seed("get-batch-unknown-group", 0, batchRequest(h, "nope", "user:42")),
		seed("gethit-batch-sentinel", fuzzGetHit, batchRequest(h, "s", fuzzSentinel, fuzzSentinel)),
		seed("gethit-batch-miss", fuzzGetHit, batchRequest(h, "s", fuzzSentinel, "user:42")),
		seed("gethit-sentinel", fuzzGetHit, &peerpb.GetRequest{Header: h, Group: "s", Key: []byte(fuzzSentinel)}),
		seed("gethit-json-sentinel", fuzzGetHit, &peerpb.GetRequest{Header: h, Group: "j", Key: []byte(fuzzSentinel)}),
		seed("gethit-miss", fuzzGetHit, &peerpb.GetRequest{Header: h, Group: "s", Key: []byte("user:42")}),
		seed("gethit-peek", fuzzGetHit, &peerpb.GetRequest{Header: h, Group: "s", Key: []byte(fuzzSentinel), Peek: true}),
		seed("gethit-unknown-group", fuzzGetHit, &peerpb.GetRequest{Header: h, Group: "nope", Key: []byte(fuzzSentinel)}),
		seed("gethit-clock-max", fuzzGetHit, &peerpb.GetRequest{Header: &peerpb.Header{Sender: "n1", Clock: math.MaxUint64}, Group: "s", Key: []byte(fuzzSentinel)}),
		seed("set", 1, &peerpb.SetRequest{Header: h, Entry: entry("s", "user:42", "hello")}),
		seed("set-sentinel", 1, &peerpb.SetRequest{Header: h, Entry: entry("s", fuzzSentinel, "over")}),
		seed("set-json", 1, &peerpb.SetRequest{Header: h, Entry: entry("j", "user:42", `{"n":5,"s":"x"}`)}),
		seed("set-json-bad", 1, &peerpb.SetRequest{Header: h, Entry: entry("j", "user:42", `{"n":`)}),
		seed("set-no-entry", 1, &peerpb.SetRequest{Header: h}),
		seed("set-version-zero", 1, &peerpb.SetRequest{Header: h, Entry: &peerpb.Entry{Group: "s", Key: []byte("user:42"), Value: []byte("v")}}),
		seed("set-version-max", 1, &peerpb.SetRequest{Header: h, Entry: &peerpb.Entry{Group: "s", Key: []byte("user:42"), Value: []byte("v"), Version: math.MaxUint64}}),
		seed("remove", 2, &peerpb.RemoveRequest{Header: h, Group: "s", Key: []byte("user:42"), Version: fuzzClock}),
		seed("remove-sentinel-new", 2, &peerpb.RemoveRequest{Header: h, Group: "j", Key: []byte(fuzzSentinel)}),
		seed("remove-version-max", 2, &peerpb.RemoveRequest{Header: h, Group: "s", Key: []byte("user:42"), Version: math.MaxUint64}),
		seed("invalidate", 3, &peerpb.InvalidateRequest{Header: h, Group: "s", Key: []byte("user:42"), Version: fuzzClock, Told: []string{"n1", "n2"}}),
		seed("invalidate-unknown-group", 3, &peerpb.InvalidateRequest{Header: h, Group: "elsewhere", Key: []byte("user:42"), Version: fuzzClock}),
		seed("invalidate-empty-key", 3, &peerpb.InvalidateRequest{Header: h, Group: "s", Version: fuzzClock}),
		seed("handoff", 4, entry("s", "user:42", "handed")),
		seed("handoff-json-bad", 4, entry("j", "user:42", "not json")),
		seed("handoff-stale", 4, &peerpb.Entry{Group: "s", Key: []byte("user:42"), Value: []byte("old"), FreshForNanos: -1, StaleForNanos: -1, Version: fuzzClock}),
		seed("handoff-forever", 4, &peerpb.Entry{Group: "s", Key: []byte("user:42"), Value: []byte("v"), FreshForNanos: math.MaxInt64, StaleForNanos: math.MaxInt64, FillNanos: math.MinInt64, Version: fuzzClock}),
		seed("waitsfor", 5, &peerpb.WaitsForRequest{Header: h, Group: "s", Key: []byte("user:42")}),
		seed("reconcile", 6, &peerpb.ReconcileRequest{Header: h, Group: "s", Writes: []*peerpb.Write{{Key: []byte("user:42"), Version: fuzzClock}, {Key: []byte("b"), Version: fuzzClock + 0x100}}}),
		seed("reconcile-bad-writes", 6, &peerpb.ReconcileRequest{Header: h, Group: "s", Writes: []*peerpb.Write{{}, {Key: long, Version: 1}, {Key: []byte("user:42"), Version: math.MaxUint64}}}),
		seed("lease", 7, &peerpb.LeaseRequest{Header: h, Group: "s", Key: []byte("page:7"), FillNanos: int64(5 * time.Second)}),
		seed("lease-wait", 7, &peerpb.LeaseRequest{Header: h, Group: "j", Key: []byte("page:7"), FillNanos: int64(5 * time.Second), WaitNanos: int64(200 * time.Millisecond)}),
		seed("lease-fill-zero", 7, &peerpb.LeaseRequest{Header: h, Group: "s", Key: []byte("page:7")}),
		seed("lease-fill-long", 7, &peerpb.LeaseRequest{Header: h, Group: "s", Key: []byte("page:7"), FillNanos: int64(2 * time.Hour)}),
		seed("lease-wait-negative", 7, &peerpb.LeaseRequest{Header: h, Group: "s", Key: []byte("page:7"), FillNanos: int64(time.Second), WaitNanos: -1}),
		seed("fillset", 8, &peerpb.FillSetRequest{Header: h, Token: "0123456789abcdef", Entry: entry("s", "page:7", "<h1>7</h1>")}),
		seed("fillset-no-token", 8, &peerpb.FillSetRequest{Header: h, Entry: entry("j", "page:7", `{"n":7}`)}),
		seed("fillset-negative-ttl", 8, &peerpb.FillSetRequest{Header: h, Entry: &peerpb.Entry{Group: "s", Key: []byte("page:7"), Value: []byte("v"), FreshForNanos: -5}}),
		{Name: "garbage", Values: []any{byte(0), []byte("\xff\xff\xff\xff\x0f")}},
	}
}

// batchRequest is a batch request for keys of group.
func batchRequest(h *peerpb.Header, group string, keys ...string) *peerpb.GetRequest {
	req := &peerpb.GetRequest{Header: h, Group: group}
	req.Keys, req.KeySizes = packKeys(keys)
	return req
}

// answerSeeds are FuzzPeerAnswer's seed corpus.
func answerSeeds() []fuzzcorpus.Seed {
	seed := func(name string, jsonGroup bool, m *peerpb.LeaseResponse) fuzzcorpus.Seed {
		return fuzzcorpus.Seed{Name: name, Values: []any{jsonGroup, fuzzMarshal(m)}}
	}
	e := func(value string, version uint64) *peerpb.Entry {
		return &peerpb.Entry{Group: "s", Key: []byte("page:7"), Value: []byte(value), FreshForNanos: int64(time.Minute), Version: version}
	}
	return []fuzzcorpus.Seed{
		seed("hit", false, &peerpb.LeaseResponse{State: peerpb.LeaseState_LEASE_STATE_HIT, Entry: e("<h1>7</h1>", fuzzClock)}),
		seed("hit-json", true, &peerpb.LeaseResponse{State: peerpb.LeaseState_LEASE_STATE_HIT, Entry: e(`{"n":7}`, fuzzClock)}),
		seed("hit-json-bad", true, &peerpb.LeaseResponse{State: peerpb.LeaseState_LEASE_STATE_HIT, Entry: e(`{"n":"seven"}`, fuzzClock)}),
		seed("hit-no-entry", false, &peerpb.LeaseResponse{State: peerpb.LeaseState_LEASE_STATE_HIT}),
		seed("stale-token", false, &peerpb.LeaseResponse{State: peerpb.LeaseState_LEASE_STATE_STALE, Entry: e("old", fuzzClock), Token: "0123456789abcdef"}),
		seed("fill", false, &peerpb.LeaseResponse{State: peerpb.LeaseState_LEASE_STATE_FILL, Token: "0123456789abcdef"}),
		seed("busy", true, &peerpb.LeaseResponse{State: peerpb.LeaseState_LEASE_STATE_BUSY}),
		seed("moved", false, &peerpb.LeaseResponse{State: peerpb.LeaseState_LEASE_STATE_MOVED}),
		seed("unspecified", false, &peerpb.LeaseResponse{}),
		seed("unknown-state", false, &peerpb.LeaseResponse{State: 9}),
		seed("version-max", false, &peerpb.LeaseResponse{State: peerpb.LeaseState_LEASE_STATE_HIT, Entry: e("v", math.MaxUint64)}),
		seed("hit-json-not-found", true, &peerpb.LeaseResponse{State: peerpb.LeaseState_LEASE_STATE_HIT, Entry: &peerpb.Entry{Key: []byte("page:7"), NotFound: true, Version: fuzzClock}}),
	}
}
