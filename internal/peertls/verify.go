package peertls

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/corralcache/corral/internal/view"
)

// Verifier checks the certificates of peers: the chain, and the member check (see the
// package documentation).
type Verifier struct {
	// Members yields every member a peer's certificate may name: the members of this node's
	// view and the ones that departed it within PeekWindow, and those of the membership's live
	// set and its claimants (members back at a new address the membership does not admit
	// yet). It is called for each handshake, from any goroutine.
	Members iter.Seq[view.Member]
	// Refused counts a refusal by its reason (one of the Refused… constants), for
	// corral_peer_requests_refused_total.
	Refused func(reason string)
	Log     *slog.Logger
}

// Configs returns the server's and the client's TLS configs made from base. Every check
// of a peer's certificate is corral's, in VerifyConnection, so that each refusal is logged with
// the peer's address and counted in corral_peer_requests_refused_total with its reason: the
// server requests a certificate without having Go verify it (Go's RequireAndVerifyClientCert
// would end the handshake before any callback could say why), and the client skips Go's
// check of the dialed address, an IP the certificate need not carry. The chain is checked
// against the CA (ClientCAs, else RootCAs, on the server; RootCAs on the client) or, when base
// has VerifyPeerCertificate (a config whose CA is re-read from a file, see FromFiles),
// by that callback instead; then the member check (see above).
//
// Neither side resumes TLS sessions: a resumed session skips the certificate checks, and
// peer connections are long-lived, so resumption would save nothing worth that.
func (v *Verifier) Configs(base *tls.Config) (server, client *tls.Config) {
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
			return v.verifyPeer(cs, base, false, from)
		}
		return c, nil
	}
	server.VerifyConnection = func(cs tls.ConnectionState) error { return v.verifyPeer(cs, base, false, "") }

	client = base.Clone()
	if base.InsecureSkipVerify {
		return server, client // the caller's choice: no check at all
	}
	client.InsecureSkipVerify = true // checked by verifyPeer, by name rather than by the dialed IP
	client.VerifyPeerCertificate = nil
	client.ClientSessionCache = nil
	client.VerifyConnection = func(cs tls.ConnectionState) error {
		return v.verifyPeer(cs, base, true, cs.ServerName)
	}
	return server, client
}

// Check refuses a Config.PeerTLS that could not check peers: one with no certificate of
// its own, or nothing to check a peer's chain against (nil RootCAs would mean the system's
// public CAs, and anyone can get a wildcard certificate from one of those), or a
// GetConfigForClient, whose config would replace the one that carries the member check.
func Check(c *tls.Config) error {
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
	RefusedNoCertificate = "tls: no certificate"
	RefusedExpired       = "tls: expired"           // or not valid yet
	RefusedAuthority     = "tls: unknown authority" // does not chain to the CA
	RefusedBadCert       = "tls: bad certificate"   // any other failure of the chain check
	RefusedNotAMember    = "tls: names no member"
)

// Reasons lists every Refused… reason, so that each is exported from the start at 0.
var Reasons = []string{RefusedNoCertificate, RefusedExpired, RefusedAuthority, RefusedBadCert, RefusedNotAMember}

// verifyPeer checks the certificate a peer presented in a handshake: base's own
// VerifyConnection first, then the chain, then the member check (see peerTLSConfigs). asClient
// says this node dialed; peer is the address dialed, or that the connection came from ("" when
// unknown).
func (v *Verifier) verifyPeer(cs tls.ConnectionState, base *tls.Config, asClient bool, peer string) error {
	if len(cs.PeerCertificates) == 0 {
		return v.refusePeer(cs, asClient, peer, RefusedNoCertificate, errors.New("corral: the peer presented no certificate"))
	}
	if base.VerifyConnection != nil {
		if err := base.VerifyConnection(cs); err != nil {
			return v.refusePeer(cs, asClient, peer, refusalReason(err), err)
		}
	}
	if base.VerifyPeerCertificate != nil {
		raw := make([][]byte, len(cs.PeerCertificates))
		for i, c := range cs.PeerCertificates {
			raw[i] = c.Raw
		}
		if err := base.VerifyPeerCertificate(raw, nil); err != nil {
			return v.refusePeer(cs, asClient, peer, refusalReason(err), err)
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
			return v.refusePeer(cs, asClient, peer, refusalReason(err), err)
		}
	}
	ip := ""
	if asClient {
		ip = cs.ServerName
	}
	if !v.certNamesMember(cs.PeerCertificates[0], ip) {
		err := errors.New("the certificate names no member of the cluster")
		if asClient {
			err = fmt.Errorf("the certificate names no member at %s", cs.ServerName)
		}
		return v.refusePeer(cs, asClient, peer, RefusedNotAMember, err)
	}
	return nil
}

// refusePeer logs and counts a refused certificate and returns the handshake's error.
func (v *Verifier) refusePeer(cs tls.ConnectionState, asClient bool, peer, reason string, err error) error {
	v.Refused(reason)
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
	v.Log.Warn(msg, attrs...)
	return fmt.Errorf("corral: peer certificate refused (%s): %w", reason, err)
}

// refusalReason classifies a failed chain check.
func refusalReason(err error) string {
	var invalid x509.CertificateInvalidError
	var unknown x509.UnknownAuthorityError
	switch {
	case errors.As(err, &invalid) && invalid.Reason == x509.Expired:
		return RefusedExpired
	case errors.As(err, &unknown):
		return RefusedAuthority
	}
	return RefusedBadCert
}

// certNamesMember reports whether leaf names a current member (see above): the member at ip
// when ip is set, else any.
func (v *Verifier) certNamesMember(leaf *x509.Certificate, ip string) bool {
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
	for m := range v.Members {
		add(m.Name, m.PeerAddr, m.GossipAddr)
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

// hostOf returns the IP of an "ip:port" address, canonical, or "".
func hostOf(addr string) string {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return ""
	}
	if ip := net.ParseIP(host); ip != nil {
		return ip.String()
	}
	return host
}
