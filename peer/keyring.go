package peer

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/hashicorp/memberlist"
)

// MaxKeys bounds the keyring: SecretKey and SecondaryKeys together. A rotation needs two;
// every incoming packet may be tried against each key, so the bound also bounds that work.
const MaxKeys = 8

// checkKeys checks a keyring: primary first, every key 16, 24 or 32 bytes, none twice, at
// most MaxKeys.
func checkKeys(primary []byte, secondary [][]byte) error {
	keys := append([][]byte{primary}, secondary...)
	if len(keys) > MaxKeys {
		return fmt.Errorf("peer: %d gossip keys; at most %d", len(keys), MaxKeys)
	}
	for i, k := range keys {
		switch len(k) {
		case 16, 24, 32:
		default:
			return fmt.Errorf("peer: gossip key %d is %d bytes; want 16, 24 or 32", i+1, len(k))
		}
		for _, earlier := range keys[:i] {
			if bytes.Equal(k, earlier) {
				return fmt.Errorf("peer: gossip key %d is given twice", i+1)
			}
		}
	}
	return nil
}

func cloneKeys(keys [][]byte) [][]byte {
	if keys == nil {
		return nil
	}
	out := make([][]byte, len(keys))
	for i, k := range keys {
		out[i] = bytes.Clone(k)
	}
	return out
}

// newKeyring returns memberlist's keyring for s, or nil for plaintext gossip.
func newKeyring(s settings) (*memberlist.Keyring, error) {
	if len(s.SecretKey) == 0 {
		return nil, nil
	}
	return memberlist.NewKeyring(append([][]byte{s.SecretKey}, s.SecondaryKeys...), s.SecretKey)
}

// SetKeys replaces the gossip keyring while running: primary encrypts what this member sends
// from now on, and primary and secondary decrypt what it receives. This is how the key is
// rotated without a restart: every member first accepts the new key as a secondary, then
// makes it primary, then drops the old one, each step begun only once every member has
// finished the one before (see corral's SECURITY.md).
//
// It fails, changing nothing, when this member was started without SecretKey (gossip is
// plaintext: turning encryption on takes a restart with AcceptPlaintext and SendPlaintext),
// or when the keys break the rules of Config.SecretKey and SecondaryKeys.
func (m *Membership) SetKeys(primary []byte, secondary [][]byte) error {
	if m.keyring == nil {
		return errors.New("peer: SetKeys: gossip is plaintext; encryption is turned on by a restart with SecretKey")
	}
	if err := checkKeys(primary, secondary); err != nil {
		return err
	}
	m.keysMu.Lock()
	defer m.keysMu.Unlock()
	keep := append([][]byte{primary}, secondary...)
	// Add before use, use before remove: memberlist refuses to remove the primary key, and
	// a packet that arrives between two calls meets a keyring that holds both old and new.
	for _, k := range keep {
		if err := m.keyring.AddKey(bytes.Clone(k)); err != nil {
			return fmt.Errorf("peer: SetKeys: %w", err)
		}
	}
	if err := m.keyring.UseKey(primary); err != nil {
		return fmt.Errorf("peer: SetKeys: %w", err)
	}
	for _, k := range m.keyring.GetKeys() {
		if !containsKey(keep, k) {
			if err := m.keyring.RemoveKey(k); err != nil {
				return fmt.Errorf("peer: SetKeys: %w", err)
			}
		}
	}
	return nil
}

// KeyCount returns how many gossip keys this member holds: 0 for plaintext gossip.
func (m *Membership) KeyCount() int {
	if m.keyring == nil {
		return 0
	}
	return len(m.keyring.GetKeys())
}

func containsKey(keys [][]byte, k []byte) bool {
	for _, c := range keys {
		if bytes.Equal(c, k) {
			return true
		}
	}
	return false
}
