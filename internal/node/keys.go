package node

import "fmt"

// SetSecretKeys replaces this node's gossip keyring while it runs (corral.Node.SetSecretKeys).
//
// It fails, changing nothing, when the node was started without Config.SecretKey, when the
// keys break the rules of Config.SecondaryKeys, or after Close began (ErrClosed).
func (n *Node) SetSecretKeys(primary []byte, secondary ...[]byte) error {
	members := n.membership()
	if members == nil || n.leaving.Load() {
		return ErrClosed
	}
	if err := members.SetKeys(primary, secondary); err != nil {
		return fmt.Errorf("corral: set gossip keys: %w", err)
	}
	return nil
}
