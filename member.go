package corral

import "github.com/corralcache/corral/peer"

// Member is one member of the cluster as a node sees it.
type Member struct {
	Name       string
	GossipAddr string // "ip:port"
	PeerAddr   string // "ip:port"
}

func memberOf(m peer.Member) Member {
	return Member{Name: m.Name, GossipAddr: m.GossipAddr, PeerAddr: m.Meta.PeerAddr}
}
