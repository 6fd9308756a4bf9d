package fill

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// A fill chain is the list of fills that the current call is part of: a loader's context
// carries its own fill and every fill above it. Get consults it before joining or starting a
// fill, so a loader that asks for a key whose fill it is part of fails with ErrFillCycle at
// once instead of waiting on itself until the fill timeout.
//
// Chains cross processes as strings "name/key" (names cannot contain '/'): WithChain and
// Chain convert between the two forms.

type chainKey struct{}

// link is one fill of a chain; a chain is a linked list from the innermost fill outwards, so
// extending it allocates one link and never copies.
type link struct {
	parent    *link
	name, key string
	// keys are a batch's keys (key is the first), nil for a fill of one key: the batch is
	// one fill of each of them (see BatchLoadFunc).
	keys    []string
	choice  *choice        // the fill's SetExpiry and Tag choices; nil for links that came over the wire
	refresh bool           // the fill refreshes a stored value (see IsRefresh)
	loading []*atomic.Bool // the fill's calls', set by Loading; nil for links that came over the wire
	// A fill of one key's: its cache's mu, and its call's asked (see LoadingUnlessAsked); nil
	// for a batch and for links that came over the wire.
	mu    *sync.Mutex
	asked *string
}

// has reports whether l is a fill of name/key.
func (l *link) has(name, key string) bool {
	if l.name != name {
		return false
	}
	if l.keys == nil {
		return l.key == key
	}
	return slices.Contains(l.keys, key)
}

// each calls f with every key l fills.
func (l *link) each(f func(key string)) {
	if l.keys == nil {
		f(l.key)
		return
	}
	for _, k := range l.keys {
		f(k)
	}
}

// fillCtx is a loader's context: its parent's, with the fill's link at the head of the chain,
// the loader's choices, and the fill timeout as its deadline, in one allocation. It ends at
// its deadline, when its parent ends, or when the fill is over (end).
//
// It makes the context.WithDeadline it stands for only when asked for something only a real
// one has — Done, or a value other than the chain — because a deadline's timer costs a fill
// more than the rest of a remote hit's bookkeeping, and the near cache's loader needs none:
// the transport reads the deadline and waits on Canceller's Done instead, and ends the call
// at its deadline itself. Until then Err works it out.
type fillCtx struct {
	context.Context // the parent, or on a worker the parent without its cancellation
	link            link
	one             [1]*atomic.Bool // link.loading's array, for a fill of one key
	choice          choice
	deadline        time.Time // the fill timeout's

	mu    sync.Mutex
	err   error           // the first Err that was not nil: it never changes after
	ended bool            // the fill is over
	real  context.Context // made on demand, with stop (see above)
	stop  context.CancelFunc
}

func (c *fillCtx) Deadline() (time.Time, bool) {
	if d, ok := c.Context.Deadline(); ok && d.Before(c.deadline) {
		return d, true
	}
	return c.deadline, true
}

func (c *fillCtx) Done() <-chan struct{} { return c.made().Done() }

func (c *fillCtx) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return c.err
	}
	if c.real != nil {
		c.err = c.real.Err()
		return c.err
	}
	// A deadline of the parent's, earlier than c's own, ends c when it ends the parent (its
	// timer), as it would end a real child: not a moment before.
	if err := c.Context.Err(); err != nil {
		c.err = err
	} else if d, ok := c.Context.Deadline(); (!ok || d.After(c.deadline)) && !time.Now().Before(c.deadline) {
		c.err = context.DeadlineExceeded
	} else if c.ended {
		c.err = context.Canceled
	}
	return c.err
}

func (c *fillCtx) Value(key any) any {
	if key == (chainKey{}) {
		return &c.link
	}
	// The context package's own key (the address of an int) looks for the cancelCtx to hang
	// a child on or to read the cause from: only the real context answers that right. Any
	// other key is the parent's to answer — c adds no value but its link — and asking the
	// parent costs no timer: a span looked up in a loader's ctx (tracing, an instrumented
	// HTTP client) must not make c's real context. (Were the context package to change its
	// key, a child of c would still be right: it would not find c's Done in the parent's
	// cancelCtx, and watch c's Done itself.)
	if _, ctxKey := key.(*int); !ctxKey {
		return c.Context.Value(key)
	}
	return c.made().Value(key)
}

// Canceller returns the context whose end ends c before its deadline: c's parent's (a
// fill's end also ends c, but nothing its loader called is still waiting then). The
// transport waits on its Done rather than on c's, which would cost c its timer.
func (c *fillCtx) Canceller() context.Context {
	if p, ok := c.Context.(interface{ Canceller() context.Context }); ok {
		return p.Canceller()
	}
	return c.Context
}

