package resp

import (
	"errors"
	"fmt"
	"time"

	"github.com/corralcache/corral/fill"
)

// Limits bound what a connection may cost. A Limits written by hand must set every field:
// zero is refused.
type Limits struct {
	// MaxConns is how many connections may be open at once (--resp-max-conns); one more is
	// told "max number of clients reached" and closed. At least 1.
	MaxConns int
	// IdleTimeout is how long a connection may send no command (--resp-idle-timeout) before
	// it is told so and closed. Positive.
	IdleTimeout time.Duration
	// CommandTimeout is how long a command may take to arrive whole, from its first byte, and
	// a reply to be read (--resp-command-timeout): a slowloris bound. Positive.
	CommandTimeout time.Duration
	// MaxPendingBytes bounds the bytes that commands still being read hold at once, over all
	// connections, past the first 64 KiB of each (--resp-max-pending-bytes); a command past
	// it is refused and its connection closed. At least 1; one command's bound (the value
	// limit + 72 KiB) applies even when it is lower.
	MaxPendingBytes int64
}

// DefaultLimits returns the production limits. A client pool keeps a few connections per
// process (go-redis: 10 per GOMAXPROCS, lazily), so 4096 connections serve hundreds of
// application processes. An idle connection that has served a GET costs about 1 KiB on an
// event loop, which holds no buffers of a connection's own (measured: 2000 of them, RSS
// 26.2 → 28.3 MiB), 4 MiB at the bound; one on a goroutine of its own (--resp-loops 0, or
// after a command the loop does not answer) about 18 KiB (26.3 → 61.3 MiB: the pages of its
// 16 KiB reply buffer that no reply reached are not resident), 72 MiB at the bound. Five
// minutes idle is far past any pool's use of a connection under load, and short enough that
// connections a client forgot give their places back. Ten seconds to send one command (8 MiB at 0.8 MB/s) or to read a
// reply is generous on a pod network, and the slowloris bound of the HTTP front. 64 MiB of
// commands still being read is eight values of the largest default size arriving at once.
func DefaultLimits() Limits {
	return Limits{
		MaxConns:        4096,
		IdleTimeout:     5 * time.Minute,
		CommandTimeout:  10 * time.Second,
		MaxPendingBytes: 64 << 20,
	}
}

// Validate returns an error, naming the flag, for a limit out of its range.
func (l Limits) Validate() error {
	switch {
	case l.MaxConns < 1:
		return fmt.Errorf("--resp-max-conns %d: want at least 1", l.MaxConns)
	case l.IdleTimeout <= 0 || l.CommandTimeout <= 0:
		return errors.New("--resp-idle-timeout and --resp-command-timeout must be positive")
	case l.MaxPendingBytes < 1:
		return fmt.Errorf("--resp-max-pending-bytes %d: want at least 1", l.MaxPendingBytes)
	}
	return nil
}

// commandBytes bounds one command: a value, two keys and a little more.
func commandBytes(maxValueBytes int) int { return maxValueBytes + 2*fill.MaxKeyBytes + 64<<10 }
