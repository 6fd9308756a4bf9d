package fill

import (
	"context"
	"strings"
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
	choice    *choice // the fill's SetExpiry and SetVersion choices; nil for links that came over the wire
}

// fillCtx is a loader's context: its parent's, with the fill's link at the head of the chain
// and the loader's choices, in one allocation.
type fillCtx struct {
	context.Context
	link   link
	choice choice
}

func (c *fillCtx) Value(key any) any {
	if key == (chainKey{}) {
		return &c.link
	}
	return c.Context.Value(key)
}

func chainOf(ctx context.Context) *link {
	l, _ := ctx.Value(chainKey{}).(*link)
	return l
}

// withLink returns ctx with the fill name/key added to its chain.
func withLink(ctx context.Context, name, key string) context.Context {
	return context.WithValue(ctx, chainKey{}, &link{parent: chainOf(ctx), name: name, key: key})
}

// InChain reports whether the fill of name/key is part of ctx's fill chain.
func InChain(ctx context.Context, name, key string) bool {
	for l := chainOf(ctx); l != nil; l = l.parent {
		if l.key == key && l.name == name {
			return true
		}
	}
	return false
}

// Chain returns ctx's fill chain as "name/key" strings, outermost first, or nil.
func Chain(ctx context.Context) []string {
	var out []string
	for l := chainOf(ctx); l != nil; l = l.parent {
		out = append(out, l.name+"/"+l.key)
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
