package peertls

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
)

// FromFiles returns a peer TLS config whose certificate and CA come from files, as Kubernetes
// mounts a cert-manager Secret: certFile holds this member's certificate (PEM, the leaf
// first, then any intermediates), keyFile its private key, caFile the CAs a peer's
// certificate must chain to (corral.PeerTLSFromFiles says what a user needs to know).
//
// The files are read again when they change. Each handshake stats the three files (a few
// microseconds; a handshake costs a millisecond of signatures, and peer connections are
// long-lived, so handshakes are rare) and reads them again when one has changed (another
// file, size or modification time). This rather than a poll: no goroutine to own and stop,
// and no window after a rotation in which an old certificate, perhaps expired by then, is
// still presented or an old CA still trusted. A reload that fails keeps what was loaded
// before, logs at Error once per failure, and is tried again at a later handshake once a
// file changes again. A reload that works is logged at Info.
func FromFiles(certFile, keyFile, caFile string, logger *slog.Logger) (*tls.Config, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	f := &tlsFiles{paths: [3]string{certFile, keyFile, caFile}, log: logger}
	stamps, err := statFiles(f.paths)
	if err != nil {
		return nil, err
	}
	m, err := loadTLSFiles(f.paths)
	if err != nil {
		return nil, err
	}
	f.cur, f.stamps = m, stamps
	m.warn(logger)
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return f.current().cert, nil
		},
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return f.current().cert, nil
		},
		VerifyPeerCertificate: f.verify,
	}, nil
}

// tlsFiles is what FromFiles loaded, and reloads.
type tlsFiles struct {
	paths [3]string // certificate, key, CA
	log   *slog.Logger

	// mu guards cur, stamps, failed and lastErr. It is held while the files are read, so
	// that one handshake reads changed files and the ones beside it wait for that rather
	// than read them again.
	mu      sync.Mutex
	cur     *tlsMaterial
	stamps  [3]os.FileInfo // of the files cur was read from
	failed  [3]os.FileInfo // of files that failed to load: not read again until one changes
	lastErr string         // the failure logged last, so that a lasting one is logged once
}

// tlsMaterial is one loaded set of files.
type tlsMaterial struct {
	cert *tls.Certificate
	leaf *x509.Certificate
	cas  *x509.CertPool
	nCAs int
}

// current returns the loaded material, after reading the files again if they changed.
func (f *tlsFiles) current() *tlsMaterial {
	f.mu.Lock()
	defer f.mu.Unlock()
	stamps, err := statFiles(f.paths)
	if err == nil && (sameFiles(stamps, f.stamps) || sameFiles(stamps, f.failed)) {
		return f.cur
	}
	var m *tlsMaterial
	if err == nil {
		m, err = loadTLSFiles(f.paths)
	}
	if err == nil {
		// The kubelet swaps all files at once, but a hand-made rotation may write them one by
		// one: files that changed while they were read are read again at the next handshake.
		after, serr := statFiles(f.paths)
		if serr != nil || !sameFiles(stamps, after) {
			return f.cur
		}
		f.cur, f.stamps, f.failed, f.lastErr = m, stamps, [3]os.FileInfo{}, ""
		f.log.Info("corral: peer TLS files reloaded", "cert", f.paths[0], "subject", m.leaf.Subject.String(),
			"dns_names", m.leaf.DNSNames, "not_after", m.leaf.NotAfter.UTC().Format(time.RFC3339), "cas", m.nCAs)
		m.warn(f.log)
		return m
	}
	if stamps[2] != nil {
		f.failed = stamps // every file was there: wait for one to change before reading again
	}
	if err.Error() != f.lastErr {
		f.lastErr = err.Error()
		f.log.Error("corral: peer TLS files could not be reloaded; the previous certificate and CAs stay in use", "err", err)
	}
	return f.cur
}

