package corral

import (
	"crypto/tls"
	"log/slog"

	"github.com/corralcache/corral/internal/peertls"
)

// PeerTLSFromFiles returns a Config.PeerTLS whose certificate and CA come from files, as
// Kubernetes mounts a cert-manager Secret: certFile holds this member's certificate (PEM, the
// leaf first, then any intermediates; tls.crt), keyFile its private key (PEM; tls.key), and
// caFile the CAs a peer's certificate must chain to (PEM, one or more; ca.crt). Every member
// presents its certificate and checks the other's, in both directions, against the CAs, with
// the member check of Config.PeerTLS on top. The certificate must be valid for both
// server and client authentication (extended key usages serverAuth and clientAuth, or none):
// every member is both, with one certificate. TLS 1.3 only: both ends are corral.
//
// The files are read again when they change — cert-manager renews a certificate before it
// expires, and the kubelet swaps a Secret's files in one step by a symlink — so a rotation
// needs no restart, and no handshake after it presents the old certificate or trusts the old
// CA. Connections already open are not touched: requests in flight on them finish, and they
// keep the identity they were opened with (SECURITY.md).
//
// A reload that fails — a file missing or unreadable, a key that does not match the
// certificate, a CA file with no certificate, files that changed while they were read — keeps
// the certificate and CAs loaded before, logs at Error once per failure, and is tried again
// at a later handshake once a file changes again. A reload that works is logged at Info.
//
// It fails when the files cannot be loaded now. logger may be nil (no logs).
func PeerTLSFromFiles(certFile, keyFile, caFile string, logger *slog.Logger) (*tls.Config, error) {
	return peertls.FromFiles(certFile, keyFile, caFile, logger)
}
