package write

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/corralcache/corral/fill"
	"github.com/corralcache/corral/internal/route"
	"github.com/corralcache/corral/internal/version"
	"github.com/corralcache/corral/internal/view"
	"github.com/corralcache/corral/peer"
	"github.com/corralcache/corral/transport"
	"github.com/corralcache/corral/transport/peerpb"
)

// Config is what a Writer writes and tells with. Every field is required; the pointers are
// the node's.
type Config struct {
	Self   string                     // this node's name
	View   *atomic.Pointer[view.View] // this node's current view
	Router *route.Router
	Client *transport.Client
	Clock  *version.Clock
	Log    *slog.Logger
	// Live returns the live set of this node's membership, a step ahead of the view (nil
	// while the node starts).
	Live func() []peer.Member
	// LiveCount returns the size of that live set, this node included, without making it
	// (0 while the node starts). Optional: nil counts Live's.
	LiveCount func() int
	// PeerTLS says whether this node's peer port speaks TLS: a member whose port does not
	// speak the same can be neither told nor hold this node's copies.
	PeerTLS bool
	// PeerTimeout bounds one exchange of a group's writes (Exchange).
	PeerTimeout time.Duration
	// Tags is the node's registry of tags and their purges, shared by every group's stores.
	Tags *fill.Tags
}

// Writer makes the writes of this node and tells every member it knows of (see the package
// documentation). Its methods are safe for concurrent use.
type Writer struct {
	cfg        Config
	strangers  Strangers
	departures Departures
}

// New returns a Writer over cfg.
func New(cfg Config) *Writer { return &Writer{cfg: cfg} }

// Strangers returns the peers that asked this node for something before they were in its
// view, which it passes writes on to.
func (w *Writer) Strangers() *Strangers { return &w.strangers }

// Departures returns the members this node heard leave the cluster gracefully.
func (w *Writer) Departures() *Departures { return &w.departures }

// UnreachedError reports members that could not be told of a write that the owner applied.
type UnreachedError struct {
	Members []string // sorted
	Err     error
}

// ErrNotTold is the Err of an UnreachedError; the log says why each member was not told.
var ErrNotTold = errors.New("not reached")

func (e *UnreachedError) Error() string {
	return fmt.Sprintf("corral: write applied, but members %s could not be told of it: %v", strings.Join(e.Members, ", "), e.Err)
}

func (e *UnreachedError) Unwrap() error { return e.Err }

// Apply is a write on the key's owner: given the version the writer drew, it applies the
// write and returns the version the owner applied — the same one, or for a FillSet under a
// lease the owner's own (the lease, not the version, keeps a late duplicate out), or 0 when
// nothing changed (that lease was no longer live); then nobody is told. Local runs it on
// this node, Remote on the member st.
type Apply struct {
	Local  func(version uint64) (uint64, error)
	Remote func(ctx context.Context, st *view.MemberState, version uint64) (uint64, error)
}

// maxRedraws bounds how many times a write is written again above a newer version a member
// held (see Write).
const maxRedraws = 3

// Write applies a write of group/key on the key's owner, then tells every member of it. The
// write's version is drawn here, by the writer: every attempt — on the owner, and on its
// successors when it fails over — carries the same one, so a late duplicate is harmless.
// invalidate applies the write to this node's own copies, in either store.
//
// A member told may answer that it holds the key at a newer version than the drawn one: a
// write this writer never heard of, made on the other side of a split of the views (or by a
// node whose clock is ahead, before any message carried that clock here). That write returned
// before this one started or runs concurrently with it (one that starts after this one
// returns is told to this writer first), so this one may come last: it is written again at
// a version above the newer one, at most maxRedraws times (writers racing each other keep
// passing each other; either order is right for writes that overlap).
//
// The owner's error comes back as it is; members not told, as an *UnreachedError.
func (w *Writer) Write(ctx context.Context, group, key string, apply Apply, invalidate func(key string, version uint64)) error {
	for redraw := 0; ; redraw++ {
		drawn := w.cfg.Clock.Next()
		var applied uint64
		_, err := w.cfg.Router.OnOwner(ctx, key, false,
			func() error { var err error; applied, err = apply.Local(drawn); return err },
			func(ctx context.Context, st *view.MemberState) error {
				var err error
				applied, err = apply.Remote(ctx, st, drawn)
				return err
			})
		if err != nil {
			return err
		}
		if applied == 0 {
			return nil // nothing changed (a FillSet whose lease was not live): nobody to tell
		}
		if err := version.Check(applied); err != nil {
			return err // an owner that answered a version no clock can pass
		}
		w.cfg.Clock.Observe(applied)
		if w.cfg.Log.Enabled(ctx, slog.LevelDebug) { // its arguments cost allocations even when dropped
			w.cfg.Log.Debug("corral: wrote", "group", group, "key", key, "version", applied)
		}
		invalidate(key, applied) // this node's own copies, in either store
		unreached, newer := w.Tell(ctx, group, key, applied, []string{w.cfg.Self})
		if len(unreached) > 0 {
			return &UnreachedError{Members: unreached, Err: ErrNotTold}
		}
		// A FillSet applied at the owner's own version is kept out by its lease, not by
		// versions: it is not written again.
		if newer == 0 || applied != drawn || redraw == maxRedraws {
			return nil
		}
		w.cfg.Clock.Observe(newer)
		w.cfg.Log.Debug("corral: writing again above a newer version", "group", group, "key", key, "version", applied, "newer", newer)
	}
}

