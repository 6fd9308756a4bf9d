package peer

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
)

// delegate is every memberlist callback this package uses. memberlist calls them from its own
// goroutines, several at once, some with its node lock held: none blocks, and none calls back into
// memberlist.
//
//   - Delegate publishes this member's meta and carries Config.LocalState / MergeState in full
//     state exchanges (no user messages).
//   - AliveDelegate refuses members whose meta cannot be decoded or whose ring version differs.
//     memberlist asks it about every alive message, whether gossiped or merged, so a refused
//     member never enters the member list.
//   - MergeDelegate refuses a whole join when the other side knows such a member: the join
//     then fails on both sides, which the joiner logs and retries.
//   - ConflictDelegate logs a name claimed from two addresses.
//   - EventDelegate feeds the view.
//
// Telling a graceful leave from a failure: memberlist marks a member that announced its own
// departure Left and one declared dead by others Dead, but it calls NotifyLeave for both and does
// not say which (Node.State is not set in that call). So Membership.Leave first publishes meta
// with the leaving flag, waits for that to spread, then leaves; NotifyLeave reads the flag from
// the departing member's last meta.
type delegate struct {
	name        string
	ringVersion uint32
	log         *slog.Logger
	view        *view
	localState  func(join bool) []byte      // nil = none
	mergeState  func(buf []byte, join bool) // nil = none
	claims      claimants
	claimTTL    time.Duration

	mu sync.Mutex
	// guards meta, refused
	meta wireMeta
	// refused remembers the members refused so far and why, so that a member knocking at every
	// gossip round is logged at Warn once per reason, then at Debug.
	refused map[string]string
	// expectAddr and expectName are set while the reconnect loop exchanges state with a failed
	// member: a merge that lists another name at that address is refused.
	expectAddr, expectName string
}

// expect makes merges refuse a member other than name at addr, until called with "".
func (d *delegate) expect(addr, name string) {
	d.mu.Lock()
	d.expectAddr, d.expectName = addr, name
	d.mu.Unlock()
}

var (
	_ memberlist.Delegate         = (*delegate)(nil)
	_ memberlist.AliveDelegate    = (*delegate)(nil)
	_ memberlist.MergeDelegate    = (*delegate)(nil)
	_ memberlist.ConflictDelegate = (*delegate)(nil)
	_ memberlist.EventDelegate    = (*delegate)(nil)
)

// maxRefused bounds delegate.refused; past it the map starts over, and members are logged at
// Warn once more.
const maxRefused = 1024

func newDelegate(name string, meta Meta, log *slog.Logger, v *view) *delegate {
	return &delegate{
		name:        name,
		ringVersion: meta.RingVersion,
		log:         log,
		view:        v,
		meta:        wireMeta{Meta: meta},
		refused:     make(map[string]string),
	}
}

// setMeta replaces what NodeMeta returns; memberlist.UpdateNode then publishes it.
func (d *delegate) setMeta(w wireMeta) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.meta = w
}

// currentMeta returns what NodeMeta publishes.
func (d *delegate) currentMeta() wireMeta {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.meta
}

// NodeMeta returns the encoded meta; validate keeps it far below limit.
func (d *delegate) NodeMeta(limit int) []byte {
	return d.currentMeta().encode()
}

func (d *delegate) NotifyMsg([]byte)                           {}
func (d *delegate) GetBroadcasts(overhead, limit int) [][]byte { return nil }

// LocalState and MergeRemoteState carry Config.LocalState and Config.MergeState.
func (d *delegate) LocalState(join bool) []byte {
	if d.localState == nil {
		return nil
	}
	return d.localState(join)
}

func (d *delegate) MergeRemoteState(buf []byte, join bool) {
	if d.mergeState != nil && len(buf) > 0 {
		d.mergeState(buf, join)
	}
}

