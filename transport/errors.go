package transport

import (
	"errors"
)

// The errors below cross the wire as themselves: a Handler returns one (or an
// error wrapping one) and the Client on the other side returns an error for
// which errors.Is holds with the same sentinel. codes.go has the table of
// gRPC codes they travel as.
var (
	// ErrNotFound means the owner's loader said the key does not exist.
	// Client.Get returns exactly ErrNotFound (err == ErrNotFound holds).
	ErrNotFound = errors.New("transport: not found")

	// ErrFillCycle means the request belongs to a fill that the receiver is
	// already part of (its chain came back around). Client.Get returns
	// exactly ErrFillCycle.
	ErrFillCycle = errors.New("transport: fill cycle")

	// ErrUnknownGroup means the receiver has no group of that name (not yet
	// registered, or a replica running other code). Any Client call can
	// return an error wrapping it; the message is the peer's.
	ErrUnknownGroup = errors.New("transport: unknown group")

	// ErrInvalidArgument means a request broke a limit or was malformed. A
	// Handler wraps it with the reason ("%w: key of 5000 bytes exceeds the
	// 4096-byte limit"); any Client call returns an error wrapping it whose
	// message is the peer's, unchanged. A message larger than MaxMessageSize,
	// on either side, also comes back as ErrInvalidArgument.
	ErrInvalidArgument = errors.New("transport: invalid argument")

	// ErrLeaving means the receiver is leaving the cluster: it takes no
	// hand-off, and once it has left it routes no Get, Set or Remove. The
	// sender asks the key's next owner instead. Any Client call can return an
	// error wrapping it.
	ErrLeaving = errors.New("transport: receiver is leaving")

	// ErrNotMember means the receiver refused the request because it does not know the
	// sender as a member of its cluster (its address is not a member's). A member that has
	// just joined may meet it for a moment, until gossip has told the receiver. Any Client
	// call can return an error wrapping it.
	ErrNotMember = errors.New("transport: sender is not a member")

	// ErrStreamFull means a peer had more Gets in flight on its stream than
	// the receiver's ServerConfig.MaxStreamCalls: the receiver answered the
	// excess with it and did nothing else. A Client whose MaxStreamCalls is at
	// most the Server's never sees it.
	ErrStreamFull = errors.New("transport: too many gets in flight on one stream")

	// ErrClosed is returned by Client calls after Client.Close.
	ErrClosed = errors.New("transport: client closed")
)

// FillFailedError says the owner's loader failed or panicked. A Handler
// returns it with the loader's message; Client.Get returns a
// *FillFailedError with the same Msg:
//
//	var ffe *transport.FillFailedError
//	if errors.As(err, &ffe) {
//		log.Printf("owner's loader failed: %s", ffe.Msg)
//	}
type FillFailedError struct {
	Msg string // the loader's error message, as the owner saw it
}

func (e *FillFailedError) Error() string { return "transport: fill failed on owner: " + e.Msg }

// UnreachableError says the peer could not be reached or did not answer in
// time: the connection was refused, reset or closed, the peer was stopping
// (gRPC Unavailable), or the call ran past CallTimeout. IsUnreachable reports
// it. It is never returned when the caller's own context ended: the Client
// then returns ctx.Err() alone.
type UnreachableError struct {
	Addr string // the peer's address as passed to the Client
	Err  error  // what gRPC reported
}

func (e *UnreachableError) Error() string {
	return "transport: peer " + e.Addr + " unreachable: " + e.Err.Error()
}

func (e *UnreachableError) Unwrap() error { return e.Err }

// RemoteError is an answer from the peer that is not one of the sentinels
// above, nor a FillFailedError: typically a Handler error that this package
// does not know (sent as gRPC Internal), or a code produced by something
// between the peers. Errors wrapping ErrInvalidArgument and ErrUnknownGroup
// are RemoteErrors too; Unwrap gives the sentinel.
type RemoteError struct {
	Code string // the gRPC code's name, as codes.Code.String gives it ("Internal", ...)
	Msg  string // the peer's message

	kind error // the sentinel this error stands for, or nil
}

func (e *RemoteError) Error() string {
	if e.kind != nil {
		// The peer's message already says what it is ("transport: invalid
		// argument: key too long"), and callers were promised it unchanged.
		return e.Msg
	}
	return "transport: peer answered " + e.Code + ": " + e.Msg
}

func (e *RemoteError) Unwrap() error { return e.kind }

// IsUnreachable reports whether err says the peer could not be reached or did
// not answer in time (an *UnreachableError is in its chain). The caller then
// routes the request to the key's next owner on the ring.
//
// It is false for every answer the peer gave (ErrNotFound, ErrFillCycle,
// *FillFailedError, *RemoteError, ...) and for the caller's own context
// ending (context.Canceled, context.DeadlineExceeded): in neither case would
// asking another member help.
func IsUnreachable(err error) bool {
	var u *UnreachableError
	return errors.As(err, &u)
}
