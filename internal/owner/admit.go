package owner

import (
	"context"
	"fmt"
	"time"

	"github.com/corralcache/corral/internal/version"
	"github.com/corralcache/corral/transport"
	"github.com/corralcache/corral/transport/peerpb"
)

// Peer requests are served only for members. With PeerTLS, the handshake does it: the
// peer's certificate must chain to the CA and name a current member (package peertls). Without
// it, a request is refused unless it comes from the address of a member — one in this node's
// view, in its membership's live set (which learns of a joining member a moment before the
// view), one back at a new address that the membership does not admit yet, or one that left
// within PeekWindow — so a port scan of the peer port reads nothing and writes nothing.
// Config.AllowNonMemberPeers turns the address check off, for networks
// where a proxy between the pods (a service mesh's sidecar) rewrites source addresses.

// admit is the first step of serving any peer request: it refuses one from a non-member, then
// moves this node's clock past the sender's and remembers a sender that is not in the view
// yet, to be told of writes (see write.Strangers).
func (s *Server) admit(ctx context.Context, h *peerpb.Header) error {
	if !s.isMemberCaller(ctx) {
		s.cfg.Refused(RefusedNonMember)
		return fmt.Errorf("%w: %s does not know %s as a member", transport.ErrNotMember, s.cfg.Self, transport.CallerIP(ctx))
	}
	return s.admitHeader(h)
}

// admitHeader is admit's work after the caller's address passed.
func (s *Server) admitHeader(h *peerpb.Header) error {
	if err := version.Check(h.GetClock()); err != nil {
		return fmt.Errorf("%w: the header's clock: %v", transport.ErrInvalidArgument, err)
	}
	s.cfg.Clock.Observe(h.GetClock())
	name := h.GetSender()
	if name == "" || name == s.cfg.Self {
		return nil
	}
	if s.firstAsked.Load() == 0 {
		s.firstAsked.CompareAndSwap(0, time.Now().UnixNano())
	}
	v := s.cfg.View.Load()
	if _, ok := v.Members[name]; ok {
		return nil
	}
	switch d, departed := v.Departed[name]; {
	case h.GetLeaving():
		// A member that is leaving is told of nothing (its copies are checked by whoever
		// pulls them), however long it goes on asking while it drains.
		s.cfg.Writer.Strangers().Forget(name)
	case departed && h.GetStarted() != 0 && h.GetStarted() == d.Started.UnixNano():
		// A late message of a life that left this view (declared dead, say, while it was
		// paused): it is no newcomer. If it lives, it is reconciled when it is back.
	default:
		s.cfg.Writer.Strangers().Add(name, h.GetSenderAddr(), time.Now().Add(max(s.cfg.PeekWindow, time.Minute)))
	}
	return nil
}

// RefusedNonMember is the reason, in corral_peer_requests_refused_total, of a request
// refused for the address it came from.
const RefusedNonMember = "not a member"

// isMemberCaller reports whether a peer request whose ctx this is may be served (see above).
// It allocates nothing for a request from a member's address, the common case, which every
// hit a peer asks for pays.
func (s *Server) isMemberCaller(ctx context.Context) bool {
	if s.cfg.PeerTLS || s.cfg.AllowNonMemberPeers {
		return true
	}
	ip := transport.CallerAddr(ctx)
	if !ip.IsValid() {
		return false
	}
	if s.cfg.View.Load().MemberIPs[ip] {
		return true
	}
	// A member back at a new address that the membership does not admit yet (it saw the
	// member die less than DeadNodeReclaimTime ago) is one too: it passed the same gossip
	// checks and owns keys in its own view, and refused, it would fill them from the origin
	// rather than pull them from the members that hold them (see peer's claimants.go).
	for _, m := range s.cfg.Members() {
		if transport.HostAddr(m.GossipAddr) == ip || transport.HostAddr(m.Meta.PeerAddr) == ip {
			return true
		}
	}
	return false
}
