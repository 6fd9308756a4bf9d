package corral

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/corralcache/corral/internal/view"
)

// With Config.PeerTLS, both ends of every peer connection present a certificate, and each
// checks that the other's chains to the CA and names a current member. A certificate names a
// member by an IP SAN equal to the member's address, a DNS SAN whose first label is the
// member's name (the pod DNS names a headless Service gives, "corral-0.corral-headless…",
// where the member name is the pod name), a CN equal to the name, or a wildcard DNS SAN
// ("*.corral-headless.ns.svc.cluster.local", what a cert-manager Certificate for a
// StatefulSet's pods usually carries). Names rather than only addresses, because pods' IPs are
// not known when their certificates are issued; wildcards, because that is how such
// certificates are issued, and the CA's signature is what is trusted. The client checks the
// member it dialed; the server, any current member (it cannot know which one dials).
//
// A member whose peer port does not complete mutual TLS with this one — it runs without TLS
// (its meta says so), or with a certificate of another CA — is never an owner here, nor a
// hand-off target: a new member is kept out of the ring until this node has completed a
// handshake with it and had an answer. The log says why, and corral_members_excluded counts
// it.

// peerTLSConfigs returns the server's and the client's TLS configs made from base. Every check
// of a peer's certificate is corral's, in VerifyConnection, so that each refusal is logged with
// the peer's address and counted in corral_peer_requests_refused_total with its reason: the
// server requests a certificate without having Go verify it (Go's RequireAndVerifyClientCert
// would end the handshake before any callback could say why), and the client skips Go's
// check of the dialed address, an IP the certificate need not carry. The chain is checked
// against the CA (ClientCAs, else RootCAs, on the server; RootCAs on the client) or, when base
// has VerifyPeerCertificate (a config whose CA is re-read from a file, see PeerTLSFromFiles),
// by that callback instead; then the member check (see above).
//
// Neither side resumes TLS sessions: a resumed session skips the certificate checks, and
// peer connections are long-lived, so resumption would save nothing worth that.
func (n *Node) peerTLSConfigs(base *tls.Config) (server, client *tls.Config) {
	server = base.Clone()
	server.ClientAuth = tls.RequestClientCert // verified below
	if server.ClientCAs == nil {
		server.ClientCAs = base.RootCAs // also named in the certificate request
	}
	server.VerifyPeerCertificate = nil // called from verifyPeer, so its refusals are counted
	server.SessionTicketsDisabled = true
	server.GetConfigForClient = func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
		// A config per handshake, only so that a refusal can name the address it came from.
		c := server.Clone()
		c.GetConfigForClient = nil
		from := ""
		if hello.Conn != nil {
			from = hello.Conn.RemoteAddr().String()
		}
		c.VerifyConnection = func(cs tls.ConnectionState) error {
			return n.verifyPeer(cs, base, false, from)
		}
		return c, nil
	}
	server.VerifyConnection = func(cs tls.ConnectionState) error { return n.verifyPeer(cs, base, false, "") }

	client = base.Clone()
	if base.InsecureSkipVerify {
		return server, client // the caller's choice: no check at all
	}
	client.InsecureSkipVerify = true // checked by verifyPeer, by name rather than by the dialed IP
	client.VerifyPeerCertificate = nil
	client.ClientSessionCache = nil
	client.VerifyConnection = func(cs tls.ConnectionState) error {
		return n.verifyPeer(cs, base, true, cs.ServerName)
	}
	return server, client
}

// checkPeerTLS refuses a Config.PeerTLS that could not check peers: one with no certificate of
// its own, or nothing to check a peer's chain against (nil RootCAs would mean the system's
// public CAs, and anyone can get a wildcard certificate from one of those), or a
// GetConfigForClient, whose config would replace the one that carries the member check.
func checkPeerTLS(c *tls.Config) error {
	switch {
	case c == nil:
		return nil
	case len(c.Certificates) == 0 && c.GetCertificate == nil && c.GetClientCertificate == nil:
		return errors.New("corral: PeerTLS has no certificate (Certificates or GetCertificate)")
	case c.RootCAs == nil && c.ClientCAs == nil && c.VerifyPeerCertificate == nil:
		return errors.New("corral: PeerTLS has no CA to check peers against (RootCAs, or VerifyPeerCertificate)")
	case c.GetConfigForClient != nil:
		return errors.New("corral: PeerTLS.GetConfigForClient is not supported: its config would skip the member check")
	}
	return nil
}

// The reasons, in corral_peer_requests_refused_total, that a peer's certificate was refused.
const (
	refusedNoCertificate = "tls: no certificate"
	refusedExpired       = "tls: expired"           // or not valid yet
	refusedAuthority     = "tls: unknown authority" // does not chain to the CA
	refusedBadCert       = "tls: bad certificate"   // any other failure of the chain check
	refusedNotAMember    = "tls: names no member"
)

