package fill

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrNotFound is what a loader returns when the key does not exist at the source. It is not
// a failure of the fill: it is counted as a fill, never as a fill error, and with
// Config.NegativeTTL it is remembered for that long. Get returns it wrapped in a *FillError
// for the callers of the fill, and bare for a remembered (negative) hit; errors.Is finds it
// either way.
var ErrNotFound = errors.New("corral: not found")

// ErrFillCycle is returned by Get when the key's fill is already part of the caller's fill
// chain: a loader that asks, directly or through other caches and peers, for the key it is
// filling. Waiting would deadlock, so Get fails at once.
var ErrFillCycle = errors.New("corral: fill cycle")

// ErrClosed is returned by Get, Set and Remove after Close.
var ErrClosed = errors.New("corral: cache closed")

// FillError is the error of every caller of a fill that failed: the loader returned an error
// (ErrNotFound included), panicked, or ran past the fill timeout.
//
// The caller whose Get started the fill has Shared == false; the callers that waited on it
// have Shared == true. All of them can reach the loader's error with errors.Is / errors.As.
type FillError struct {
	Name   string // the cache's Config.Name
	Key    string
	Err    error // the loader's error; a *PanicError when it panicked
	Shared bool  // the caller waited on a fill that another Get started
}

func (e *FillError) Error() string {
	return fmt.Sprintf("corral: fill %s/%q: %v", e.Name, e.Key, e.Err)
}

func (e *FillError) Unwrap() error { return e.Err }

// TimeoutError is a FillError's Err when the fill ran past Config.FillTimeout (the loader's
// late result, if any, is dropped). errors.Is(err, context.DeadlineExceeded) holds.
type TimeoutError struct {
	Timeout time.Duration // Config.FillTimeout
}

func (e *TimeoutError) Error() string { return fmt.Sprintf("fill timeout %v", e.Timeout) }

func (e *TimeoutError) Unwrap() error { return context.DeadlineExceeded }

// PanicError is a FillError's Err when the loader panicked. The panic is recovered so that it
// never crosses Get; the stack is logged once and kept here.
type PanicError struct {
	Value any
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("loader panic: %v", e.Value) }

// KeyError reports a key that breaks the key limits: empty, or longer than MaxKeyBytes.
type KeyError struct {
	Len int
}

func (e *KeyError) Error() string {
	if e.Len == 0 {
		return "corral: empty key"
	}
	return fmt.Sprintf("corral: key of %d bytes exceeds the limit of %d bytes", e.Len, MaxKeyBytes)
}

// MaxKeyBytes is the longest key accepted, in bytes.
const MaxKeyBytes = 4 << 10

// CheckKey returns a *KeyError when key is empty or longer than MaxKeyBytes, and nil
// otherwise.
func CheckKey(key string) error {
	if n := len(key); n == 0 || n > MaxKeyBytes {
		return &KeyError{Len: n}
	}
	return nil
}
