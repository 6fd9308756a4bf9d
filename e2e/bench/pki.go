package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"

	"github.com/corralcache/corral/internal/testpki"
)

// peerTLS is one corral node's peer TLS material (-tls), in PEM: the run's CA, and a
// certificate naming the node as a pod's does (its name as the first label of a DNS name).
type peerTLS struct {
	CA, Cert, Key []byte
}

// issuePeerTLS returns the peer TLS material of member name, signed by ca.
func issuePeerTLS(ca *testpki.CA, name string) (*peerTLS, error) {
	cert, key, err := ca.Make(name+".bench.corral", testpki.Spec{})
	if err != nil {
		return nil, err
	}
	return &peerTLS{CA: ca.PEM(), Cert: cert, Key: key}, nil
}

// config returns corral.Config.PeerTLS for the material.
func (m *peerTLS) config() (*tls.Config, error) {
	cert, err := tls.X509KeyPair(m.Cert, m.Key)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(m.CA) {
		return nil, errors.New("bench: bad CA PEM")
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, ClientCAs: pool}, nil
}
