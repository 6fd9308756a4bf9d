package corral

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
)

// A gossip key file (corral serve's --secret-key-file, or a file of a library user's own, read
// with ParseSecretKeys) holds one key, or a keyring for a rotation. It is read one of two ways:
//
//  1. One key. When the file, without the line ends (LF or CRLF) at its end, is exactly 16,
//     24 or 32 bytes long, those bytes are the key, whatever they are (newline bytes inside
//     included). This is the format of every key file corral has ever read, and it means what
//     it always meant.
//  2. A list. Any other file is a list of keys, one per line (LF or CRLF): a line is either the
//     key as written — its bytes, 16, 24 or 32 of them, as in a one-key file — or "base64:"
//     and the key in standard base64 with padding (`openssl rand -base64 32`, or a Consul or
//     Serf key), for keys that are not text. The first key is the primary: it encrypts what
//     the node sends; every key decrypts what it receives. There are no comments and no empty
//     lines, no key appears twice, and there are at most 8 keys.
//
// The two readings never disagree: a list of one key written as it is, is a one-key file; a
// list of two keys has at least 33 bytes; and a "base64:" line is 31, 39 or 51 bytes long. So
// the key of a one-key file can be copied into a list as a line of its own during a rotation
// (when it is text; a binary key goes in as base64:) and means the same key there.

// maxSecretKeys bounds a keyring (see peer.MaxKeys).
const maxSecretKeys = 8

const base64Prefix = "base64:"

// ParseSecretKeys reads the contents of a gossip key file (see above) and returns its primary
// key and the others, for Config.SecretKey and Config.SecondaryKeys or for
// Node.SetSecretKeys. An error names the line and its length, never a key's bytes.
func ParseSecretKeys(b []byte) (primary []byte, secondary [][]byte, err error) {
	trimmed := bytes.TrimRight(b, "\r\n")
	switch len(trimmed) {
	case 16, 24, 32:
		return bytes.Clone(trimmed), nil, nil
	case 0:
		return nil, nil, errors.New("corral: the key file is empty")
	}
	var keys [][]byte
	for i, line := range bytes.Split(trimmed, []byte("\n")) {
		line = bytes.TrimSuffix(line, []byte("\r"))
		key := line
		if rest, ok := bytes.CutPrefix(line, []byte(base64Prefix)); ok {
			key = make([]byte, base64.StdEncoding.DecodedLen(len(rest)))
			n, err := base64.StdEncoding.Decode(key, rest)
			if err != nil {
				return nil, nil, fmt.Errorf("corral: key file line %d: not base64 after %q: %w", i+1, base64Prefix, err)
			}
			key = key[:n]
		}
		switch {
		case len(line) == 0:
			return nil, nil, fmt.Errorf("corral: key file line %d is empty", i+1)
		case len(key) != 16 && len(key) != 24 && len(key) != 32 && len(key) == len(line):
			return nil, nil, fmt.Errorf("corral: key file line %d is %d bytes; a key is 16, 24 or 32 bytes as written, or %s and the key in base64", i+1, len(line), base64Prefix)
		case len(key) != 16 && len(key) != 24 && len(key) != 32:
			return nil, nil, fmt.Errorf("corral: key file line %d: the base64 key is %d bytes; want 16, 24 or 32", i+1, len(key))
		}
		for j, k := range keys {
			if bytes.Equal(k, key) {
				return nil, nil, fmt.Errorf("corral: key file lines %d and %d hold the same key", j+1, i+1)
			}
		}
		keys = append(keys, bytes.Clone(key))
	}
	if len(keys) > maxSecretKeys {
		return nil, nil, fmt.Errorf("corral: the key file holds %d keys; at most %d", len(keys), maxSecretKeys)
	}
	return keys[0], keys[1:], nil
}

// SetSecretKeys replaces this node's gossip keyring while it runs: primary encrypts what it
// sends from now on; primary and secondary decrypt what it receives. Rotating the key takes
// three calls on every member, each begun only once every member has made the one before:
// SetSecretKeys(old, new), then SetSecretKeys(new, old), then SetSecretKeys(new) (SECURITY.md).
//
// It fails, changing nothing, when the node was started without Config.SecretKey (gossip is
// plaintext, and turning encryption on takes restarts, see AcceptPlaintextGossip), when the
// keys break the rules of Config.SecondaryKeys, or after Close began.
func (n *Node) SetSecretKeys(primary []byte, secondary ...[]byte) error {
	members := n.members.Get()
	if members == nil || n.state.Leaving.Load() {
		return ErrClosed
	}
	if err := members.SetKeys(primary, secondary); err != nil {
		return fmt.Errorf("corral: set gossip keys: %w", err)
	}
	return nil
}
