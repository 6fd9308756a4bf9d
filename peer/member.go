package peer

import (
	"cmp"
	"fmt"
	"slices"
)

// Member is one live member of the cluster as this member sees it.
type Member struct {
	// Name is unique in the cluster.
	Name string
	// GossipAddr is the "ip:port" the member advertises for gossip; it is usable as a seed.
	GossipAddr string
	// Meta is what the member published.
	Meta Meta
	// Leaving is set once the member has started a graceful leave (StartLeaving or Leave):
	// it is still live and serving, but is going away, so it should be given nothing to keep.
	Leaving bool
}

// equal reports whether a and b describe the same member identically. Meta.StartedAt is
// compared with Equal, as time values should be.
func (a Member) equal(b Member) bool {
	return a.Name == b.Name && a.GossipAddr == b.GossipAddr && a.Leaving == b.Leaving &&
		a.Meta.PeerAddr == b.Meta.PeerAddr && a.Meta.RingVersion == b.Meta.RingVersion &&
		a.Meta.PeerTLS == b.Meta.PeerTLS && a.Meta.StartedAt.Equal(b.Meta.StartedAt)
}

// sortMembers sorts ms by Name, the order every list of members in this package has.
func sortMembers(ms []Member) {
	slices.SortFunc(ms, func(a, b Member) int { return cmp.Compare(a.Name, b.Name) })
}

// EventKind says what happened to a member.
type EventKind int

const (
	// EventJoin: a member became live (it is new, or it was left or dead before).
	EventJoin EventKind = iota + 1
	// EventLeave: a member left gracefully (it called Leave; memberlist state Left).
	EventLeave
	// EventFail: a member was declared dead by failure detection (memberlist state Dead), or it
	// left but this member never heard that it had started leaving (see Membership.Leave).
	EventFail
	// EventUpdate: a live member published new Meta.
	EventUpdate
)

// String returns "join", "leave", "fail" or "update".
func (k EventKind) String() string {
	switch k {
	case EventJoin:
		return "join"
	case EventLeave:
		return "leave"
	case EventFail:
		return "fail"
	case EventUpdate:
		return "update"
	default:
		return fmt.Sprintf("EventKind(%d)", int(k))
	}
}

// Event is one change of one member, delivered to Config.OnEvent.
type Event struct {
	Kind EventKind
	// Member is the member as it was described by the message that caused the event: for
	// EventLeave and EventFail, its last known address and Meta.
	Member Member
}

// String returns e.g. "join node-a (10.0.0.7:7946)".
func (e Event) String() string {
	return fmt.Sprintf("%s %s (%s)", e.Kind, e.Member.Name, e.Member.GossipAddr)
}
