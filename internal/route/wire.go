package route

import (
	"errors"
	"fmt"

	"github.com/corralcache/corral/fill"
	"github.com/corralcache/corral/internal/limit"
	"github.com/corralcache/corral/internal/view"
	"github.com/corralcache/corral/transport"
)

// RemoteError marks an error that the key's owner reported: a fill that failed there.
type RemoteError struct{ Err error }

func (e *RemoteError) Error() string { return e.Err.Error() }
func (e *RemoteError) Unwrap() error { return e.Err }

// FromWire turns the transport's errors into corral's, on the asking side: the owner's
// answers are marked remote, and fill.ErrNotFound / fill.ErrFillCycle become themselves
// again.
func FromWire(err error) error {
	var ffe *transport.FillFailedError
	switch {
	case errors.Is(err, transport.ErrClosed):
		return view.ErrClosed // this node is closing; the owner said nothing
	case errors.Is(err, transport.ErrNotFound):
		return &RemoteError{Err: fill.ErrNotFound}
	case errors.Is(err, transport.ErrFillCycle):
		return &RemoteError{Err: fill.ErrFillCycle}
	case errors.As(err, &ffe):
		return &RemoteError{Err: errors.New(ffe.Msg)}
	case errors.Is(err, transport.ErrUnknownGroup), errors.Is(err, transport.ErrInvalidArgument):
		return &RemoteError{Err: err}
	}
	return err
}

// ToWire turns corral's errors into the transport's, on the serving side.
func ToWire(err error) error {
	var fe *fill.FillError
	var le *limit.Error
	var ke *fill.KeyError
	var te *fill.TagError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &te):
		return fmt.Errorf("%w: %v", transport.ErrInvalidArgument, err)
	case errors.Is(err, fill.ErrFillCycle):
		return transport.ErrFillCycle
	case errors.Is(err, fill.ErrNotFound):
		return transport.ErrNotFound
	case errors.As(err, &le), errors.As(err, &ke):
		return fmt.Errorf("%w: %v", transport.ErrInvalidArgument, err)
	case errors.As(err, &fe):
		// A local fill that itself asked a remote owner reports the innermost cause.
		var re *RemoteError
		if errors.As(fe.Err, &re) {
			if w := ToWire(re.Err); w != re.Err {
				return w
			}
			return &transport.FillFailedError{Msg: re.Err.Error()}
		}
		return &transport.FillFailedError{Msg: fe.Err.Error()}
	}
	return err
}
