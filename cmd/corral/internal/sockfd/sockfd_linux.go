//go:build linux

package sockfd

import (
	"errors"
	"net"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// Take takes nc's socket out of the Go runtime's poller as a file descriptor of the
// caller's own (non-blocking, close-on-exec), and closes nc.
func Take(nc net.Conn) (int, error) {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return -1, errors.New("not a socket")
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return -1, err
	}
	fd, derr := -1, error(nil)
	if err := rc.Control(func(s uintptr) { fd, derr = unix.FcntlInt(s, unix.F_DUPFD_CLOEXEC, 0) }); err != nil {
		return -1, err
	}
	if derr != nil {
		return -1, derr
	}
	nc.Close() // the socket stays open: fd refers to it
	return fd, nil
}

// Conn is a net.Conn on a duplicate of fd, in the Go runtime's poller: closing it leaves
// fd and the socket open.
func Conn(fd int) (net.Conn, error) {
	dup, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(dup), "sockfd")
	defer f.Close()
	return net.FileConn(f) // its own duplicate
}

// Read reads from fd into p, again after an interrupted call.
func Read(fd int, p []byte) (int, error) {
	for {
		n, err := unix.Read(fd, p)
		if err != unix.EINTR {
			return n, err
		}
	}
}

// Write writes p to fd until it is all written or fd takes no more now (unix.EAGAIN).
func Write(fd int, p []byte) (int, error) {
	written := 0
	for written < len(p) {
		n, err := unix.Write(fd, p[written:])
		if n > 0 {
			written += n
		}
		switch {
		case err == unix.EINTR:
		case err != nil:
			return written, err
		}
	}
	return written, nil
}

// Close closes fd.
func Close(fd int) { unix.Close(fd) }
