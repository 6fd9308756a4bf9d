// Package limit is corral's limits on input — keys, values, group names — and the error that
// names the limit a request broke (corral.LimitError), with the names under which each limit
// hit is counted (corral_limit_hits_total).
package limit

import (
	"fmt"

	"github.com/corralcache/corral/fill"
)

// Error reports input that breaks one of corral's limits: it names the limit. Package corral
// answers it as a *corral.LimitError, whose fields it has.
type Error struct {
	Limit string // "key", "value"
	Size  int    // the offending size in bytes
	Max   int    // the limit in bytes
}

func (e *Error) Error() string {
	if e.Size == 0 {
		return fmt.Sprintf("corral: empty %s", e.Limit)
	}
	return fmt.Sprintf("corral: %s of %d bytes exceeds the %s limit of %d bytes", e.Limit, e.Size, e.Limit, e.Max)
}

// CheckKey returns an *Error for a key that is empty or longer than fill.MaxKeyBytes.
func CheckKey(key string) error {
	if fill.CheckKey(key) != nil {
		return &Error{Limit: Key, Size: len(key), Max: fill.MaxKeyBytes}
	}
	return nil
}

// CheckValue returns an *Error for a value of size bytes above max.
func CheckValue(size, max int) error {
	if size > max {
		return &Error{Limit: Value, Size: size, Max: max}
	}
	return nil
}

// The limits counted in corral_limit_hits_total, by label: input over a limit (an Error, to
// a caller here or to a peer), and peers turned away by the transport.
const (
	Key             = "key"
	Value           = "value"
	GroupName       = "group_name"
	PeerStreamCalls = "peer_stream_calls"
	PeerHandshake   = "peer_handshake"
)

// Counted lists the limits above, in the order corral_limit_hits_total exports them.
var Counted = []string{Key, Value, GroupName, PeerStreamCalls, PeerHandshake}

// Checker checks input against the limits and counts each hit under its name.
type Checker struct {
	MaxValueBytes int               // the largest value, in bytes
	Hit           func(name string) // counts a hit of a limit of Counted; nil = not counted
}

// Key returns an *Error for a bad key (CheckKey), and counts it.
func (c *Checker) Key(key string) error {
	err := CheckKey(key)
	if err != nil {
		c.Count(Key)
	}
	return err
}

// Value returns an *Error for a value over MaxValueBytes, and counts it.
func (c *Checker) Value(size int) error {
	err := CheckValue(size, c.MaxValueBytes)
	if err != nil {
		c.Count(Value)
	}
	return err
}

// Count counts a hit of the limit called name.
func (c *Checker) Count(name string) {
	if c.Hit != nil {
		c.Hit(name)
	}
}
