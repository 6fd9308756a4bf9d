package peer

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"
)

// view is this member's live set, kept from memberlist's events, and the delivery of its changes
// to Config.OnEvent and Config.OnChange.
//
// memberlist calls the recording methods (join, leave, update) with its node lock held, from
// several of its goroutines; they only record and signal, never block and never call back into
// memberlist. One goroutine, run, delivers to the callbacks.
type view struct {
	self     string // this member's name
	onChange func([]Member)
	onEvent  func(Event)
	log      *slog.Logger

	// dirty holds a signal when members or pending changed since run last looked. One pending
	// signal is enough, because run takes everything recorded so far at once: that is how bursts
	// coalesce into one OnChange call.
	dirty chan struct{}

	mu sync.Mutex
	// guards members, pending
	members map[string]liveMember
	// pending are events recorded but not yet delivered, oldest first; only kept when onEvent
	// is set.
	pending []Event
	// failed are the members that failed (not left) and have not come back, by name: where
	// they were and when they failed, for the reconnect loop; nil (nothing kept) without one,
	// since only its failedSince forgets them.
	failed map[string]failure
}

// failure is a member that failed: its name, gossip address and when this member found out.
type failure struct {
	name, addr string
	at         time.Time
}

// liveMember is a member of the live set.
type liveMember struct {
	Member
}

func newView(self string, onChange func([]Member), onEvent func(Event), log *slog.Logger) *view {
	return &view{
		self:     self,
		onChange: onChange,
		onEvent:  onEvent,
		log:      log,
		dirty:    make(chan struct{}, 1),
		members:  make(map[string]liveMember),
	}
}

// recordLocked notes e for delivery. v.mu must be held.
func (v *view) recordLocked(e Event) {
	v.log.Debug("member event", "event", e.Kind.String(), "member", e.Member.Name, "addr", e.Member.GossipAddr, "members", len(v.members))
	if v.onEvent != nil {
		v.pending = append(v.pending, e)
	}
	select {
	case v.dirty <- struct{}{}:
	default:
	}
}

// join records that lm became live.
func (v *view) join(lm liveMember) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.members[lm.Name] = lm
	delete(v.failed, lm.Name)
	v.recordLocked(Event{Kind: EventJoin, Member: lm.Member})
}

// leave records that lm left or died. A graceful leave is one whose meta said it was leaving,
// in the message that caused this event or in an earlier one.
//
// This member's own leave (memberlist reports it when Leave broadcasts) is not recorded: this
// member stays in its own live set until Close, because it keeps serving, handing keys off and
// draining, after it has left; peers are the ones that drop it.
func (v *view) leave(lm liveMember) {
	if lm.Name == v.self {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	old, ok := v.members[lm.Name]
	delete(v.members, lm.Name)
	kind := EventFail
	if lm.Leaving || (ok && old.Leaving) {
		kind = EventLeave
	}
	if kind == EventFail && v.failed != nil {
		v.failed[lm.Name] = failure{name: lm.Name, addr: lm.GossipAddr, at: time.Now()}
	}
	v.recordLocked(Event{Kind: kind, Member: lm.Member})
}

// update records new meta of a live member. A change of the leaving flag alone makes no
// event — the leave that follows reports it — but OnChange reports it.
func (v *view) update(lm liveMember) {
	v.mu.Lock()
	defer v.mu.Unlock()
	old, ok := v.members[lm.Name]
	v.members[lm.Name] = lm
	if ok && old.Member.equal(lm.Member) {
		return
	}
	if ok {
		flagOnly := old.Member
		flagOnly.Leaving = lm.Leaving
		if flagOnly.equal(lm.Member) {
			select {
			case v.dirty <- struct{}{}:
			default:
			}
			return
		}
	}
	v.recordLocked(Event{Kind: EventUpdate, Member: lm.Member})
}

// failedSince returns the members that failed after since and have not come back, sorted by
// name, and forgets the ones that failed earlier.
func (v *view) failedSince(since time.Time) []failure {
	v.mu.Lock()
	defer v.mu.Unlock()
	var fs []failure
	for name, f := range v.failed {
		if f.at.Before(since) {
			delete(v.failed, name)
			continue
		}
		fs = append(fs, f)
	}
	slices.SortFunc(fs, func(a, b failure) int { return strings.Compare(a.name, b.name) })
	return fs
}

// list returns the live set sorted by Name.
func (v *view) list() []Member {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.listLocked()
}

func (v *view) listLocked() []Member {
	ms := make([]Member, 0, len(v.members))
	for _, lm := range v.members {
		ms = append(ms, lm.Member)
	}
	sortMembers(ms)
	return ms
}

// has reports whether the member called name is live.
func (v *view) has(name string) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	_, ok := v.members[name]
	return ok
}

// len returns the size of the live set.
func (v *view) len() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.members)
}

// run delivers recorded changes until ctx is done. Whatever is still undelivered then is
// dropped: after Close no callback runs.
func (v *view) run(ctx context.Context) {
	var last []Member
	delivered := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-v.dirty:
		}
		v.mu.Lock()
		events := v.pending
		v.pending = nil
		ms := v.listLocked()
		v.mu.Unlock()

		for _, e := range events {
			if ctx.Err() != nil {
				return
			}
			v.onEvent(e)
		}
		if v.onChange == nil || ctx.Err() != nil {
			continue
		}
		if delivered && slices.EqualFunc(last, ms, Member.equal) {
			continue
		}
		last, delivered = ms, true
		v.onChange(slices.Clone(ms))
	}
}
