package node

import (
	"crypto/tls"
	"time"

	"github.com/corralcache/corral/internal/peertls"
	"github.com/corralcache/corral/internal/view"
)

// peerTLSConfigs returns the peer server's and client's TLS configs made from base (see
// package peertls).
func (n *Node) peerTLSConfigs(base *tls.Config) (server, client *tls.Config) {
	v := &peertls.Verifier{
		Members: n.certMembers,
		Refused: func(reason string) { n.metrics.refused.WithLabelValues(reason).Inc() },
		Log:     n.log,
	}
	return v.Configs(base)
}

// certMembers yields every member a peer's certificate may name (peertls.Verifier.Members).
func (n *Node) certMembers(yield func(view.Member) bool) {
	if v := n.view.Load(); v != nil { // nil for a handshake while Start still runs
		for _, st := range v.Members {
			if !yield(st.Member) {
				return
			}
		}
		for _, d := range v.Departed {
			if !yield(d.Member) {
				return
			}
		}
	}
	// Claimants too: members back at a new address, as the owner's admission takes them.
	for _, m := range n.membersAndClaimants() {
		if !yield(view.Of(m)) {
			return
		}
	}
}

// admitTLS keeps the member at addr out of the ring until a handshake with its peer port has
// completed and it answered (see above), retrying while it stays in the view.
func (n *Node) admitTLS(name, addr string) {
	wait := 50 * time.Millisecond
	for {
		if n.router.Answers(n.recCtx, addr) {
			break
		}
		n.viewMu.Lock()
		if n.unadmitted[name] == view.ExcludedTLSPending {
			n.unadmitted[name] = view.ExcludedTLSFailed
			n.log.Warn("corral: a member's peer port does not complete mutual TLS with this node: it is not an owner here until it does",
				"member", name, "peer_addr", addr)
			n.rebuildLocked()
		}
		_, still := n.unadmitted[name]
		n.viewMu.Unlock()
		if !still {
			return
		}
		if !n.pause(wait) {
			return
		}
		wait = min(2*wait, 5*time.Second)
	}
	n.viewMu.Lock()
	defer n.viewMu.Unlock()
	if _, ok := n.unadmitted[name]; !ok {
		return
	}
	delete(n.unadmitted, name)
	if n.admitted == nil {
		n.admitted = make(map[string]string)
	}
	n.admitted[name] = addr
	n.rebuildLocked()
}

// admitNewcomersLocked starts a TLS check of every member of the view this node has not
// checked yet, and returns the ones that are not admitted, with why. Without PeerTLS there is
// nothing to check. n.viewMu must be held.
func (n *Node) admitNewcomersLocked(exclude map[string]string) {
	if n.cfg.PeerTLS == nil {
		return
	}
	live := map[string]bool{}
	for _, m := range n.lastMembers {
		live[m.Name] = true
		if m.Name == n.cfg.Name || !m.Meta.PeerTLS {
			continue
		}
		if addr, ok := n.admitted[m.Name]; ok && addr == m.Meta.PeerAddr {
			continue
		}
		if n.unadmitted == nil {
			n.unadmitted = make(map[string]string)
		}
		if _, checking := n.unadmitted[m.Name]; !checking {
			n.unadmitted[m.Name] = view.ExcludedTLSPending
			name, addr := m.Name, m.Meta.PeerAddr
			n.recWG.Go(func() { n.admitTLS(name, addr) })
		}
		exclude[m.Name] = n.unadmitted[m.Name]
	}
	for name := range n.unadmitted {
		if !live[name] {
			delete(n.unadmitted, name)
		}
	}
	for name := range n.admitted {
		if !live[name] {
			delete(n.admitted, name)
		}
	}
}
