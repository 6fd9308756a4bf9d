package viewkeeper

import (
	"sync/atomic"
	"time"

	"github.com/corralcache/corral/internal/view"
)

// CertMembers returns what yields every member a peer's certificate may name
// (peertls.Verifier.Members): those of the view in vp, its departed, and the membership's
// live set and claimants.
func CertMembers(vp *atomic.Pointer[view.View], m *Membership) func(yield func(view.Member) bool) {
	return func(yield func(view.Member) bool) {
		if v := vp.Load(); v != nil { // nil for a handshake while the node starts
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
		for _, lm := range m.LiveAndClaimants() {
			if !yield(view.Of(lm)) {
				return
			}
		}
	}
}

// admitTLS keeps the member at addr out of the ring until a handshake with its peer port has
// completed and it answered (see above), retrying while it stays in the view.
func (k *Keeper) admitTLS(name, addr string) {
	wait := 50 * time.Millisecond
	for {
		if k.cfg.Router.Answers(k.ctx, addr) {
			break
		}
		k.mu.Lock()
		if k.unadmitted[name] == view.ExcludedTLSPending {
			k.unadmitted[name] = view.ExcludedTLSFailed
			k.cfg.Log.Warn("corral: a member's peer port does not complete mutual TLS with this node: it is not an owner here until it does",
				"member", name, "peer_addr", addr)
			k.rebuildLocked()
		}
		_, still := k.unadmitted[name]
		k.mu.Unlock()
		if !still {
			return
		}
		if !k.pause(wait) {
			return
		}
		wait = min(2*wait, 5*time.Second)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, ok := k.unadmitted[name]; !ok {
		return
	}
	delete(k.unadmitted, name)
	if k.admitted == nil {
		k.admitted = make(map[string]string)
	}
	k.admitted[name] = addr
	k.rebuildLocked()
}

// admitNewcomersLocked starts a TLS check of every member of the view this node has not
// checked yet, and returns the ones that are not admitted, with why. Without PeerTLS there is
// nothing to check. k.mu must be held.
func (k *Keeper) admitNewcomersLocked(exclude map[string]string) {
	if !k.cfg.PeerTLS {
		return
	}
	live := map[string]bool{}
	for _, m := range k.lastMembers {
		live[m.Name] = true
		if m.Name == k.cfg.Self || !m.Meta.PeerTLS {
			continue
		}
		if addr, ok := k.admitted[m.Name]; ok && addr == m.Meta.PeerAddr {
			continue
		}
		if k.unadmitted == nil {
			k.unadmitted = make(map[string]string)
		}
		if _, checking := k.unadmitted[m.Name]; !checking {
			k.unadmitted[m.Name] = view.ExcludedTLSPending
			name, addr := m.Name, m.Meta.PeerAddr
			k.wg.Go(func() { k.admitTLS(name, addr) })
		}
		exclude[m.Name] = k.unadmitted[m.Name]
	}
	for name := range k.unadmitted {
		if !live[name] {
			delete(k.unadmitted, name)
		}
	}
	for name := range k.admitted {
		if !live[name] {
			delete(k.admitted, name)
		}
	}
}