// verifyPeer checks the certificate a peer presented in a handshake: base's own
// VerifyConnection first, then the chain, then the member check (see peerTLSConfigs). asClient
// says this node dialed; peer is the address dialed, or that the connection came from ("" when
// unknown).
func (n *Node) verifyPeer(cs tls.ConnectionState, base *tls.Config, asClient bool, peer string) error {
	if len(cs.PeerCertificates) == 0 {
		return n.refusePeer(cs, asClient, peer, refusedNoCertificate, errors.New("corral: the peer presented no certificate"))
	}
	if base.VerifyConnection != nil {
		if err := base.VerifyConnection(cs); err != nil {
			return n.refusePeer(cs, asClient, peer, refusalReason(err), err)
		}
	}
	if base.VerifyPeerCertificate != nil {
		raw := make([][]byte, len(cs.PeerCertificates))
		for i, c := range cs.PeerCertificates {
			raw[i] = c.Raw
		}
		if err := base.VerifyPeerCertificate(raw, nil); err != nil {
			return n.refusePeer(cs, asClient, peer, refusalReason(err), err)
		}
	} else {
		roots, usage := base.ClientCAs, x509.ExtKeyUsageClientAuth
		if roots == nil || asClient {
			roots = base.RootCAs
		}
		if asClient {
			usage = x509.ExtKeyUsageServerAuth
		}
		opts := x509.VerifyOptions{Roots: roots, Intermediates: x509.NewCertPool(), KeyUsages: []x509.ExtKeyUsage{usage}}
		for _, c := range cs.PeerCertificates[1:] {
			opts.Intermediates.AddCert(c)
		}
		if _, err := cs.PeerCertificates[0].Verify(opts); err != nil {
			return n.refusePeer(cs, asClient, peer, refusalReason(err), err)
		}
	}
	ip := ""
	if asClient {
		ip = cs.ServerName
	}
	if !n.certNamesMember(cs.PeerCertificates[0], ip) {
		err := errors.New("the certificate names no member of the cluster")
		if asClient {
			err = fmt.Errorf("the certificate names no member at %s", cs.ServerName)
		}
		return n.refusePeer(cs, asClient, peer, refusedNotAMember, err)
	}
	return nil
}

// refusePeer logs and counts a refused certificate and returns the handshake's error.
func (n *Node) refusePeer(cs tls.ConnectionState, asClient bool, peer, reason string, err error) error {
	n.metrics.refused.WithLabelValues(reason).Inc()
	msg, attrs := "corral: refused a peer connection: its certificate failed the check",
		[]any{"reason", reason, "err", err, "from", peer}
	if asClient {
		msg, attrs[4] = "corral: refused a peer's certificate", "peer"
	}
	if len(cs.PeerCertificates) > 0 {
		leaf := cs.PeerCertificates[0]
		attrs = append(attrs, "subject", leaf.Subject.String(), "dns_names", leaf.DNSNames,
			"not_after", leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	n.log.Warn(msg, attrs...)
	return fmt.Errorf("corral: peer certificate refused (%s): %w", reason, err)
}

// refusalReason classifies a failed chain check.
func refusalReason(err error) string {
	var invalid x509.CertificateInvalidError
	var unknown x509.UnknownAuthorityError
	switch {
	case errors.As(err, &invalid) && invalid.Reason == x509.Expired:
		return refusedExpired
	case errors.As(err, &unknown):
		return refusedAuthority
	}
	return refusedBadCert
}

// certNamesMember reports whether leaf names a current member (see above): the member at ip
// when ip is set, else any.
func (n *Node) certNamesMember(leaf *x509.Certificate, ip string) bool {
	if ip != "" {
		if parsed := net.ParseIP(ip); parsed != nil {
			ip = parsed.String()
		}
	}
	names, ips := map[string]bool{}, map[string]bool{}
	add := func(name, peerAddr, gossipAddr string) {
		if ip != "" && hostOf(peerAddr) != ip {
			return
		}
		names[name] = true
		ips[hostOf(peerAddr)], ips[hostOf(gossipAddr)] = true, true
	}
	if v := n.view.Load(); v != nil { // nil for a handshake while New still runs
		for name, st := range v.Members {
			add(name, st.PeerAddr, st.GossipAddr)
		}
		for name, d := range v.Departed {
			add(name, d.PeerAddr, d.GossipAddr)
		}
	}
	n.viewMu.Lock()
	members := n.members
	n.viewMu.Unlock()
	if members != nil {
		// Claimants: members back at a new address, as in isMemberCaller (admit.go).
		for _, m := range slices.Concat(members.Members(), members.Claimants()) {
			add(m.Name, m.Meta.PeerAddr, m.GossipAddr)
		}
	}
	for _, a := range leaf.IPAddresses {
		if ips[a.String()] {
			return true
		}
	}
	if names[leaf.Subject.CommonName] {
		return true
	}
	for _, d := range leaf.DNSNames {
		first, _, _ := strings.Cut(d, ".")
		if first == "*" && len(names) > 0 || names[first] || names[d] {
			return true
		}
	}
	return false
}

// admitTLS keeps the member at addr out of the ring until a handshake with its peer port has
// completed and it answered (see above), retrying while it stays in the view.
func (n *Node) admitTLS(name, addr string) {
	wait := 50 * time.Millisecond
	for {
		if n.answers(n.recCtx, addr) {
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
		t := time.NewTimer(wait)
		select {
		case <-n.recCtx.Done():
			t.Stop()
			return
		case <-t.C:
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
