package transport

import (
	"context"

	"github.com/corralcache/corral/transport/peerpb"
)

// Handler answers the requests a Server receives. The root corral package
// implements it; its methods may be called by many goroutines at once.
//
// A method returns this package's errors (ErrNotFound, ErrFillCycle,
// ErrUnknownGroup, ErrInvalidArgument wrapped with the reason,
// *FillFailedError) and the caller on the other side gets the same error
// back; any other error reaches it as a *RemoteError with code "Internal".
// A panic is recovered, logged with its stack, and answered as Internal.
//
// ctx ends when the calling peer gives up (its deadline or cancellation) or
// the Server stops; a method must return soon after, because Server.Stop
// waits for running methods.
type Handler interface {
	// Get answers with the entry, filling it if needed; when req.Peek is set
	// it answers only with an entry already held (Found=false otherwise) and
	// never fills. A nil response is sent as an empty GetResponse.
	Get(ctx context.Context, req *peerpb.GetRequest) (*peerpb.GetResponse, error)

	// Set writes req.Entry through this node as owner. The Server rejects a
	// request without an entry with ErrInvalidArgument before calling Set.
	Set(ctx context.Context, req *peerpb.SetRequest) (*peerpb.SetResponse, error)

	// Remove deletes the key on this node as owner and drops its near copies
	// in the cluster.
	Remove(ctx context.Context, req *peerpb.RemoveRequest) (*peerpb.RemoveResponse, error)

	// Invalidate tells this node of a write: it drops its copies of the key
	// older than req.Version and tells the members it knows of that
	// req.Told does not list. A nil response is sent as an empty one.
	Invalidate(ctx context.Context, req *peerpb.InvalidateRequest) (*peerpb.InvalidateResponse, error)

	// Handoff is called once per entry a leaving peer streams, in order, by
	// one goroutine per stream. accepted reports whether the entry was stored
	// (false: this node kept what it had, at the same or a newer version).
	// An error ends the stream: the sender gets it and the entries after this
	// one are not delivered; to skip a single bad entry, return false, nil.
	// A node that is leaving itself returns ErrLeaving, and the sender hands
	// the entries to another member.
	Handoff(ctx context.Context, e *peerpb.Entry) (accepted bool, err error)

	// WaitsFor lists what this node's fill of the key is waiting on (an
	// empty answer when no such fill runs). It must not wait for a fill.
	WaitsFor(ctx context.Context, req *peerpb.WaitsForRequest) (*peerpb.WaitsForResponse, error)

	// Reconcile applies the writes another member remembers of a group and answers with
	// the writes this node remembers of it.
	Reconcile(ctx context.Context, req *peerpb.ReconcileRequest) (*peerpb.ReconcileResponse, error)
}
