package sim

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/corralcache/corral"
	"github.com/corralcache/corral/ring"
)

// violation is one broken guarantee in a history.
type violation struct {
	check string // "fills", "stale", "hang", "converge", "error"
	msg   string
}

func (v violation) String() string { return v.check + ": " + v.msg }

// maxViolationsShown bounds the violations of one check printed for one history.
const maxViolationsShown = 5

// check returns the guarantees the history broke.
func (h *history) check() []violation {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []violation
	add := func(check, format string, args ...any) {
		n := 0
		for _, v := range out {
			if v.check == check {
				n++
			}
		}
		if n < maxViolationsShown {
			out = append(out, violation{check, fmt.Sprintf(format, args...)})
		}
	}

	// 1. Fills per key, against one per ownership change and the named exceptions.
	owners := h.owners()
	fills := map[string]int{}
	failed := map[string]int{}
	for _, f := range h.fills {
		fills[f.key]++
		if f.failed {
			failed[f.key]++
		}
	}
	writes := map[string]int{}
	for _, w := range h.writes {
		writes[w.key]++
	}
	// A purge of a key's tag empties it, as a write does: one more fill each. A value filled
	// while the purge ran may go too (the purge's second round covers every member's clock
	// when the first reached it, and a slow member's may be ahead of the fill): one more.
	purged := map[string]int{}
	for _, p := range h.purges {
		purged[p.tag]++
	}
	for _, k := range h.gKeys() {
		writes[k] += purged[tagOf(k)]
	}
	for _, p := range h.purges {
		during := map[string]bool{}
		for _, f := range h.fills {
			if tagOf(f.key) == p.tag && f.at >= p.start && f.at <= p.end && !during[f.key] {
				during[f.key] = true
				writes[f.key]++
			}
		}
	}
	// A restart in place is an ownership change of the keys the restarted node owned: it
	// comes back empty. It costs nothing for the others' keys.
	restarts := h.restartsOfOwners()
	for _, key := range h.gKeys() {
		allowed := max(len(owners[key]), 1) + writes[key] + failed[key] + h.failovers[key] +
			restarts[key] + h.faults["partition side"] + h.faults["pause"]
		if fills[key] > allowed {
			add("fills", "%s filled %d times, allowed %d (owners %d, writes and purges %d, failed fills %d, failovers %d, restarts of its owners %d, partition sides %d, pauses %d)",
				key, fills[key], allowed, len(owners[key]), writes[key], failed[key], h.failovers[key],
				restarts[key], h.faults["partition side"], h.faults["pause"])
		}
	}

	// 2. No Get that started after a write returned nil sees an older value — unless the
	// views were split (a partition, a pause, a lost link, or a live member declared dead by
	// a live one, even after the fault that began it healed) while the write or the Get ran,
	// and the Get started before they agreed again:
	// a side does not hear of the other's writes until the heal (corral is available under
	// partition), and nothing stale is served once the sides have reconciled.
	splitEnds := h.splitEnds()
	exempt := func(w writeRec, g getRec) bool {
		for _, sp := range splitEnds {
			overlaps := (w.start < sp.end && w.end > sp.start) || (g.start < sp.end && g.end > sp.start)
			if overlaps && g.start < sp.end {
				return true
			}
		}
		return false
	}
	byKey := map[string][]writeRec{}
	for _, w := range h.writes {
		if w.err == nil {
			byKey[w.key] = append(byKey[w.key], w)
		}
	}
	for _, g := range h.gets {
		if g.err != nil {
			continue
		}
		var need int64
		for _, w := range byKey[g.key] {
			if w.end < g.start && w.gen > need && !exempt(w, g) {
				need = w.gen
			}
		}
		got, ok := genOf(g.value)
		if !ok {
			add("stale", "Get(%s) on %s returned %q, which no loader or Set made", g.key, g.node, g.value)
		} else if got < need {
			add("stale", "Get(%s) on %s at %v returned generation %d; the write of generation %d had returned", g.key, g.node, g.start, got, need)
		}
	}

	// 3. No Get past its bound. Errors other than the ones a fault explains are violations
	// too: a Get whose fill failed gets the loader's error, a cancelled one its ctx's.
	for _, g := range h.gets {
		// Each member on its way costs at most a silent owner's bound (a wait and an
		// unanswered probe: twice SilentPeerTimeout) and a warm pull.
		bound := fillTimeout + time.Duration(g.membersAsked)*(2*silentPeerTimeout+peekTimeout)
		if d := g.end - g.start; d > bound && !g.cancelled {
			add("hang", "Get(%s) on %s took %v (bound %v)", g.key, g.node, d, bound)
		}
		if g.err != nil && !allowedGetError(g) {
			add("error", "Get(%s) on %s at %v: %v", g.key, g.node, g.start, g.err)
		}
	}

	// 4. Views agree within the bound once every fault healed.
	if h.settled < 0 {
		add("converge", "views did not agree within %v of the last heal", settleBound)
	}

	// 5. A node that crashed, or whose Close returned, answers every Get with ErrClosed.
	for _, g := range h.gets {
		if g.closedAt >= 0 && g.start >= g.closedAt && g.err == nil {
			add("closed", "Get(%s) on %s at %v returned %q: the node closed at %v", g.key, g.node, g.start, g.value, g.closedAt)
		}
	}

	// 6. A write names no member as unreached once every live view has dropped it for good.
	for _, w := range h.writes {
		var ue *corral.UnreachedError
		if !errors.As(w.err, &ue) {
			continue
		}
		for _, m := range ue.Members {
			if h.departedForAll(m, w.start, w.end) {
				add("unreached", "%s of %s at %v named %s unreached, whom every live view had dropped: %v",
					map[bool]string{true: "Remove", false: "write"}[w.remove], w.key, w.start, m, w.err)
			}
		}
	}

	// 7. Moves keep stale values: in group s every value is servable for an hour after its
	// write, so a Get that finds none after a write of it returned lost it — unless a crash
	// (a lost store), a split, or a later removal or failed write explains it.
	for _, g := range h.gets {
		if g.group != "s" || !errors.Is(g.err, corral.ErrNotFound) {
			continue
		}
		if w, ok := h.lostBy(g); ok && !h.failedOver(g.key, w.start, g.end) {
			add("lost", "Get(%s) on %s at %v found nothing; the write of generation %d returned at %v", g.key, g.node, g.start, w.gen, w.end)
		}
	}

	// 10. Purges: no Get that started after RemoveByTag(t) returned nil returns a value of t
	// whose making (a fill's start, a write's) began before the purge did — unless the views
	// were split while the purge or the Get ran (the exception writes have).
	for _, g := range h.gets {
		if g.err != nil || g.group != "g" {
			continue
		}
		made, ok := h.madeAt[g.value]
		if !ok {
			continue
		}
		for _, p := range h.purges {
			if p.err != nil || p.tag != tagOf(g.key) || p.end >= g.start || made >= p.start {
				continue
			}
			if h.splitDuring(p.start, g.end) {
				continue
			}
			call := "Get"
			if g.batch {
				call = "GetMany" // of this key and others
			}
			add("purged", "%s(%s) on %s at %v–%v returned %q, made at %v, tagged %s: the purge of %s at %v–%v had returned",
				call, g.key, g.node, g.start, g.end, g.value, made, p.tag, p.tag, p.start, p.end)
			break
		}
	}

	// 8. Leases: at any instant, a key's live refresh or fill tokens are at most one per
	// owner it had (one extra per ownership change), beside the exceptions of the fill check.
	for _, l := range h.leases {
		live := 0
		for _, o := range h.leases {
			if o.key == l.key && o.granted <= l.granted && l.granted < h.leaseEnd(o) {
				live++
			}
		}
		allowed := max(len(owners[l.key]), 1) + h.failovers[l.key] + restarts[l.key] + h.faults["partition side"] + h.faults["pause"]
		if live > allowed && !h.splitDuring(l.granted, l.granted) {
			add("leases", "%d live tokens of %s at %v (the newest granted on %s), allowed %d (owners %d, failovers %d, restarts of its owners %d)",
				live, l.key, l.start, l.node, allowed, len(owners[l.key]), h.failovers[l.key], restarts[l.key])
		}
	}
	// 9. Backups: in a history whose groups keep backups, the crash of a key's owner costs
	// the key no fill, while it is the only fault: from the crash to the next fault of any
	// kind (a crash, a leave, a join, a restart, a partition, a pause, a slow link) and the
	// end of the workload. A key written, purged, failed or filled in the last moments before
	// the crash is left out: its value was on its way, not yet held.
	if h.backups > 0 {
		for _, v := range h.crashFills() {
			add("crash fills", "%s", v)
		}
	}
	return out
}

