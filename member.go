package corral

// Member is one member of the cluster as a node sees it.
type Member struct {
	Name       string
	GossipAddr string // "ip:port"
	PeerAddr   string // "ip:port"
}
