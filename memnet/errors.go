package memnet

import (
	"context"
	"net"
	"os"
	"syscall"
)

// The errors below are the ones the kernel's sockets give, wrapped as package net wraps them,
// so code that checks errors.Is(err, syscall.ECONNRESET), errors.Is(err, os.ErrDeadlineExceeded),
// errors.Is(err, net.ErrClosed) or net.Error's Timeout works unchanged.

func (c *Conn) opErr(op string, err error) error {
	return &net.OpError{Op: op, Net: "tcp", Source: c.local, Addr: c.remote, Err: err}
}

var (
	errReset   = os.NewSyscallError("read", syscall.ECONNRESET)
	errRefused = os.NewSyscallError("connect", syscall.ECONNREFUSED)
	errMsgSize = os.NewSyscallError("sendto", syscall.EMSGSIZE)
)

// timeoutError is what a dial returns at its deadline, as package net's: "i/o timeout", a
// net.Error whose Timeout is true, and both os.ErrDeadlineExceeded and
// context.DeadlineExceeded for errors.Is.
type timeoutError struct{}

func (timeoutError) Error() string   { return "i/o timeout" }
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }
func (timeoutError) Is(err error) bool {
	return err == os.ErrDeadlineExceeded || err == context.DeadlineExceeded
}
