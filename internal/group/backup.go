package group

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/corralcache/corral/fill"
	"github.com/corralcache/corral/internal/route"
	"github.com/corralcache/corral/internal/version"
	"github.com/corralcache/corral/internal/view"
	"github.com/corralcache/corral/transport"
	"github.com/corralcache/corral/transport/peerpb"
)

// Backups (Options.Backups = n). Every entry a key's owner stores — a fill, a refresh, a
// warm pull, a Set, a FillSet — is also held by the key's next n members on the ring: the
// members that would own it, in order, if the owner were gone, as every replica computes
// alike (backupsOf). So when the owner crashes, its successor already holds the entry and
// serves it, filling nothing.
//
//   - Giving. The owner gives an entry to its backups (pushBackups, one Backup call per
//     member) before the fill's callers are woken (fill.ReplicaConfig.Stored) and before a
//     write returns: a value any caller saw is held by the backups too. A backup it could not
//     reach is named by a write's *UnreachedError, as any member not told of a write is.
//   - Keeping. A backup keeps the copy in a store of its own (g.backup) under the group's
//     tombstones, so it refuses a copy older than a write it was told of — writes are told to
//     every member, backups included — and the writes and purges it is told of drop its
//     copies as they drop any.
//   - Taking over. A node that comes to own a key it holds a backup of takes the backup as
//     its value at its first miss (fillLocal), with the copy's version and remaining lifetime,
//     instead of loading it; and it answers warm pulls from its backups too.
//   - Staying at n. After each membership change, the owner gives a copy of each entry it
//     owns to the members that became its backups (rebackupView): a backup that left or died is
//     replaced, one restarted in place (a new life under the old name and address) is given its
//     copies again, and the new owner of a key — its owner crashed, or left and handed it off —
//     gives its copy to every backup it has now.
//
// A member that missed a write (paused, cut off) is declared dead and kept out of the rings
// until it has exchanged writes with the others (see package viewkeeper): it cannot own a key
// before it has dropped the copies the write made older.

// MaxBackups bounds Options.Backups.
const MaxBackups = 2

// backupsOf returns the members that keep backups of key under v: the next g.backups members
// after its owner on the ring — those that would own it, in order, if the owner were gone —
// leaving members skipped; with giving, this node is left out too (an acting owner gives its
// entries to the others).
func (g *Group[V]) backupsOf(v *view.View, key string, giving bool) []*view.MemberState {
	return g.successors(v, key, giving, true)
}

// successors returns the next g.backups members after key's owner on v's ring, this node
// left out with giving, and leaving members skipped with skipLeaving.
func (g *Group[V]) successors(v *view.View, key string, giving, skipLeaving bool) []*view.MemberState {
	if g.backups == 0 {
		return nil
	}
	failed := make([]string, 1, 1+2*MaxBackups)
	failed[0] = v.Owner(key)
	var out []*view.MemberState
	for len(out) < g.backups {
		name := v.Ring.Successor(key, failed...)
		if name == "" {
			break
		}
		failed = append(failed, name)
		if giving && name == v.Self {
			continue
		}
		st, ok := v.Members[name]
		if !ok || skipLeaving && st.Leaving.Load() {
			continue // it is given nothing to keep: the next one is
		}
		out = append(out, st)
	}
	return out
}

// BackupsOf returns the members that keep backups of key in this node's view, in order (none
// without backups).
func (g *Group[V]) BackupsOf(key string) []view.Member {
	var out []view.Member
	for _, st := range g.backupsOf(g.env.View.Load(), key, false) {
		out = append(out, st.Member)
	}
	return out
}

// KeepsBackup reports whether this node keeps a backup of key that it could take as its own
// value now (see fromBackup).
func (g *Group[V]) KeepsBackup(key string) bool {
	if g.backup == nil {
		return false
	}
	e, ok := g.backup.PeekAny(key)
	return ok && e.Version >= g.tombs.Floor(key)
}

// pushBackups gives the entries of keys that this node's store holds to their backups under
// the current view, one Backup call per member, all at once, and returns the names of the
// backups it could not give them to, sorted. A backup that answers it is leaving is given
// nothing and not named: it is no backup any more once it has left.
//
// The keys it could not give to every backup are owed (owe): follow gives them again, once a
// second, until every backup has them or the key is no longer this node's.
func (g *Group[V]) pushBackups(ctx context.Context, keys []string) []string {
	v := g.env.View.Load()
	unreached := g.pushTo(ctx, v, keys, func(key string) []*view.MemberState { return g.backupsOf(v, key, true) })
	g.owe(v, keys, unreached)
	return unreached
}