// crashFills lists the fills of keys whose owner crashed, in the windows check 9 judges.
// h.mu must be held.
func (h *history) crashFills() []string {
	var out []string
	for i, c := range h.life {
		if !c.crash || !c.gone {
			continue
		}
		end := workload
		for _, e := range h.life[i+1:] {
			end = min(end, e.at)
			break
		}
		for _, sp := range h.splits {
			if sp.start >= c.at {
				end = min(end, sp.start)
			} else if sp.heal < 0 || sp.heal > c.at-time.Second {
				end = -1 // a fault that overlaps the crash: not the only one
			}
		}
		for _, e := range h.life[:i] {
			if e.at > c.at-time.Second {
				end = -1 // a change just before: the backups may be moving
			}
		}
		// Joins are not life events: a view that grows inside the window ends it too.
		for _, views := range h.viewLog {
			for j := 1; j < len(views); j++ {
				if views[j].at > c.at && views[j].at < end && len(views[j].members) > len(views[j-1].members) {
					end = views[j].at
				}
			}
		}
		if end <= c.at {
			continue
		}
		r := h.ringBefore(c.name, c.at)
		if r == nil {
			continue
		}
		// The members that crashed before and are still down: a key whose backup is one of
		// them lost its owner and its backup together (two adjacent members down at once,
		// the one case the promise leaves out).
		down := map[string]bool{}
		for _, e := range h.life[:i] {
			down[e.name] = e.gone && e.crash
		}
		for k := range keysPerRun {
			key := key(k)
			if r.Owner(key) != c.name || !h.quietBefore(key, c.name, c.at, end) || h.backupDown(r, key, down) {
				continue
			}
			for _, f := range h.fills {
				if f.key == key && f.at > c.at && f.at < end {
					out = append(out, fmt.Sprintf("%s filled on %s at %v after its owner %s crashed at %v (backups: %d)",
						key, f.node, f.at, c.name, c.at, h.backups))
					break
				}
			}
		}
	}
	return out
}