// verify is the chain check: the peer's certificate must chain to one of the current CAs and
// be valid for both server and client authentication.
func (f *tlsFiles) verify(raw [][]byte, _ [][]*x509.Certificate) error {
	if len(raw) == 0 {
		return errors.New("corral: the peer presented no certificate")
	}
	certs := make([]*x509.Certificate, len(raw))
	for i, r := range raw {
		c, err := x509.ParseCertificate(r)
		if err != nil {
			return fmt.Errorf("corral: the peer's certificate: %w", err)
		}
		certs[i] = c
	}
	return verifyChain(certs, f.current().cas)
}

func verifyChain(certs []*x509.Certificate, cas *x509.CertPool) error {
	opts := x509.VerifyOptions{Roots: cas, Intermediates: x509.NewCertPool()}
	for _, c := range certs[1:] {
		opts.Intermediates.AddCert(c)
	}
	for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		opts.KeyUsages = []x509.ExtKeyUsage{usage}
		if _, err := certs[0].Verify(opts); err != nil {
			return fmt.Errorf("corral: the certificate of %s: %w", certs[0].Subject, err)
		}
	}
	return nil
}

// warn logs what would make peers refuse this member's own certificate.
func (m *tlsMaterial) warn(log *slog.Logger) {
	if time.Now().After(m.leaf.NotAfter) {
		log.Error("corral: this member's peer TLS certificate has expired: peers refuse it",
			"subject", m.leaf.Subject.String(), "not_after", m.leaf.NotAfter.UTC().Format(time.RFC3339))
	} else if err := verifyChain([]*x509.Certificate{m.leaf}, m.cas); err != nil {
		// Not an error: during a CA rotation a member may hold a certificate of the new CA
		// before its own bundle names it; peers whose bundle does, accept it.
		log.Warn("corral: this member's peer TLS certificate does not pass its own check: peers with the same CA file refuse it", "err", err)
	}
}

// loadTLSFiles reads and parses the certificate, the key and the CAs.
func loadTLSFiles(paths [3]string) (*tlsMaterial, error) {
	certPEM, err := os.ReadFile(paths[0])
	if err != nil {
		return nil, fmt.Errorf("corral: peer TLS certificate: %w", err)
	}
	keyPEM, err := os.ReadFile(paths[1])
	if err != nil {
		return nil, fmt.Errorf("corral: peer TLS key: %w", err)
	}
	caPEM, err := os.ReadFile(paths[2])
	if err != nil {
		return nil, fmt.Errorf("corral: peer TLS CA: %w", err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("corral: peer TLS certificate %s and key %s: %w", paths[0], paths[1], err)
	}
	if pair.Leaf == nil { // set by X509KeyPair since Go 1.23, unless GODEBUG x509keypairleaf=0
		if pair.Leaf, err = x509.ParseCertificate(pair.Certificate[0]); err != nil {
			return nil, fmt.Errorf("corral: peer TLS certificate %s: %w", paths[0], err)
		}
	}
	m := &tlsMaterial{cert: &pair, leaf: pair.Leaf, cas: x509.NewCertPool()}
	for rest := caPEM; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("corral: peer TLS CA %s: %w", paths[2], err)
		}
		m.cas.AddCert(c)
		m.nCAs++
	}
	if m.nCAs == 0 {
		return nil, fmt.Errorf("corral: peer TLS CA %s holds no PEM certificate", paths[2])
	}
	return m, nil
}

func statFiles(paths [3]string) ([3]os.FileInfo, error) {
	var out [3]os.FileInfo
	for i, p := range paths {
		fi, err := os.Stat(p) // follows the kubelet's symlinks to the file of the moment
		if err != nil {
			return out, fmt.Errorf("corral: peer TLS: %w", err)
		}
		out[i] = fi
	}
	return out, nil
}

// sameFiles reports whether a and b are the same three files, unchanged: a symlink swap shows
// as another file, a rewrite in place as another size or modification time.
func sameFiles(a, b [3]os.FileInfo) bool {
	for i := range a {
		if a[i] == nil || b[i] == nil || !os.SameFile(a[i], b[i]) ||
			a[i].Size() != b[i].Size() || !a[i].ModTime().Equal(b[i].ModTime()) {
			return false
		}
	}
	return true
}