// known returns the members this node knows of, by name, with their peer addresses, but
// itself: its view, the live set of its membership (which may be a step ahead of the view),
// and the strangers that asked it for keys before they were in its view.
func (w *Writer) known() map[string]string {
	v := w.cfg.View.Load()
	out := make(map[string]string, len(v.Members))
	for name, st := range v.Members {
		if v.Excluded[name] != view.ExcludedPeerTLS { // it cannot be reached, nor hold this node's copies
			out[name] = st.PeerAddr
		}
	}
	for _, m := range w.cfg.Live() {
		if m.Meta.PeerTLS == w.cfg.PeerTLS {
			out[m.Name] = m.Meta.PeerAddr
		}
	}
	for name, addr := range w.strangers.list(time.Now()) {
		if _, ok := out[name]; !ok {
			out[name] = addr
		}
	}
	delete(out, v.Self)
	for name, addr := range out {
		if addr == "" {
			delete(out, name)
		}
	}
	return out
}

// alone reports whether told already lists every member this node knows of (known): a
// node on its own has nobody to tell, and finds so without building known's map (a write on
// one node is a few allocations cheaper for it).
func (w *Writer) alone(told []string) bool {
	v := w.cfg.View.Load()
	for name, st := range v.Members {
		if name != v.Self && st.PeerAddr != "" && !slices.Contains(told, name) {
			return false
		}
	}
	// The live set always holds this node: one member is this node alone.
	if w.cfg.LiveCount == nil || w.cfg.LiveCount() > 1 {
		for _, m := range w.cfg.Live() {
			if m.Name != v.Self && m.Meta.PeerAddr != "" && !slices.Contains(told, m.Name) {
				return false
			}
		}
	}
	return w.strangers.none()
}

// Tell tells every member this node knows of and told does not list of the write of
// group/key at version v, in parallel, each of them passing it on to the members they know
// of in turn, and returns the names of the members that could not be told, sorted, and the
// largest version of the key above v that a member told held (0 when none). The
// write then reaches every member that any member reached knows of: when views disagree
// for a moment — a member has just joined, say — a member that one view lacks is told by
// one that has it.
func (w *Writer) Tell(ctx context.Context, group, key string, v uint64, told []string) (unreached []string, newer uint64) {
	if w.alone(told) {
		return nil, 0 // before the log's fields and the request are made
	}
	return w.tell(ctx, v, told, []any{"group", group, "key", key}, func(all []string) *peerpb.InvalidateRequest {
		return &peerpb.InvalidateRequest{Header: w.cfg.Router.Header(ctx), Group: group, Key: []byte(key), Version: v, Told: all}
	})
}

// tell is Tell of the request req makes for the members told (all): a write's or a purge's.
// what names it in the log.
func (w *Writer) tell(ctx context.Context, v uint64, told []string, what []any, req func(all []string) *peerpb.InvalidateRequest) (unreached []string, newer uint64) {
	if w.alone(told) {
		return nil, 0
	}
	known := w.known()
	all := slices.Clone(told)
	var targets []string
	for name := range known {
		if !slices.Contains(told, name) {
			targets = append(targets, name)
			all = append(all, name)
		}
	}
	if len(targets) == 0 {
		return nil, 0
	}
	slices.Sort(all)
	var (
		wg sync.WaitGroup
		mu sync.Mutex
	)
	now := time.Now()
	for _, name := range targets {
		if w.cfg.Router.Breakers().Skip(known[name], now) {
			// Found unreachable a moment ago: say so at once rather than wait on it.
			mu.Lock()
			unreached = append(unreached, name)
			mu.Unlock()
			continue
		}
		wg.Go(func() {
			var resp *peerpb.InvalidateResponse
			// Bounded like a Get: a silent member (paused, cut off) is reported unreached
			// after about twice SilentPeerTimeout, not after the whole call timeout.
			err := w.cfg.Router.UntilSilent(ctx, known[name], func(ctx context.Context) error {
				var err error
				resp, err = w.cfg.Client.Invalidate(ctx, known[name], req(all))
				return err
			})
			if transport.IsUnreachable(err) {
				w.cfg.Router.Breakers().Trip(known[name], time.Now())
			}
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil || errors.Is(err, transport.ErrUnknownGroup):
			case w.departures.has(name):
				// It left the cluster while it was being told (its connection closes as
				// it leaves the view): a member that has left serves none of its copies,
				// so this write did not fail to reach a member that could serve an older
				// value. (One found dead is named: it may be alive on the other side of a
				// split.)
				w.cfg.Log.Debug("corral: member left while told of a write", append(append([]any{"member", name}, what...), "err", err)...)
			default:
				w.cfg.Log.Warn("corral: member not told of a write", append(append([]any{"member", name}, what...), "err", err)...)
				unreached = append(unreached, name)
			}
			unreached = append(unreached, resp.GetUnreached()...)
			if nv := resp.GetNewerVersion(); nv > v && version.Check(nv) == nil {
				newer = max(newer, nv)
			}
		})
	}
	wg.Wait()
	slices.Sort(unreached)
	return slices.Compact(unreached), newer
}
