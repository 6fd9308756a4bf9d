package corral_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/corralcache/corral"
)

// A key file in the middle of a rotation: the new key is primary, the old one still accepted.
func ExampleParseSecretKeys() {
	file := []byte("new-gossip-key-0123456789abcdefg\nold-gossip-key-0123456789abcdefg\n")
	primary, more, err := corral.ParseSecretKeys(file)
	if err != nil {
		panic(err)
	}
	fmt.Printf("primary %q, %d more\n", primary, len(more))
	// Output: primary "new-gossip-key-0123456789abcdefg", 1 more
}

// The three steps of a gossip key rotation, on one node; every member takes each step before
// any takes the next.
func ExampleNode_SetSecretKeys() {
	oldKey, newKey := []byte("old-gossip-key-0123456789abcdefg"), []byte("new-gossip-key-0123456789abcdefg")
	node, err := corral.New(corral.Config{Name: "example", BindAddr: "127.0.0.1", SecretKey: oldKey})
	if err != nil {
		panic(err)
	}
	defer node.Close(context.Background())
	for _, step := range [][][]byte{{oldKey, newKey}, {newKey, oldKey}, {newKey}} {
		if err := node.SetSecretKeys(step[0], step[1:]...); err != nil {
			panic(err)
		}
	}
	fmt.Println("rotated")
	// Output: rotated
}

// Peer TLS from the files of a cert-manager Secret mounted at /etc/corral/tls. No Output: it
// needs those files.
func ExamplePeerTLSFromFiles() {
	logger := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	peerTLS, err := corral.PeerTLSFromFiles("/etc/corral/tls/tls.crt", "/etc/corral/tls/tls.key", "/etc/corral/tls/ca.crt", logger)
	if err != nil {
		logger.Error("peer TLS", "err", err)
		return
	}
	node, err := corral.New(corral.Config{PeerTLS: peerTLS, Logger: logger})
	if err != nil {
		logger.Error("corral", "err", err)
		return
	}
	defer node.Close(context.Background())
}