// backupDown reports whether one of key's backups on r — the h.backups members after its
// owner — is down.
func (h *history) backupDown(r *ring.Ring, key string, down map[string]bool) bool {
	rest := r.Without(r.Owner(key))
	for range h.backups {
		if rest.Len() == 0 {
			return false
		}
		b := rest.Owner(key)
		if down[b] {
			return true
		}
		rest = rest.Without(b)
	}
	return false
}

// ringBefore returns the ring of the view a member other than name held just before t, in
// which name is a member. h.mu must be held.
func (h *history) ringBefore(name string, t time.Duration) *ring.Ring {
	for node, views := range h.viewLog {
		if node == name {
			continue
		}
		var last []string
		for _, v := range views {
			if v.at >= t {
				break
			}
			last = v.members
		}
		if slices.Contains(last, name) {
			r, err := ring.New(last, ring.DefaultConfig())
			if err == nil {
				return r
			}
		}
	}
	return nil
}

// quietBefore reports whether key was held by owner, settled, before owner crashed at t: the
// last of its fills, writes and purges before t was a fill there or a Set that returned nil
// (so the owner held a value, and had given it to its backups), well before t, with no write,
// purge or failed fill of it from then to end. A Remove or a purge of its tag after the last
// fill leaves the key held nowhere: its next fill is no crash's cost. h.mu must be held.
func (h *history) quietBefore(key, owner string, t, end time.Duration) bool {
	const settle = 500 * time.Millisecond
	held, last := false, time.Duration(-1) // by the event before t that ended last
	for _, f := range h.fills {
		if f.key != key {
			continue
		}
		if f.at > t-settle && f.at < t || f.failed && f.at < end {
			return false
		}
		if f.at < t && f.at > last {
			held, last = f.node == owner && !f.failed, f.at
		}
	}
	for _, w := range h.writes {
		if w.key != key {
			continue
		}
		if w.end > t-settle && w.start < end {
			return false
		}
		if w.end < t && w.end > last {
			held, last = !w.remove && w.err == nil, w.end
		}
	}
	for _, p := range h.purges {
		if p.tag != tagOf(key) {
			continue
		}
		if p.end > t-settle && p.start < end {
			return false
		}
		if p.end < t && p.end > last {
			held, last = false, p.end
		}
	}
	return held
}

