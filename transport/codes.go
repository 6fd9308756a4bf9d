package transport

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/corralcache/corral/transport/peerpb"
)

// How errors cross the wire. Only this file speaks gRPC codes: the rest of the package
// makes its status errors with the constructors at the end of this file and asks
// isUnimplemented of them, and a GetStream carries them in Failure frames (toFailure,
// fromFailure) so that a Get on a stream fails as a unary Get would.
//
//	Handler returns (errors.Is / As)   code                   detail               Client returns
//	ErrNotFound                        NotFound               -                    ErrNotFound (exactly)
//	ErrFillCycle                       Aborted                REASON_FILL_CYCLE    ErrFillCycle (exactly)
//	ErrUnknownGroup                    FailedPrecondition     REASON_UNKNOWN_GROUP *RemoteError wrapping ErrUnknownGroup, peer's message
//	ErrLeaving                         FailedPrecondition     REASON_LEAVING       *RemoteError wrapping ErrLeaving, peer's message
//	ErrNotMember                       PermissionDenied       REASON_NOT_MEMBER    *RemoteError wrapping ErrNotMember, peer's message
//	ErrInvalidArgument                 InvalidArgument        -                    *RemoteError wrapping ErrInvalidArgument, peer's message
//	(a GetStream call past the         ResourceExhausted      REASON_STREAM_FULL   *RemoteError wrapping ErrStreamFull, peer's message
//	  Server's MaxStreamCalls)
//	*FillFailedError{Msg}              Unknown, message Msg   REASON_FILL_FAILED   *FillFailedError{Msg}
//	ctx.Err() after the call's ctx     Canceled /             -                    (the caller has gone; see below)
//	  ended                            DeadlineExceeded
//	anything else                      Internal               -                    *RemoteError{Code: "Internal"}
//	(a panic in the Handler)           Internal               -                    *RemoteError{Code: "Internal"}
//
// and what gRPC itself, or the Get stream in its place, reports on the client:
//
//	caller's ctx done                  any                                         ctx.Err(), alone
//	message over MaxMessageSize        ResourceExhausted                           *RemoteError wrapping ErrInvalidArgument
//	refused, reset, closed, stopping   Unavailable                                 *UnreachableError
//	past CallTimeout                   DeadlineExceeded                            *UnreachableError
//	past the caller's own deadline     DeadlineExceeded                            context.DeadlineExceeded
//	conn closed by Forget              Canceled                                    *UnreachableError
//	conn closed by Close               Canceled                                    ErrClosed
//	any other code, or Aborted /       that code                                   *RemoteError{Code}
//	  FailedPrecondition / Unknown
//	  without our detail
//
// The detail exists because gRPC, or an HTTP/2 proxy between the peers, can
// produce Unknown on its own; Aborted and FailedPrecondition carry it too so
// that the mapping never rests on a code alone where a mistake would change
// behaviour.
//
// A Handler error that is a gRPC status, or wraps one, is still sent as
// Internal: a Handler that called another peer and got Unavailable back must
// not make its own caller believe that *it* is unreachable, which would start
// a failover to the ring successor and an extra fill.

// toStatus turns a Handler error into the status error sent to the client.
// ctx is the request's context on the server.
func toStatus(ctx context.Context, err error) error {
	var ffe *FillFailedError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrNotFound):
		return status.Error(codes.NotFound, err.Error())
	case errors.Is(err, ErrFillCycle):
		return withReason(codes.Aborted, err.Error(), peerpb.Reason_REASON_FILL_CYCLE)
	case errors.Is(err, ErrUnknownGroup):
		return withReason(codes.FailedPrecondition, err.Error(), peerpb.Reason_REASON_UNKNOWN_GROUP)
	case errors.Is(err, ErrLeaving):
		return withReason(codes.FailedPrecondition, err.Error(), peerpb.Reason_REASON_LEAVING)
	case errors.Is(err, ErrNotMember):
		return withReason(codes.PermissionDenied, err.Error(), peerpb.Reason_REASON_NOT_MEMBER)
	case errors.Is(err, ErrInvalidArgument):
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.As(err, &ffe):
		return withReason(codes.Unknown, ffe.Msg, peerpb.Reason_REASON_FILL_FAILED)
	case ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)):
		// The client went away or its deadline passed; it will not read this
		// answer, but say what happened rather than Internal. A context error
		// while the request's ctx is still live (a fill timeout inside the
		// Handler, say) falls through to Internal: sent as DeadlineExceeded
		// it would read as "owner unreachable" on the client.
		return status.FromContextError(ctx.Err()).Err()
	default:
		return status.Error(codes.Internal, err.Error())
	}
}