// Owed copies. A backup the owner could not reach when it gave a key's entry (cut off from it
// for a moment, a partition that healed before anyone was declared dead) would otherwise
// never be given it: no membership change makes it a new backup. Its owner's crash would then
// cost the key a fill. So the owner remembers such keys and gives them again (payOwed).
const (
	owedRetry = time.Second // how often owed copies are given again
	maxOwed   = 1 << 16     // keys remembered at most; past it a key is not (logged once a round)
)

// owe remembers the keys whose backups under v include a member named in unreached, and
// wakes follow to give them again.
func (g *Group[V]) owe(v *view.View, keys, unreached []string) {
	if len(unreached) == 0 {
		return
	}
	dropped := 0
	g.owedMu.Lock()
	for _, key := range keys {
		if !slices.ContainsFunc(g.backupsOf(v, key, true), func(st *view.MemberState) bool { return slices.Contains(unreached, st.Name) }) {
			continue
		}
		if len(g.owed) >= maxOwed {
			dropped++
			continue
		}
		if g.owed == nil {
			g.owed = make(map[string]struct{})
		}
		g.owed[key] = struct{}{}
	}
	g.owedMu.Unlock()
	if dropped > 0 {
		g.env.Log.Warn("corral: too many copies owed to backups; some are not given again", "group", g.name, "dropped", dropped)
	}
	g.viewChanged() // follow sets its retry
}

// owing reports whether some copies are owed.
func (g *Group[V]) owing() bool {
	g.owedMu.Lock()
	defer g.owedMu.Unlock()
	return len(g.owed) > 0
}

// payOwed gives the owed keys this node still owns to their backups under the current view;
// those it still cannot give to every backup stay owed (pushBackups).
func (g *Group[V]) payOwed(ctx context.Context) {
	g.owedMu.Lock()
	keys := make([]string, 0, len(g.owed))
	for key := range g.owed {
		keys = append(keys, key)
	}
	clear(g.owed)
	g.owedMu.Unlock()
	v := g.env.View.Load()
	keys = slices.DeleteFunc(keys, func(key string) bool { return v.Stopped || v.Owner(key) != v.Self })
	for len(keys) > 0 && ctx.Err() == nil {
		n := min(1024, len(keys))
		pctx, cancel := context.WithTimeout(ctx, g.env.PeerTimeout)
		g.pushBackups(pctx, keys[:n])
		cancel()
		keys = keys[n:]
	}
}

// pushTo gives the entries of keys that this node's store holds to the members to(key) names.
func (g *Group[V]) pushTo(ctx context.Context, v *view.View, keys []string, to func(key string) []*view.MemberState) []string {
	if g.backups == 0 {
		return nil
	}
	byMember := make(map[*view.MemberState][]*peerpb.Entry)
	for _, key := range keys {
		sts := to(key)
		if len(sts) == 0 {
			continue
		}
		e, ok := g.local.PeekAny(key)
		if !ok {
			continue // gone already (a write removed it, the store evicted it)
		}
		pe, err := g.encodeEntry(key, e)
		if err != nil {
			continue
		}
		for _, st := range sts {
			byMember[st] = append(byMember[st], pe)
		}
	}
	var mu sync.Mutex
	var unreached []string
	var wg sync.WaitGroup
	for st, entries := range byMember {
		wg.Go(func() {
			err := g.env.Router.UntilSilent(ctx, st.PeerAddr, func(ctx context.Context) error {
				_, err := g.env.Client.Backup(ctx, st.PeerAddr, &peerpb.BackupRequest{Header: g.env.Router.Header(ctx), Entries: entries})
				return err
			})
			g.backupsSent.Add(uint64(len(entries)))
			if err == nil || errors.Is(err, transport.ErrLeaving) {
				g.env.Log.Debug("corral: gave backups", "group", g.name, "member", st.Name, "entries", len(entries), "err", err)
				return
			}
			g.env.Log.Warn("corral: a backup was not given its copies", "group", g.name, "member", st.Name,
				"entries", len(entries), "err", err)
			mu.Lock()
			unreached = append(unreached, st.Name)
			mu.Unlock()
		})
	}
	wg.Wait()
	slices.Sort(unreached)
	return unreached
}

// stored is the store's fill.ReplicaConfig.Stored: the keys a fill stored go to their
// backups before its callers are woken.
func (g *Group[V]) stored(keys []string) {
	ctx, cancel := context.WithTimeout(context.Background(), g.env.PeerTimeout)
	defer cancel()
	g.pushBackups(ctx, keys)
}