// check returns why n must be refused, or nil.
func (d *delegate) check(n *memberlist.Node) error {
	w, err := decodeMeta(n.Meta)
	if err != nil {
		return err
	}
	if w.RingVersion != d.ringVersion {
		return fmt.Errorf("ring version %d, this member's is %d (mixed versions would disagree about key owners)", w.RingVersion, d.ringVersion)
	}
	return nil
}

// refuse logs that n is refused because of err.
func (d *delegate) refuse(n *memberlist.Node, how string, err error) {
	reason := err.Error()
	d.mu.Lock()
	first := d.refused[n.Name] != reason
	if first {
		if len(d.refused) >= maxRefused {
			clear(d.refused)
		}
		d.refused[n.Name] = reason
	}
	d.mu.Unlock()
	level := slog.LevelDebug
	if first {
		level = slog.LevelWarn
	}
	d.log.Log(context.Background(), level, "refusing member", "member", n.Name, "addr", n.Address(), "via", how, "reason", reason)
}

// NotifyAlive refuses a member whose meta is undecodable or of another ring version.
func (d *delegate) NotifyAlive(n *memberlist.Node) error {
	if err := d.check(n); err != nil {
		d.refuse(n, "alive", err)
		return fmt.Errorf("peer: refusing %s: %w", n.Name, err)
	}
	return nil
}

// NotifyMerge refuses a join when the other side's live members include one this member would
// refuse, or, during a reconnect, when the failed member's address answers with another name.
func (d *delegate) NotifyMerge(peers []*memberlist.Node) error {
	d.mu.Lock()
	addr, name := d.expectAddr, d.expectName
	d.mu.Unlock()
	for _, n := range peers {
		if addr != "" && n.Address() == addr && n.Name != name {
			err := fmt.Errorf("member %s at %s, where %s failed: another process has its address", n.Name, addr, name)
			d.refuse(n, "reconnect", err)
			return fmt.Errorf("peer: refusing to merge: %w", err)
		}
		if n.State != memberlist.StateAlive && n.State != memberlist.StateSuspect {
			continue
		}
		if err := d.check(n); err != nil {
			d.refuse(n, "merge", err)
			return fmt.Errorf("peer: refusing to merge with a cluster that has %s: %w", n.Name, err)
		}
	}
	return nil
}

// NotifyConflict logs a name claimed from a second address, and remembers the claim: a member
// back at a new address (see claimants.go). memberlist calls it only for a claim that
// NotifyAlive accepted. The claim is remembered even while the known member is still live
// here (it came back before this member found it dead): it may not be repeated once it is.
func (d *delegate) NotifyConflict(existing, other *memberlist.Node) {
	d.log.Warn("member name claimed from two addresses; ignoring the newcomer until the known one has left, or been dead for DeadNodeReclaimTime",
		"member", existing.Name, "known_addr", existing.Address(), "new_addr", other.Address())
	w, err := decodeMeta(other.Meta)
	if err != nil {
		return
	}
	d.claims.add(Member{Name: other.Name, GossipAddr: other.Address(), Meta: w.Meta}, time.Now().Add(d.claimTTL))
}

// liveMember converts n. Its meta was checked by NotifyAlive before memberlist stored it.
func (d *delegate) liveMember(n *memberlist.Node) liveMember {
	lm := liveMember{Member: Member{Name: n.Name, GossipAddr: n.Address()}}
	w, err := decodeMeta(n.Meta)
	if err != nil {
		d.log.Error("undecodable meta of an admitted member", "member", n.Name, "err", err)
		return lm
	}
	lm.Meta, lm.Leaving = w.Meta, w.leaving
	return lm
}

func (d *delegate) NotifyJoin(n *memberlist.Node)   { d.view.join(d.liveMember(n)) }
func (d *delegate) NotifyLeave(n *memberlist.Node)  { d.view.leave(d.liveMember(n)) }
func (d *delegate) NotifyUpdate(n *memberlist.Node) { d.view.update(d.liveMember(n)) }