// made returns c's real context, making it if it is not made yet: one that has ended
// already if c has (with the same Err).
func (c *fillCtx) made() context.Context {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.real != nil:
	case c.err != nil: // Err has said why c ended: so must Cause
		real, cancel := context.WithCancelCause(c.Context)
		cancel(c.err)
		c.real, c.stop = real, func() {}
	default:
		c.real, c.stop = context.WithDeadline(c.Context, c.deadline)
		if c.ended {
			c.stop()
		}
	}
	return c.real
}

// end ends c: the fill is over.
func (c *fillCtx) end() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ended = true
	if c.real != nil {
		c.stop()
	}
}

func chainOf(ctx context.Context) *link {
	l, _ := ctx.Value(chainKey{}).(*link)
	return l
}

// withLink returns ctx with the fill name/key added to its chain.
func withLink(ctx context.Context, name, key string) context.Context {
	return context.WithValue(ctx, chainKey{}, &link{parent: chainOf(ctx), name: name, key: key})
}

// IsRefresh reports whether ctx is the context of a loader that refreshes a value the cache
// holds (stale, or about to be) rather than one that fills a miss: it should load from the
// source of truth, not take a copy from elsewhere.
func IsRefresh(ctx context.Context) bool {
	l := chainOf(ctx)
	return l != nil && l.choice != nil && l.refresh
}

// Loading tells the fill whose loader's context ctx is that the loader now loads the value
// itself — from the source of truth — rather than waiting for a copy from elsewhere. Only
// such a fill is waited for by Cache.AwaitFill: two fills that each look for the other's
// result before loading could otherwise wait for each other until their fill timeouts. It
// does nothing when ctx is not a loader's.
func Loading(ctx context.Context) {
	if l := chainOf(ctx); l != nil {
		for _, b := range l.loading {
			b.Store(true)
		}
	}
}

// LoadingUnlessAsked is Loading, unless another member asked for the key while the fill
// looked for a copy elsewhere and was told nothing of this fill (Replica.NoteAsked): then it
// marks nothing and returns that member's name, and the loader should wait for that
// member's fill of the key and take its value, calling Loading before it loads after all.
// Either way is decided at once with NoteAsked's look, so a member is either told the fill
// loads or named here. A batch's fill, or a ctx that is not a loader's, is Loading.
func LoadingUnlessAsked(ctx context.Context) string {
	l := chainOf(ctx)
	if l == nil || l.mu == nil {
		Loading(ctx)
		return ""
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if a := *l.asked; a != "" {
		*l.asked = ""
		return a
	}
	for _, b := range l.loading {
		b.Store(true)
	}
	return ""
}

// InChain reports whether the fill of name/key is part of ctx's fill chain.
func InChain(ctx context.Context, name, key string) bool {
	return chainOf(ctx).inChain(name, key)
}

// inChain reports whether the fill of name/key is l or one of its parents (nil: none is).
func (l *link) inChain(name, key string) bool {
	for ; l != nil; l = l.parent {
		if l.has(name, key) {
			return true
		}
	}
	return false
}

// Chain returns ctx's fill chain as "name/key" strings, outermost first, or nil.
func Chain(ctx context.Context) []string { return chainFrom(chainOf(ctx)) }

// OuterChain is Chain(Outer(ctx)), without making the context.
func OuterChain(ctx context.Context) []string {
	l := chainOf(ctx)
	if l != nil {
		l = l.parent
	}
	return chainFrom(l)
}

func chainFrom(l *link) []string {
	var out []string
	for ; l != nil; l = l.parent {
		// A batch's keys go out one by one, so that the member asked finds any of them; the
		// reversal below puts each link's keys in reverse order, which a set does not mind.
		l.each(func(key string) { out = append(out, l.name+"/"+key) })
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

// WithChain returns ctx carrying the chain given as "name/key" strings, outermost first (as
// Chain returns it, for example after it crossed the wire). Malformed entries are skipped.
func WithChain(ctx context.Context, chain []string) context.Context {
	for _, s := range chain {
		name, key, ok := strings.Cut(s, "/")
		if !ok {
			continue
		}
		ctx = withLink(ctx, name, key)
	}
	return ctx
}

// Outer returns ctx without its innermost fill: a loader that hands its work on to another
// fill of the same key (a remote fetch that ends up filling locally, say) uses it so that
// the hand-on is not mistaken for a cycle.
func Outer(ctx context.Context) context.Context {
	l := chainOf(ctx)
	if l == nil {
		return ctx
	}
	return context.WithValue(ctx, chainKey{}, l.parent)
}
