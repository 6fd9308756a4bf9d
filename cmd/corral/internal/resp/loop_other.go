//go:build !linux

package resp

import (
	"errors"
	"net"
)

// Event loops are Linux's (epoll): elsewhere every connection is served on a goroutine of
// its own.

type eventLoop struct{}

func startLoops(*Server, int) []*eventLoop { return nil }

func (*eventLoop) give(*conn) bool { return false }
func (*eventLoop) stop()           {}

func takeFD(net.Conn) (int, error) { return -1, errors.New("no event loops on this system") }
func closeFD(int)                  {}
