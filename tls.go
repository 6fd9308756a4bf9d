package corral

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"
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

// peerTLSConfigs returns the server's and the client's TLS configs made from base: base with
// the member check added (and, on the client, the chain checked by it rather than against the
// dialed address, which is an IP the certificate need not carry). A base with
// VerifyPeerCertificate checks the chain there itself (a config whose CA is re-read from a
// file, say); corral then only adds the member check.
func (n *Node) peerTLSConfigs(base *tls.Config) (server, client *tls.Config) {
	server = base.Clone()
	if server.ClientCAs == nil && server.VerifyPeerCertificate == nil {
		server.ClientCAs = base.RootCAs
	}
	if server.ClientAuth < tls.RequireAnyClientCert {
		server.ClientAuth = tls.RequireAndVerifyClientCert
		if server.VerifyPeerCertificate != nil {
			server.ClientAuth = tls.RequireAnyClientCert // its callback checks the chain
		}
	}
	prevServer := base.VerifyConnection
	server.VerifyConnection = func(cs tls.ConnectionState) error {
		if prevServer != nil {
			if err := prevServer(cs); err != nil {
				return err
			}
		}
		if len(cs.PeerCertificates) == 0 || !n.certNamesMember(cs.PeerCertificates[0], "") {
			n.metrics.refused.WithLabelValues("tls").Inc()
			err := errors.New("corral: the client's certificate names no member of the cluster")
			n.log.Warn("corral: refused a peer connection", "err", err, "subject", subject(cs))
			return err
		}
		return nil
	}

	client = base.Clone()
	if base.InsecureSkipVerify {
		return server, client // the caller's choice: no check at all
	}
	client.InsecureSkipVerify = true // checked below, by name rather than by the dialed IP
	prevClient := base.VerifyConnection
	client.VerifyConnection = func(cs tls.ConnectionState) error {
		if prevClient != nil {
			if err := prevClient(cs); err != nil {
				return err
			}
		}
		if len(cs.PeerCertificates) == 0 {
			return errors.New("corral: the peer presented no certificate")
		}
		if base.VerifyPeerCertificate == nil {
			opts := x509.VerifyOptions{Roots: base.RootCAs, Intermediates: x509.NewCertPool(),
				KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}
			for _, c := range cs.PeerCertificates[1:] {
				opts.Intermediates.AddCert(c)
			}
			if _, err := cs.PeerCertificates[0].Verify(opts); err != nil {
				n.metrics.refused.WithLabelValues("tls").Inc()
				n.log.Warn("corral: refused a peer's certificate", "err", err, "subject", subject(cs))
				return fmt.Errorf("corral: the peer's certificate: %w", err)
			}
		}
		if !n.certNamesMember(cs.PeerCertificates[0], cs.ServerName) {
			n.metrics.refused.WithLabelValues("tls").Inc()
			err := fmt.Errorf("corral: the certificate of %s names no member at that address", cs.ServerName)
			n.log.Warn("corral: refused a peer's certificate", "err", err, "subject", subject(cs))
			return err
		}
		return nil
	}
	return server, client
}

func subject(cs tls.ConnectionState) string {
	if len(cs.PeerCertificates) == 0 {
		return ""
	}
	return cs.PeerCertificates[0].Subject.String()
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
		for name, st := range v.members {
			add(name, st.PeerAddr, st.GossipAddr)
		}
		for name, d := range v.departed {
			add(name, d.PeerAddr, d.GossipAddr)
		}
	}
	n.viewMu.Lock()
	members := n.members
	n.viewMu.Unlock()
	if members != nil {
		for _, m := range members.Members() {
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
		st := &memberState{Member: Member{Name: name, PeerAddr: addr}}
		if n.answers(n.recCtx, st) {
			break
		}
		n.viewMu.Lock()
		if n.unadmitted[name] == admissionPending {
			n.unadmitted[name] = excludedPeerTLSFailed
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

// The reasons a member is kept out of the ring while its TLS is not checked.
const (
	admissionPending      = "peer TLS not checked yet"
	excludedPeerTLSFailed = "peer TLS failed"
)

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
			n.unadmitted[m.Name] = admissionPending
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
