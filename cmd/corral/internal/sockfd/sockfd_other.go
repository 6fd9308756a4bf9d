//go:build !linux

package sockfd

import (
	"errors"
	"net"
)

// Take fails: there are no event loops on this system.
func Take(net.Conn) (int, error) { return -1, errors.New("no event loops on this system") }

// Conn fails: there are no event loops on this system.
func Conn(int) (net.Conn, error) { return nil, errors.New("no event loops on this system") }

// Close does nothing.
func Close(int) {}
