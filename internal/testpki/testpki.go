// Package testpki makes what cert-manager issues and the kubelet mounts, for tests of peer
// TLS: certificate authorities, member certificates (by DNS name, as a pod's are), the files
// of a TLS Secret, and a directory laid out as a mounted Secret, whose rotation swaps every
// file at once.
package testpki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// CA is a certificate authority made for one test, as cert-manager's CA issuer would be.
type CA struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
	Pool *x509.CertPool // Cert alone
}

// NewCA returns a CA named name, valid from an hour ago for a day.
func NewCA(tb testing.TB, name string) *CA {
	tb.Helper()
	ca, err := MakeCA(name)
	if err != nil {
		tb.Fatal(err)
	}
	return ca
}

// MakeCA is NewCA outside a test (the side-by-side benchmarks' peer TLS): it returns the error.
func MakeCA(name string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &CA{Cert: cert, Key: key, Pool: pool}, nil
}

// PEM returns the CA's certificate in PEM, as ca.crt carries it.
func (ca *CA) PEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Cert.Raw})
}

// Spec says what a certificate is like; the zero value is a good member certificate, valid
// for an hour either side of now, for server and client use.
type Spec struct {
	Expired    bool // its validity ended an hour ago
	ServerOnly bool // extended key usage serverAuth only
}

var serial atomic.Int64

// Issue returns a certificate for dnsName (its only name) signed by ca, and its key, in PEM.
func (ca *CA) Issue(tb testing.TB, dnsName string, spec Spec) (certPEM, keyPEM []byte) {
	tb.Helper()
	certPEM, keyPEM, err := ca.Make(dnsName, spec)
	if err != nil {
		tb.Fatal(err)
	}
	return certPEM, keyPEM
}

// Make is Issue outside a test: it returns the error.
func (ca *CA) Make(dnsName string, spec Spec) (certPEM, keyPEM []byte, err error) {
	der, key, err := ca.issue(dnsName, spec)
	if err != nil {
		return nil, nil, err
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), nil
}

func (ca *CA) issue(dnsName string, spec Spec) ([]byte, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano() + serial.Add(1)), Subject: pkix.Name{CommonName: "corral"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		DNSNames:    []string{dnsName},
	}
	if spec.Expired {
		tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-2*time.Hour), time.Now().Add(-time.Hour)
	}
	if spec.ServerOnly {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		return nil, nil, err
	}
	return der, key, nil
}

// TLSConfig returns a config with a certificate for dnsName (no IP SAN: a pod's certificate
// names it, not its address) that trusts ca alone, both ways, TLS 1.3.
func (ca *CA) TLSConfig(tb testing.TB, dnsName string) *tls.Config {
	tb.Helper()
	der, key, err := ca.issue(dnsName, Spec{})
	if err != nil {
		tb.Fatal(err)
	}
	return &tls.Config{
		Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}},
		RootCAs:      ca.Pool, ClientCAs: ca.Pool, MinVersion: tls.VersionTLS13,
	}
}

// Secret returns the files of a cert-manager TLS Secret for dnsName, signed by issuer:
// tls.crt, tls.key, and the bundle's certificates as ca.crt.
func Secret(tb testing.TB, issuer *CA, dnsName string, spec Spec, bundle ...*CA) map[string][]byte {
	tb.Helper()
	crt, key := issuer.Issue(tb, dnsName, spec)
	var cas []byte
	for _, c := range bundle {
		cas = append(cas, c.PEM()...)
	}
	return map[string][]byte{"tls.crt": crt, "tls.key": key, "ca.crt": cas}
}

// SecretDir is a directory laid out as the kubelet mounts a Secret: each version of the files
// in a directory of its own, ..data a symlink to the current one, and each file a symlink
// through ..data. Swap rotates them in one rename, as the kubelet does.
type SecretDir struct {
	tb      testing.TB
	dir     string
	version int
}

// NewSecretDir mounts files in a temporary directory of tb's.
func NewSecretDir(tb testing.TB, files map[string][]byte) *SecretDir {
	tb.Helper()
	s := &SecretDir{tb: tb, dir: tb.TempDir()}
	s.Swap(files)
	for name := range files {
		if err := os.Symlink(filepath.Join("..data", name), filepath.Join(s.dir, name)); err != nil {
			tb.Fatal(err)
		}
	}
	return s
}

// Swap replaces every file at once with files (the same names).
func (s *SecretDir) Swap(files map[string][]byte) {
	s.tb.Helper()
	s.version++
	v := fmt.Sprintf("..v%d", s.version)
	if err := os.Mkdir(filepath.Join(s.dir, v), 0o755); err != nil {
		s.tb.Fatal(err)
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(s.dir, v, name), b, 0o600); err != nil {
			s.tb.Fatal(err)
		}
	}
	tmp := filepath.Join(s.dir, "..data_tmp")
	if err := os.Symlink(v, tmp); err != nil {
		s.tb.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(s.dir, "..data")); err != nil {
		s.tb.Fatal(err)
	}
}

// Path returns the path of the mounted file name.
func (s *SecretDir) Path(name string) string { return filepath.Join(s.dir, name) }
