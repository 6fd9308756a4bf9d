package lease

import (
	"errors"
	"fmt"
	"time"

	"github.com/corralcache/corral/fill"
)

// State says what the owner answered a Lease with. Its values are corral.LeaseState's.
type State string

const (
	Hit   State = "hit"   // the value is fresh
	Fill  State = "fill"  // nobody held the lease: this caller does (a token)
	Stale State = "stale" // the value is stale, within its SWR; with a token, this caller refreshes it
	Busy  State = "busy"  // another caller holds the lease and no value arrived within the wait
	// Moved is the owner's answer to a waiter whose lease ended because the key's owner
	// changed: the caller asks the new owner. It never reaches a corral user.
	Moved State = "moved"
)

// Limits of a lease request: the same as corral.MinLeaseFill, MaxLeaseFill and MaxLeaseWait,
// which say them to users (a test of package corral holds them equal).
const (
	MinFill = time.Millisecond // shortest fill
	MaxFill = time.Hour        // longest fill
	MaxWait = time.Minute      // longest wait

	// MaxHeld bounds the leases one group holds on one node at once: each costs a timer and a
	// map entry until it ends, and a key without a value must not be a way to pin memory for
	// an hour each.
	MaxHeld = 1 << 16
)

// The errors of the owner's side, which package corral answers as ErrLeaseArgument and
// ErrTooManyLeases: each has the text of its public counterpart. A closed table answers
// view.ErrClosed.
var (
	ErrArgument = errors.New("corral: invalid lease request")
	ErrTooMany  = errors.New("corral: too many leases held")
)

// Validate checks the fill and wait of a lease request.
func Validate(fillFor, wait time.Duration) error {
	switch {
	case fillFor < MinFill || fillFor > MaxFill:
		return fmt.Errorf("%w: fill %v out of [%v, %v]", ErrArgument, fillFor, MinFill, MaxFill)
	case wait < 0 || wait > MaxWait:
		return fmt.Errorf("%w: wait %v out of [0, %v]", ErrArgument, wait, MaxWait)
	}
	return nil
}

// Expiry is the lifetime of one written value: corral.Expiry.
type Expiry struct {
	TTL  time.Duration // how long it is fresh; 0 = it never expires
	SWR  time.Duration // then how long it is served stale while one caller refreshes it
	Tags []string      // the value's tags (RemoveByTag); nil = none
}

// Validate refuses a negative TTL or SWR.
func (e Expiry) Validate() error {
	if e.TTL < 0 || e.SWR < 0 {
		return fmt.Errorf("%w: negative TTL %v or SWR %v", ErrArgument, e.TTL, e.SWR)
	}
	return nil
}

func (e Expiry) fresh() time.Duration {
	if e.TTL == 0 {
		return fill.Never
	}
	return e.TTL
}
