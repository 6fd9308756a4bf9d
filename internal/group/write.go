package group

import (
	"context"
	"errors"
	"fmt"

	"github.com/corralcache/corral/fill"
	"github.com/corralcache/corral/internal/view"
	"github.com/corralcache/corral/internal/write"
)

// Set writes v through key's owner, under the owner's TTL, tagged with tags (a purge of one
// of them removes it), and drops every near copy of the key in the cluster. A fill of key in
// flight on the owner does not store its older result. If some member could not be told to
// drop its copy, Set returns a *write.UnreachedError naming them (the write itself stands).
// Errors: a *fill.TagError for tags that break a limit.
func (g *Group[V]) Set(ctx context.Context, key string, v V, tags ...string) error {
	if err := g.env.Limits.Key(key); err != nil {
		return err
	}
	if err := fill.CheckTags(tags); err != nil {
		return err
	}
	b, err := g.codec.Encode(v)
	if err != nil {
		return fmt.Errorf("corral: encode value of %s/%q: %w", g.name, key, err)
	}
	if err := g.env.Limits.Value(len(b)); err != nil {
		return err
	}
	// A Set that finds a newer write at the owner still tells: the copies it makes older are
	// older than the newer write too.
	return g.write(ctx, key, func(version uint64) (uint64, error) {
		_, err := g.local.SetAt(key, v, version, tags...)
		return version, err
	},
		func(ctx context.Context, st *view.MemberState, version uint64) (uint64, error) {
			return version, g.remoteSet(ctx, st, key, b, version, tags)
		})
}

// Remove deletes key on its owner and drops every near copy of it in the cluster before it
// returns nil. A fill of key in flight on the owner does not store its result. If some member
// could not be told, Remove returns a *write.UnreachedError naming them (the owner's delete
// stands).
func (g *Group[V]) Remove(ctx context.Context, key string) error {
	if err := g.env.Limits.Key(key); err != nil {
		return err
	}
	return g.write(ctx, key, func(version uint64) (uint64, error) { return version, g.local.RemoveAt(key, version) },
		func(ctx context.Context, st *view.MemberState, version uint64) (uint64, error) {
			return version, g.remoteRemove(ctx, st, key, version)
		})
}

// write applies a Set or Remove on the owner, then tells every member of it (see package
// write).
func (g *Group[V]) write(ctx context.Context, key string, local func(version uint64) (uint64, error),
	remote func(ctx context.Context, st *view.MemberState, version uint64) (uint64, error)) error {
	if g.env.State.Leaving.Load() {
		return view.ErrClosed
	}
	gated := func(version uint64) (uint64, error) {
		// Applied here as the key's owner: not once this node has stopped serving (its
		// hand-off's last round must see every write applied here).
		if !g.env.State.Writes.Enter() {
			return 0, view.ErrClosed
		}
		defer g.env.State.Writes.Exit()
		return local(version)
	}
	err := g.env.Writer.Write(ctx, g.name, key, write.Apply{Local: gated, Remote: remote}, g.Invalidate)
	var ue *write.UnreachedError
	if errors.As(err, &ue) {
		return ue
	}
	if err != nil {
		return g.wrapErr(key, err)
	}
	return nil
}