func withReason(c codes.Code, msg string, r peerpb.Reason) error {
	st, err := status.New(c, msg).WithDetails(&peerpb.ErrorDetail{Reason: r})
	if err != nil {
		// Only a marshalling failure of a two-field message could get here;
		// the code alone is still the right answer, the client will just not
		// recognise it as ours.
		return status.Error(c, msg)
	}
	return st.Err()
}

// fromStatus turns the error of a gRPC call to addr into this package's
// errors. ctx is the caller's context, before CallTimeout was applied, so
// that the caller's own cancellation is told apart from the call timeout.
func fromStatus(ctx context.Context, addr string, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return ctxErr
	}
	var ue *UnreachableError
	if errors.As(err, &ue) {
		return err // already this package's (UntilSilent's, say)
	}
	st, ok := status.FromError(err)
	if !ok {
		// gRPC returns status errors from every call; keep anything else
		// visible rather than guess what it means.
		return fmt.Errorf("transport: peer %s: %w", addr, err)
	}
	switch st.Code() {
	case codes.NotFound:
		return ErrNotFound
	case codes.InvalidArgument:
		return &RemoteError{Code: st.Code().String(), Msg: st.Message(), kind: ErrInvalidArgument}
	case codes.ResourceExhausted:
		if reason(st) == peerpb.Reason_REASON_STREAM_FULL {
			return &RemoteError{Code: st.Code().String(), Msg: st.Message(), kind: ErrStreamFull}
		}
		// gRPC's message says which side refused and both sizes:
		// "grpc: received message larger than max (9000000 vs. 8454144)".
		return &RemoteError{
			Code: st.Code().String(),
			Msg:  ErrInvalidArgument.Error() + ": message exceeds MaxMessageSize: " + st.Message(),
			kind: ErrInvalidArgument,
		}
	case codes.DeadlineExceeded:
		if _, ok := ctx.Deadline(); ok {
			// The deadline was the caller's own (CallTimeout applies only to
			// a ctx without one). The server may report it a moment before
			// ctx.Err() is set here, its timer having started from the
			// propagated timeout: it is still the caller's time that ran out.
			return context.DeadlineExceeded
		}
		return &UnreachableError{Addr: addr, Err: err}
	case codes.Unavailable, codes.Canceled:
		return &UnreachableError{Addr: addr, Err: err}
	case codes.Aborted:
		if reason(st) == peerpb.Reason_REASON_FILL_CYCLE {
			return ErrFillCycle
		}
	case codes.FailedPrecondition:
		switch reason(st) {
		case peerpb.Reason_REASON_UNKNOWN_GROUP:
			return &RemoteError{Code: st.Code().String(), Msg: st.Message(), kind: ErrUnknownGroup}
		case peerpb.Reason_REASON_LEAVING:
			return &RemoteError{Code: st.Code().String(), Msg: st.Message(), kind: ErrLeaving}
		}
	case codes.PermissionDenied:
		if reason(st) == peerpb.Reason_REASON_NOT_MEMBER {
			return &RemoteError{Code: st.Code().String(), Msg: st.Message(), kind: ErrNotMember}
		}
	case codes.Unknown:
		if reason(st) == peerpb.Reason_REASON_FILL_FAILED {
			return &FillFailedError{Msg: st.Message()}
		}
	}
	return &RemoteError{Code: st.Code().String(), Msg: st.Message()}
}

