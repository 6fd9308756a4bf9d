//go:build !linux

package resp

// Event loops are Linux's (epoll): elsewhere every connection is served on a goroutine of
// its own.

type eventLoop struct{}

func startLoops(*Server, int) []*eventLoop { return nil }

func (*eventLoop) give(*conn) bool { return false }
func (*eventLoop) stop()           {}
