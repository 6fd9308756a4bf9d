package view

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/corralcache/corral/peer"
)

// Member is one member of the cluster as a node sees it.
type Member struct {
	Name       string
	GossipAddr string // "ip:port"
	PeerAddr   string // "ip:port"
}

// Of returns the member that the membership's m describes.
func Of(m peer.Member) Member {
	return Member{Name: m.Name, GossipAddr: m.GossipAddr, PeerAddr: m.Meta.PeerAddr}
}

// MemberState is one live member. Gone is cancelled when it leaves the view, which aborts
// requests in flight to it so that they fail over at once instead of waiting out their
// deadline.
type MemberState struct {
	Member
	Started time.Time   // when its process started, as its meta says
	Leaving atomic.Bool // it has started a graceful leave: it is given nothing to keep
	Gone    context.Context
	Cancel  context.CancelFunc
}

// newState returns the state of a member that has just entered the view.
func newState(m Member, started time.Time) *MemberState {
	st := &MemberState{Member: m, Started: started}
	st.Gone, st.Cancel = context.WithCancel(context.Background())
	return st
}

// Departed is a member that left the view at a time.
type Departed struct {
	*MemberState
	At time.Time
}
