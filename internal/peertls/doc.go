// Package peertls is peer mutual TLS: the TLS configs of a node's peer server and client made
// from Config.PeerTLS, the checks of a peer's certificate and the refusals they count, and
// the files that rotate (FromFiles, behind corral.PeerTLSFromFiles).
//
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
//
// # Usage
//
//	if err := peertls.Check(cfg.PeerTLS); err != nil { … } // when the node starts
//	v := &peertls.Verifier{Members: viewkeeper.CertMembers(&view, &members), Refused: count, Log: log}
//	serverTLS, clientTLS := v.Configs(cfg.PeerTLS)
//
// Keeping a member whose peer TLS has not been checked out of the ring is the node's
// (package viewkeeper); this package says whether a handshake's certificate passes.
package peertls
