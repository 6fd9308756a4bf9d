package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/corralcache/corral"
	"github.com/corralcache/corral/cmd/corral/internal/apitoken"
)

// secretsConfig is what `corral serve` is told about its secrets: the gossip keys and how
// strictly they are used, and the peer TLS files.
type secretsConfig struct {
	secretKeyFile                  string
	verifyIncoming, verifyOutgoing bool
	tlsCert, tlsKey, tlsCA         string
}

func addSecretsFlags(fs *flag.FlagSet, c *secretsConfig) {
	fs.StringVar(&c.secretKeyFile, "secret-key-file", "", "file holding the gossip encryption key (16, 24 or 32 bytes), or a list of keys for a rotation, one per line, the first used to send (a line is a key as written, or base64:<key in base64>); read again when it changes")
	fs.BoolVar(&c.verifyIncoming, "gossip-verify-incoming", true, "with --secret-key-file, drop gossip that is not encrypted (false: accept it too, a step of turning encryption on in a running cluster)")
	fs.BoolVar(&c.verifyOutgoing, "gossip-verify-outgoing", true, "with --secret-key-file, encrypt the gossip this node sends (false: send plaintext, still reading encrypted gossip; the first step of turning encryption on; needs --gossip-verify-incoming=false)")
	fs.StringVar(&c.tlsCert, "tls-cert", "", "peer mutual TLS: this member's certificate, PEM (a cert-manager Secret's tls.crt); with --tls-key and --tls-ca; read again when it changes")
	fs.StringVar(&c.tlsKey, "tls-key", "", "peer mutual TLS: the certificate's private key, PEM (tls.key)")
	fs.StringVar(&c.tlsCA, "tls-ca", "", "peer mutual TLS: the CAs a peer's certificate must chain to, PEM (ca.crt)")
}

func (c *secretsConfig) validate() error {
	switch {
	case (c.tlsCert != "" || c.tlsKey != "" || c.tlsCA != "") && (c.tlsCert == "" || c.tlsKey == "" || c.tlsCA == ""):
		return errors.New("--tls-cert, --tls-key and --tls-ca go together")
	case c.secretKeyFile == "" && (!c.verifyIncoming || !c.verifyOutgoing):
		return errors.New("--gossip-verify-incoming and --gossip-verify-outgoing need --secret-key-file: without a key gossip is plaintext anyway")
	case !c.verifyOutgoing && c.verifyIncoming:
		return errors.New("--gossip-verify-outgoing=false needs --gossip-verify-incoming=false: members that send plaintext and refuse it would not hear each other")
	}
	return nil
}

// apply loads the secrets into cfg.
func (c *secretsConfig) apply(cfg *corral.Config, log *slog.Logger) (*keyFile, error) {
	if c.tlsCert != "" {
		peerTLS, err := corral.PeerTLSFromFiles(c.tlsCert, c.tlsKey, c.tlsCA, log)
		if err != nil {
			return nil, fmt.Errorf("--tls-cert, --tls-key, --tls-ca: %w", err)
		}
		cfg.PeerTLS = peerTLS
	}
	if c.secretKeyFile == "" {
		return nil, nil
	}
	kf := &keyFile{path: c.secretKeyFile, log: log}
	primary, secondary, err := kf.read()
	if err != nil {
		return nil, fmt.Errorf("--secret-key-file: %w", err)
	}
	cfg.SecretKey, cfg.SecondaryKeys = primary, secondary
	cfg.AcceptPlaintextGossip, cfg.SendPlaintextGossip = !c.verifyIncoming, !c.verifyOutgoing
	return kf, nil
}

// keyFilePoll is how often the gossip key file is checked for a change. The kubelet takes up
// to a minute or two to update a mounted Secret, so a poll costs nothing in the time a
// rotation step takes; unlike the TLS files, which are checked at each handshake, no event
// in the node's work would tell when to look.
const keyFilePoll = 2 * time.Second

// keyFile is the --secret-key-file, watched for changes: each new set of keys is applied with
// Node.SetSecretKeys, so a rotation needs no restart.
type keyFile struct {
	path string
	log  *slog.Logger

	// Written by read, before watch starts, and then by watch alone.
	stamp   os.FileInfo // of the file last read
	keys    [][]byte    // in use, primary first
	lastErr string      // the failure logged last, so that a lasting one is logged once
}

func (k *keyFile) read() (primary []byte, secondary [][]byte, err error) {
	fi, err := os.Stat(k.path)
	if err != nil {
		return nil, nil, err
	}
	b, err := os.ReadFile(k.path)
	if err != nil {
		return nil, nil, err
	}
	primary, secondary, err = corral.ParseSecretKeys(b)
	if err != nil {
		return nil, nil, err
	}
	k.stamp, k.keys = fi, append([][]byte{primary}, secondary...)
	return primary, secondary, nil
}

// watch polls the file until ctx ends, and applies its keys to n each time they change. A
// file that cannot be read or parsed changes nothing: the keys in use stay, and the failure
// is logged (once until it changes).
func (k *keyFile) watch(ctx context.Context, n *corral.Node) {
	t := time.NewTicker(keyFilePoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		fi, err := os.Stat(k.path)
		if err == nil && os.SameFile(fi, k.stamp) && fi.Size() == k.stamp.Size() && fi.ModTime().Equal(k.stamp.ModTime()) {
			continue
		}
		old := k.keys
		var primary []byte
		var secondary [][]byte
		if err == nil {
			primary, secondary, err = k.read()
		}
		if err == nil && !sameKeys(old, k.keys) {
			err = n.SetSecretKeys(primary, secondary...)
			if err == nil {
				k.log.Info("corral: gossip keys reloaded", "file", k.path, "keys", len(k.keys),
					"primary_sha256", fingerprint(primary))
			} else {
				k.keys = old
			}
		}
		if err != nil {
			if err.Error() != k.lastErr {
				k.log.Error("corral: --secret-key-file could not be reloaded; the gossip keys in use stay", "file", k.path, "err", err)
			}
			k.lastErr = err.Error()
			continue
		}
		k.lastErr = ""
	}
}

func sameKeys(a, b [][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

// fingerprint names a key in the log without giving it away: the first 8 bytes of its
// SHA-256, so that an operator can tell that every member uses the same primary key. A key
// of 16 bytes or more of randomness cannot be found from them.
func fingerprint(key []byte) string {
	sum := sha256.Sum256(key)
	return hex.EncodeToString(sum[:8])
}

// loadToken reads --api-token-file: nil for none.
func loadToken(path string) (*apitoken.Token, error) {
	if path == "" {
		return nil, nil
	}
	tok, err := apitoken.Load(path)
	if err != nil {
		return nil, fmt.Errorf("--api-token-file: %w", err)
	}
	return tok, nil
}