func reason(st *status.Status) peerpb.Reason {
	for _, d := range st.Details() {
		if ed, ok := d.(*peerpb.ErrorDetail); ok {
			return ed.GetReason()
		}
	}
	return peerpb.Reason_REASON_UNSPECIFIED
}

// codeName is the label OnCall gets: the gRPC code of a finished call.
func codeName(err error) string {
	if err == nil {
		return "OK"
	}
	return status.Code(err).String()
}

// toFailure is the Failure frame that answers a GetStream call with err: a status error as it
// is, any other error as toStatus sends a Handler's. Its message is made valid UTF-8 (invalid
// bytes become U+FFFD): proto3 does not marshal other strings, and an answer that cannot be
// marshalled would end the stream for every call on it — a loader's error naming a binary
// key would make its owner look unreachable.
func toFailure(ctx context.Context, err error) *peerpb.Failure {
	if _, ok := status.FromError(err); !ok {
		err = toStatus(ctx, err)
	}
	st := status.Convert(err)
	msg := st.Message()
	if !utf8.ValidString(msg) {
		msg = strings.ToValidUTF8(msg, "\uFFFD")
	}
	return &peerpb.Failure{Code: uint32(st.Code()), Message: msg, Reason: reason(st)}
}

// fromFailure is the status error a Failure frame stands for: what the same Get as a unary
// call would have returned, for fromStatus to map.
func fromFailure(f *peerpb.Failure) error {
	st := status.New(codes.Code(f.GetCode()), f.GetMessage())
	if f.GetReason() != peerpb.Reason_REASON_UNSPECIFIED {
		if withDetail, err := st.WithDetails(&peerpb.ErrorDetail{Reason: f.GetReason()}); err == nil {
			st = withDetail
		}
	}
	return st.Err()
}

// The status errors the package makes itself, by what they tell the client (the table above).

// unavailable says the peer gave no answer and will give none on this path: a Get stream
// that broke, was closed or could not be opened, a Server that is stopping. The caller gets
// an *UnreachableError, or ErrClosed once its Client is closed (Client.callError).
func unavailable(format string, args ...any) error {
	return status.Errorf(codes.Unavailable, format, args...)
}

// oversized refuses a message over a MaxMessageSize before it is sent, as gRPC refuses one:
// the caller gets a *RemoteError wrapping ErrInvalidArgument.
func oversized(format string, args ...any) error {
	return status.Errorf(codes.ResourceExhausted, format, args...)
}

// streamFull refuses a GetStream call past the Server's MaxStreamCalls, limit: the caller
// gets a *RemoteError wrapping ErrStreamFull.
func streamFull(limit int) error {
	return withReason(codes.ResourceExhausted,
		fmt.Sprintf("%v: more than %d (ServerConfig.MaxStreamCalls)", ErrStreamFull, limit),
		peerpb.Reason_REASON_STREAM_FULL)
}

// internal is a failure on the answering side that is no Handler's answer (a panic, an
// answer that could not be encoded): the caller gets a *RemoteError{Code: "Internal"}.
func internal(format string, args ...any) error {
	return status.Errorf(codes.Internal, format, args...)
}

// unimplemented answers a call this Server does not serve, as gRPC answers a method it does
// not know.
func unimplemented(msg string) error {
	return status.Error(codes.Unimplemented, msg)
}

// isUnimplemented reports whether err says the peer does not serve the call: a GetStream to a
// corral from before streams, whose Gets are then sent as unary calls.
func isUnimplemented(err error) bool {
	return status.Code(err) == codes.Unimplemented
}

// fromContext is the status error of a call whose caller's ctx ended with err
// (context.Canceled or DeadlineExceeded), as gRPC returns it from a unary call.
func fromContext(err error) error {
	return status.FromContextError(err).Err()
}