// restartsOfOwners counts, per key, the restarts of nodes that owned the key in some view.
// h.mu must be held.
func (h *history) restartsOfOwners() map[string]int {
	owned := h.ownedAnywhere()
	out := map[string]int{}
	for name, n := range h.restarts {
		for k := range owned[name] {
			out[k] += n
		}
	}
	return out
}

// departedForAll reports whether member m was gone (crashed or leaving, with no restart) for
// the whole of [from, to], and every node not closed at from — leaving ones too: they still
// pass writes on — had dropped it from its view by then. h.mu must be held.
func (h *history) departedForAll(m string, from, to time.Duration) bool {
	goneSince := time.Duration(-1)
	for _, e := range h.life {
		if e.name != m || e.at > to {
			continue
		}
		if !e.gone {
			if e.at >= from {
				return false // back during the write
			}
			goneSince = -1
			continue
		}
		goneSince = e.at
	}
	if goneSince < 0 || goneSince > from {
		return false
	}
	for name, views := range h.viewLog {
		if name == m || h.closedAt(name, from) {
			continue
		}
		var latest []string
		for _, v := range views {
			if v.at > from {
				break
			}
			latest = v.members
		}
		if latest == nil || slices.Contains(latest, m) {
			return false
		}
	}
	return true
}

// closedAt reports whether the node called name had closed (crashed, or its Close returned)
// at t, and not restarted since. h.mu must be held.
func (h *history) closedAt(name string, t time.Duration) bool {
	closed := time.Duration(-1)
	for _, c := range h.closed {
		if c.name == name && c.closedAt <= t {
			closed = max(closed, c.closedAt)
		}
	}
	if closed < 0 {
		return false
	}
	for _, e := range h.life {
		if e.name == name && !e.gone && e.at > closed && e.at <= t {
			return false // restarted since
		}
	}
	return true
}

// lostBy returns the write that Get g of group s should have found, when nothing excuses
// the miss. h.mu must be held.
func (h *history) lostBy(g getRec) (writeRec, bool) {
	var last writeRec
	found := false
	for _, w := range h.writes {
		if w.key != g.key || w.end >= g.start || w.err != nil {
			continue
		}
		if !found || w.end > last.end {
			last, found = w, true
		}
	}
	if !found || last.remove {
		return last, false
	}
	for _, w := range h.writes {
		if w.key == g.key && w.start > last.start && w.start < g.end && (w.remove || w.err != nil) {
			return last, false // removed since, or a write whose outcome is open
		}
	}
	for _, e := range h.life {
		if e.at >= last.start && e.at <= g.end && h.crashed(e) {
			return last, false
		}
	}
	if h.splitDuring(last.start, g.end) {
		return last, false
	}
	return last, true
}

// crashed reports whether life event e is a crash or a restart (not a graceful leave).
// h.mu must be held.
func (h *history) crashed(e lifeEvent) bool { return e.crash || !e.gone }

