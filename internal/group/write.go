package group

import (
	"context"
	"errors"
	"fmt"
	"slices"

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
	enc, err := g.encodeChecked(key, v)
	if err != nil {
		return err
	}
	// A Set that finds a newer write at the owner still tells: the copies it makes older are
	// older than the newer write too.
	return g.write(ctx, key, func(version uint64) (uint64, []string, error) {
		stored, err := g.local.SetAt(key, v, version, tags...)
		if err != nil || !stored {
			return version, nil, err
		}
		return version, g.pushBackups(ctx, []string{key}), nil
	},
		func(ctx context.Context, st *view.MemberState, version uint64) (uint64, []string, error) {
			b, err := g.encoded(key, v, enc)
			if err != nil {
				return 0, nil, err
			}
			unreached, err := g.remoteSet(ctx, st, key, b, version, tags)
			return version, unreached, err
		})
}

// sizedCodec is a Codec that tells the size of a value's encoding without making it, and
// whose Encode never fails (corral serve's objects.Codec): a write applied on this node, its
// owner, then never encodes the value.
type sizedCodec[V any] interface {
	EncodedSize(v V) int
}

// encodeChecked checks v's encoding against the value limit and returns its bytes, or nil for
// a sizedCodec: a write sent to another owner encodes it then (encoded).
func (g *Group[V]) encodeChecked(key string, v V) ([]byte, error) {
	if sc, ok := g.codec.(sizedCodec[V]); ok {
		return nil, g.env.Limits.Value(sc.EncodedSize(v))
	}
	return g.encoded(key, v, nil)
}

// encoded returns b, v's encoding if encodeChecked made it, or makes it.
func (g *Group[V]) encoded(key string, v V, b []byte) ([]byte, error) {
	if b != nil {
		return b, nil
	}
	b, err := g.codec.Encode(v)
	if err != nil {
		return nil, fmt.Errorf("corral: encode value of %s/%q: %w", g.name, key, err)
	}
	return b, g.env.Limits.Value(len(b))
}

// Remove deletes key on its owner and drops every near copy of it in the cluster before it
// returns nil. A fill of key in flight on the owner does not store its result. If some member
// could not be told, Remove returns a *write.UnreachedError naming them (the owner's delete
// stands).
func (g *Group[V]) Remove(ctx context.Context, key string) error {
	if err := g.env.Limits.Key(key); err != nil {
		return err
	}
	// The backups are told of a Remove as every member is: no value to give them.
	return g.write(ctx, key, func(version uint64) (uint64, []string, error) { return version, nil, g.local.RemoveAt(key, version) },
		func(ctx context.Context, st *view.MemberState, version uint64) (uint64, []string, error) {
			return version, nil, g.remoteRemove(ctx, st, key, version)
		})
}

// write applies a Set, Remove or FillSet on the owner, then tells every member of it (see
// package write). local and remote apply it, here or on the member st, and return the
// version applied and the key's backups the owner could not give the written value to:
// those are named in the *write.UnreachedError, as the members not told are.
func (g *Group[V]) write(ctx context.Context, key string, local func(version uint64) (uint64, []string, error),
	remote func(ctx context.Context, st *view.MemberState, version uint64) (uint64, []string, error)) error {
	if g.env.State.Leaving.Load() {
		return view.ErrClosed
	}
	var backups []string // the backups the last attempt could not reach
	gated := func(version uint64) (uint64, error) {
		// Applied here as the key's owner: not once this node has stopped serving (its
		// hand-off's last round must see every write applied here).
		if !g.env.State.Writes.Enter() {
			return 0, view.ErrClosed
		}
		defer g.env.State.Writes.Exit()
		applied, unreached, err := local(version)
		backups = unreached
		return applied, err
	}
	onOwner := func(ctx context.Context, st *view.MemberState, version uint64) (uint64, error) {
		applied, unreached, err := remote(ctx, st, version)
		backups = unreached
		return applied, err
	}
	err := g.env.Writer.Write(ctx, g.name, key, write.Apply{Local: gated, Remote: onOwner}, g.Invalidate)
	var ue *write.UnreachedError
	switch {
	case errors.As(err, &ue):
		ue.Members = slices.Compact(slices.Sorted(slices.Values(append(ue.Members, backups...))))
		return ue
	case err != nil:
		return g.wrapErr(key, err)
	case len(backups) > 0:
		return &write.UnreachedError{Members: backups, Err: write.ErrNotTold}
	}
	return nil
}