// KeepBackup keeps pe, an entry its owner gave this node as one of the key's backups, unless
// a write newer than it is known here (the group's tombstones).
func (g *Group[V]) KeepBackup(pe *peerpb.Entry) (bool, error) {
	key := string(pe.GetKey())
	if err := g.env.Limits.Key(key); err != nil {
		return false, route.ToWire(err)
	}
	if err := version.Check(pe.GetVersion()); err != nil {
		return false, fmt.Errorf("%w: %v", transport.ErrInvalidArgument, err)
	}
	e, err := g.decodeEntry(pe)
	if err != nil {
		return false, fmt.Errorf("%w: %v", transport.ErrInvalidArgument, err)
	}
	if g.backup == nil {
		return false, nil // no backups here: a group configured otherwise on the owner
	}
	kept, err := g.backup.Put(key, e)
	g.env.Log.Debug("corral: kept a backup", "group", g.name, "key", key, "version", e.Version, "kept", kept)
	return kept, err
}

// fromBackup returns the backup this node keeps of key, when it may take it as its own value
// (no write newer than it is known here).
func (g *Group[V]) fromBackup(key string) (fill.Entry[V], bool) {
	if g.backup == nil {
		return fill.Entry[V]{}, false
	}
	e, ok := g.backup.PeekAny(key)
	if !ok || e.Version < g.tombs.Floor(key) {
		g.env.Log.Debug("corral: no backup to take", "group", g.name, "key", key, "held", ok)
		return fill.Entry[V]{}, false
	}
	g.promoted.Add(1)
	g.env.Log.Debug("corral: took a backup", "group", g.name, "key", key, "version", e.Version)
	return e, true
}

// rebackupView gives the entries this node owns under v to the backups they need under v,
// and takes the backups it now owns into its store. A key this node owned under prev too
// goes to the backups of v that prev did not have; a key it did not own under prev (prev
// nil, a backup it took, an entry handed off to it by a member that left or a warm pull's
// copy) goes to every backup of v: which members its former owner gave copies to is not
// known here — a leaver's backup may be this node itself, which now owns the key.
func (g *Group[V]) rebackupView(ctx context.Context, prev, v *view.View) {
	taken := map[string]bool{}
	for key, e := range g.backup.All() {
		if v.Owner(key) != v.Self || e.Version < g.tombs.Floor(key) {
			continue
		}
		if stored, _ := g.local.Put(key, e); stored {
			taken[key] = true
		}
	}
	var keys []string
	for key := range g.local.All() {
		if v.Owner(key) == v.Self {
			keys = append(keys, key)
		}
	}
	const batch = 1024 // entries per Backup call
	for len(keys) > 0 && ctx.Err() == nil {
		n := min(batch, len(keys))
		chunk := keys[:n]
		keys = keys[n:]
		pctx, cancel := context.WithTimeout(ctx, g.env.PeerTimeout)
		unreached := g.pushTo(pctx, v, chunk, func(key string) []*view.MemberState {
			now := g.backupsOf(v, key, true)
			if prev == nil || taken[key] || prev.Owner(key) != v.Self {
				return now
			}
			// The backups prev gave the key, leaving members included: a member's Leaving
			// flag is shared by every view that holds it (view.Next), so prev's may have
			// been set since, and a backup that is leaving now holds nothing for long. A
			// member is the same backup only in the same life (view.Next keeps its state):
			// one restarted in place, under its name and address, lost what it kept.
			was := g.successors(prev, key, true, false)
			return slices.DeleteFunc(now, func(st *view.MemberState) bool {
				return slices.Contains(was, st)
			})
		})
		cancel()
		g.owe(v, chunk, unreached) // a backup not reached now (one restarted, its group not made yet) is given them later
	}
}

// startBackups makes the group's backup store, for a group with backups.
func (g *Group[V]) startBackups(o Options) error {
	if g.backups == 0 {
		return nil
	}
	var err error
	g.backup, err = fill.NewReplica[V](nil, nil, fill.Config[V]{
		Name: g.name, MaxBytes: o.MaxBytes, Clock: g.env.Clock, Logger: g.env.Log, Rand: g.env.Rand,
	}, fill.ReplicaConfig{NextVersion: g.env.Versions.Next, Tombstones: g.tombs, Tags: g.env.Tags, VersionNow: g.env.Versions.Now})
	return err
}

// closeBackups closes the backup store (follow has ended).
func (g *Group[V]) closeBackups(ctx context.Context) error {
	if g.backup == nil {
		return nil
	}
	return g.backup.Close(ctx)
}
