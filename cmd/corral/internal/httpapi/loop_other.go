//go:build !linux

package httpapi

// Event loops are Linux's (epoll): elsewhere every connection is served on a goroutine of
// its own.

type httpLoop struct{}

func startLoops(*Server, int) []*httpLoop { return nil }

func (*httpLoop) give(int, string, bool) bool { return false }
func (*httpLoop) stop()                       {}

func (*frontConn) handBack() bool { return false }
