// Package kubetest is what the Kubernetes tests' control planes share — the one of e2e/k8s
// (no kubelet) and the real node's of e2e/k8s/node: their certificates, tokens, kubeconfigs,
// free ports and the wait for the API server.
package kubetest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"time"

	"k8s.io/client-go/rest"
)

// Kubeconfig is a kubeconfig file for server with token, namespace as its default.
func Kubeconfig(server string, caPEM []byte, token, namespace string) []byte {
	return fmt.Appendf(nil, `apiVersion: v1
kind: Config
clusters:
- name: e2e
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: e2e
  user:
    token: %s
contexts:
- name: e2e
  context: {cluster: e2e, user: e2e, namespace: %s}
current-context: e2e
`, server, base64.StdEncoding.EncodeToString(caPEM), token, namespace)
}

// WaitHTTP polls path on the API server until it answers 200 or timeout passes.
func WaitHTTP(ctx context.Context, rc *rest.Config, path string, timeout time.Duration) error {
	tr, err := rest.TransportFor(rc)
	if err != nil {
		return err
	}
	c := &http.Client{Transport: tr, Timeout: 2 * time.Second}
	defer c.CloseIdleConnections()
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		req, _ := http.NewRequestWithContext(ctx, "GET", rc.Host+path, nil)
		resp, err := c.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
			err = fmt.Errorf("%s: %s", path, resp.Status)
		}
		last = err
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("not ready in %v: %v", timeout, last)
}

// NewCA makes a certificate authority named cn, valid for a day: its key, its certificate and
// the certificate in PEM.
func NewCA(cn string) (*ecdsa.PrivateKey, *x509.Certificate, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, nil, err
	}
	cert, _ := x509.ParseCertificate(der)
	return key, cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}

// WriteCert writes base.crt and base.key: a certificate signed by ca for cn, for usage, naming
// ips and dns.
func WriteCert(base string, caKey *ecdsa.PrivateKey, ca *x509.Certificate, cn string, usage x509.ExtKeyUsage, ips []net.IP, dns []string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
		IPAddresses: ips, DNSNames: dns,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return err
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	if err := WritePEM(base+".crt", "CERTIFICATE", der); err != nil {
		return err
	}
	return WritePEM(base+".key", "EC PRIVATE KEY", kder)
}

// serial is a random certificate serial number: no two certificates of a CA share one.
func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return n.Add(n, big.NewInt(1))
}

// WritePEM writes der as a PEM block of type typ, readable by its owner only.
func WritePEM(path, typ string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
}

// RandomToken is a bearer token of 24 random bytes.
func RandomToken() string {
	b := make([]byte, 24)
	rand.Read(b)
	return fmt.Sprintf("%x", b)
}

// FreePorts returns n distinct TCP ports free on host ("" for every address of this host).
func FreePorts(host string, n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
