package corral

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/corralcache/corral/fill"
	"github.com/corralcache/corral/internal/group"
	"github.com/corralcache/corral/internal/tracing"
)

// Tags label values so that one call removes every value of a customer, a tenant or a page,
// in every group on every member: RemoveByTag. A value gets its tags when it is stored — from
// Tag in its loader, SetWithTags, Expiry.Tags (SetWithExpiry, FillSet), or, in corral serve,
// an origin's or a PUT's Surrogate-Key header — and keeps them in every copy: a hand-off, a
// new owner's warm pull, a near copy.
//
// Once RemoveByTag(t) has returned nil, no Get anywhere that starts after it returns a value
// stored with t before the call, through joins, leaves, crashes and restarts, with the
// exception writes have: a member that could not be told (the call returns an
// *UnreachedError naming it) may serve its copies until the two sides meet again and
// reconcile. A fill in flight when the purge arrives, whose value carries t, is not stored
// and not served; its callers fill again. A value tagged t after the purge returned is served
// as usual; one made while it runs may be removed too.
//
// A purge costs one registry update on each member, whatever the number of values it
// removes: a read checks a tagged value's tags (a few ns a tag; an untagged value checks
// nothing more), and the store's sweep reclaims their memory.

// Tag tags the value being filled: a LoadFunc calls it with the ctx it was given, before it
// returns; calls add up. Outside a loader it does nothing. Tags that break a limit fail the
// fill (see ErrInvalidTag).
func Tag(ctx context.Context, tags ...string) { fill.Tag(ctx, tags...) }

// TagKey tags one value of those a BatchLoadFunc is about to return, key's (Tag tags them
// all); calls add up. Called in a LoadFunc, it tags the value when key is the key being
// filled. Outside a loader it does nothing.
func TagKey(ctx context.Context, key string, tags ...string) { fill.TagKey(ctx, key, tags...) }

// RemoveByTag removes, in every group on every member, each value stored with tag before the
// call — fresh or stale, owned or a near copy — and every fill of such a value in flight. It
// returns nil once every member it knows of has applied it; an *UnreachedError names the
// members that could not be told (the purge stands everywhere else). Errors: one wrapping
// ErrInvalidTag for a malformed tag; ErrClosed after Close began; ctx.Err() when ctx ends
// first.
func (n *Node) RemoveByTag(ctx context.Context, tag string) (err error) {
	if n.tracer != nil {
		var span trace.Span
		ctx, span = n.tracer.Start(ctx, "corral.RemoveByTag", "", "", tracing.AttrTag.String(tag))
		defer func() { tracing.End(span, err) }()
	}
	if err := fill.CheckTag(tag); err != nil {
		return publicErr(err)
	}
	if n.state.Leaving.Load() {
		return ErrClosed
	}
	return publicErr(n.writer.Purge(ctx, tag))
}

// SetWithTags is Set of a value tagged with tags (see Tag): RemoveByTag of one of them removes
// it. Errors: Set's, and one wrapping ErrInvalidTag for tags that break a limit.
func (g *Group[V]) SetWithTags(ctx context.Context, key string, v V, tags ...string) (err error) {
	if g.tr != nil {
		var span trace.Span
		ctx, span = g.tr.Start(ctx, "corral.Set", g.g.Name(), key)
		defer func() { tracing.End(span, err) }()
	}
	return publicErr(g.g.Set(ctx, key, v, tags...))
}

// EntryInfo is what GetWithInfo and Peek say of a value besides the value itself.
type EntryInfo struct {
	Source Source   // how a Get found it; for Peek, SourceHit or SourceStale
	Tags   []string // its tags, nil for none
	// FreshFor and StaleFor, for Peek, are how long the value stays fresh (≤ 0 once stale)
	// and how long it may still be served, as its owner sees it; zero for GetWithInfo.
	FreshFor, StaleFor time.Duration
}

// GetWithInfo is Get that also says how the value was found and what tags it carries.
func (g *Group[V]) GetWithInfo(ctx context.Context, key string) (V, EntryInfo, error) {
	v, info, err := g.getWithInfo(ctx, key)
	if err != nil {
		return v, EntryInfo{}, publicErr(err)
	}
	return v, entryInfo(info), nil
}

// Peek returns what key's owner holds of key — fresh, or stale within its grace — without
// filling or refreshing it: for a debug page or an operator's question, not for serving.
// Errors: ErrNotFound when the owner holds no value of key; Get's others.
func (g *Group[V]) Peek(ctx context.Context, key string) (V, EntryInfo, error) {
	v, info, err := g.g.Peek(ctx, key)
	if err != nil {
		return v, EntryInfo{}, publicErr(err)
	}
	return v, entryInfo(info), nil
}

func entryInfo(i group.Info) EntryInfo {
	return EntryInfo{Source: sourceOf(i), Tags: i.Tags, FreshFor: i.FreshFor, StaleFor: i.StaleFor}
}

// getWithInfo is the group's GetWithInfo, traced when the node traces.
func (g *Group[V]) getWithInfo(ctx context.Context, key string) (V, group.Info, error) {
	if g.tr != nil {
		return g.getTraced(ctx, "corral.GetWithInfo", key)
	}
	return g.g.GetWithInfo(ctx, key)
}
