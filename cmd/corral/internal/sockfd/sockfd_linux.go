//go:build linux

package sockfd

import (
	"errors"
	"fmt"
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

// Poller is an event loop's epoll instance, with an eventfd that wakes its waiter.
type Poller struct {
	ep   int
	wake int
}

// NewPoller makes a Poller, or says why the system refused one.
func NewPoller() (*Poller, error) {
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("epoll_create1: %w", err)
	}
	wake, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		unix.Close(ep)
		return nil, fmt.Errorf("eventfd: %w", err)
	}
	if err := unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, wake, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(wake)}); err != nil {
		unix.Close(ep)
		unix.Close(wake)
		return nil, fmt.Errorf("epoll_ctl: %w", err)
	}
	return &Poller{ep: ep, wake: wake}, nil
}

// Add watches fd for bytes to read and for its peer's hang-up.
func (p *Poller) Add(fd int) error {
	return unix.EpollCtl(p.ep, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP, Fd: int32(fd)})
}

// Del stops watching fd.
func (p *Poller) Del(fd int) { unix.EpollCtl(p.ep, unix.EPOLL_CTL_DEL, fd, nil) }

// Wait waits up to timeout milliseconds (-1: no bound) for events, as epoll_wait does.
func (p *Poller) Wait(events []unix.EpollEvent, timeout int) (int, error) {
	return unix.EpollWait(p.ep, events, timeout)
}

// Woken reports whether an event is the wake-up's; the waiter then calls Drain.
func (p *Poller) Woken(ev unix.EpollEvent) bool { return ev.Fd == int32(p.wake) }

// Drain consumes the wake-ups so far.
func (p *Poller) Drain() {
	var b [8]byte
	unix.Read(p.wake, b[:])
}

// Wake wakes the waiter. The caller makes sure the Poller is not closed meanwhile: its
// descriptors' numbers may be another file's after Close.
func (p *Poller) Wake() {
	one := [8]byte{1}
	for {
		_, err := unix.Write(p.wake, one[:])
		if err != unix.EINTR {
			return // EAGAIN: the counter is full of wake-ups the waiter has yet to see
		}
	}
}

// Close closes the epoll instance and the eventfd.
func (p *Poller) Close() {
	unix.Close(p.ep)
	unix.Close(p.wake)
}