// splitDuring reports whether the views were split at some instant of [from, to]. h.mu must
// be held.
func (h *history) splitDuring(from, to time.Duration) bool {
	for _, sp := range h.splitEnds() {
		if sp.start <= to && sp.end >= from {
			return true
		}
	}
	return false
}

// leaseEnd is when token l stopped being surely live: its FillSet or its lapse, or a write
// of its key that started after its grant and was applied (it revoked it). h.mu must be held.
func (h *history) leaseEnd(l leaseRec) time.Duration {
	end := l.end
	for _, w := range h.writes {
		var ue *corral.UnreachedError
		applied := w.err == nil || errors.As(w.err, &ue)
		if w.key == l.key && applied && w.start > l.start && w.start < end {
			end = w.start
		}
	}
	return end
}

// failedOver reports whether a request for key went around its owner (failed over to a
// successor) between from and to: a value written through the successor while the owner was
// routed around lives there alone, and the owner, with no source behind group s, has none.
// h.mu must be held.
func (h *history) failedOver(key string, from, to time.Duration) bool {
	for _, at := range h.failoverAt[key] {
		if at >= from && at <= to {
			return true
		}
	}
	return false
}

// longestGet returns how long the longest Get that was not cancelled took.
func (h *history) longestGet() time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	var d time.Duration
	for _, g := range h.gets {
		if !g.cancelled {
			d = max(d, g.end-g.start)
		}
	}
	return d
}

// splitEnds returns each split as the span from its start until the views agreed again after
// its heal (for ever, when they never did). h.mu must be held.
func (h *history) splitEnds() []span {
	var out []span
	for _, sp := range h.splits {
		end := time.Duration(1 << 62)
		if sp.heal >= 0 {
			for _, a := range h.agreed {
				if a.start <= sp.heal && (a.end < 0 || a.end > sp.heal) {
					end = sp.heal // they agreed through the heal
					break
				}
				if a.start >= sp.heal {
					end = a.start
					break
				}
			}
		}
		out = append(out, span{start: sp.start, end: end})
	}
	// A live member declared dead by a live one splits the views from then until they agree
	// again, whatever fault (or none) began it.
	for _, d := range h.drops {
		if h.liveAt(d.by, d.at) && h.liveAt(d.of, d.at) {
			out = append(out, span{start: d.at, end: h.agreedAfter(d.at)})
		}
	}
	return out
}

// agreedAfter returns when the views agreed again after a drop at t (for ever, when they
// never did). The monitor samples every 50 ms: when it still saw agreement well after t, the
// drop was undone before it looked. h.mu must be held.
func (h *history) agreedAfter(t time.Duration) time.Duration {
	const sample = 100 * time.Millisecond
	for _, a := range h.agreed {
		if a.start <= t && (a.end < 0 || a.end > t+sample) {
			return t + sample
		}
		if a.start > t {
			return a.start
		}
	}
	return time.Duration(1 << 62)
}

// allowedGetError reports whether a failed Get failed for a reason the history gives it: its
// own ctx ended (a cancelled Get), the loader failed, or its node was closing.
func allowedGetError(g getRec) bool {
	var fe *corral.FillError
	switch {
	case g.cancelled:
		return true
	case errors.Is(g.err, corral.ErrClosed):
		return true
	case errors.As(g.err, &fe) && strings.Contains(fe.Err.Error(), "source unavailable"):
		return true
	case g.group == "s" && errors.Is(g.err, corral.ErrNotFound):
		return true // group s has no source: a key not written, or removed (check 7 says when it was lost)
	}
	return false
}

// traceText returns the history's trace, sorted by time.
func (h *history) traceText() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	tr := slices.Clone(h.trace)
	sort.SliceStable(tr, func(i, j int) bool { return tr[i].at < tr[j].at })
	var b strings.Builder
	for _, e := range tr {
		b.WriteString(e.String())
		b.WriteByte('\n')
	}
	return b.String()
}
