package write

import (
	"context"

	"github.com/corralcache/corral/internal/version"
	"github.com/corralcache/corral/transport/peerpb"
)

// A purge of a tag (RemoveByTag) is told like a write, to every member known, which passes it
// on to the members it knows of in turn; each one removes, in all its groups at once, every
// value carrying the tag that was born below the purge's version (fill.Tags: a registry
// update, not a walk of the store).
//
// The purge's version must be above the born version of every value made before the purge —
// on every member, and the members' version clocks differ: one that drew versions faster
// than the purger (writes, fills) may have made values born at or above the drawn version. So
// a member told answers with its clock's reading when that is at or above the purge's
// version, and the purger purges once more, just above the largest answer. A value made
// before the purge began was born at or below its member's reading when the purge reached it,
// so the second round removes it; a value made after the first round reached its member may
// be born above the answer and is left alone — a second round drawn from the wall clock would
// remove the values filled again between the rounds, each costing one more fill. After the
// last round every member's clock has passed the purge's version: a value made after the
// purge returned is born above it, and served.

// Purge removes every value carrying tag, made before the call, on every member known; it
// returns an *UnreachedError naming the members that could not be told (the purge stands
// everywhere else, and on them once they hear of it: a reconciliation exchanges purges).
func (w *Writer) Purge(ctx context.Context, tag string) error {
	v := w.cfg.Clock.Next()
	for round := 1; ; round++ {
		w.cfg.Tags.Purge(tag, v)
		w.cfg.Log.Debug("corral: purged a tag", "tag", tag, "version", v, "round", round)
		unreached, newer := w.TellPurge(ctx, tag, v, []string{w.cfg.Self})
		if len(unreached) > 0 {
			return &UnreachedError{Members: unreached, Err: ErrNotTold}
		}
		if newer < v || round == 2 || newer >= version.Max {
			return nil
		}
		// Every value made before the purge began is born at or below newer.
		v = newer + 1
		w.cfg.Clock.Observe(v)
		w.cfg.Log.Debug("corral: purging again above a member's clock", "tag", tag, "clock", newer)
	}
}

// ApplyPurge applies a purge of tag at version told by another member, and returns this
// node's clock reading before it when that is at or above version — values made here may be
// born up to it — else 0.
func (w *Writer) ApplyPurge(tag string, v uint64) (newer uint64) {
	before := w.cfg.Clock.Now()
	w.cfg.Clock.Observe(v)
	w.cfg.Tags.Purge(tag, v)
	if before >= v {
		return before
	}
	return 0
}

// TellPurge tells every member known that told does not list of the purge of tag at version,
// as Tell tells a write, and returns the members that could not be told and the largest
// clock reading at or above version that a member told answered (0 when none).
func (w *Writer) TellPurge(ctx context.Context, tag string, v uint64, told []string) (unreached []string, newer uint64) {
	return w.tell(ctx, v, told, []any{"tag", tag}, func(all []string) *peerpb.InvalidateRequest {
		return &peerpb.InvalidateRequest{Header: w.cfg.Router.Header(ctx), Tag: tag, Version: v, Told: all}
	})
}

// purges returns the purges this node remembers, for the wire.
func (w *Writer) purges() []*peerpb.TagPurge {
	var out []*peerpb.TagPurge
	for tag, v := range w.cfg.Tags.All() {
		out = append(out, &peerpb.TagPurge{Tag: tag, Version: v})
	}
	return out
}

// Purges returns the purges this node remembers, for the wire (a reconciliation).
func (w *Writer) Purges() []*peerpb.TagPurge { return w.purges() }

// ApplyPurges applies purges another member remembers, as if it had told this node of each.
func (w *Writer) ApplyPurges(ps []*peerpb.TagPurge) {
	for _, p := range ps {
		if version.Check(p.GetVersion()) != nil {
			continue
		}
		w.ApplyPurge(p.GetTag(), p.GetVersion())
	}
}
