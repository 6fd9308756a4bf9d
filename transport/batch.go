package transport

import (
	"context"

	"github.com/corralcache/corral/transport/peerpb"
)

// A batch (GetRequest.Keys) answers each key on its own (GetResponse.Results): with its entry,
// or with the Failure a Get of the key alone would have ended with. KeyFailure and KeyError
// carry those failures, so that a key of a batch fails on the asking side exactly as a Get
// of it alone would.

// KeyFailure is the Failure that answers one key of a batch with err: a Handler's error
// (see Handler for the errors it may return).
func KeyFailure(ctx context.Context, err error) *peerpb.Failure { return toFailure(ctx, err) }

// KeyError is the error one key of a batch fails with on the asking side, given the Failure
// the peer at addr answered it with: what a Get of the key alone would have returned
// (ErrNotFound, ErrFillCycle, a *FillFailedError, a *RemoteError, …).
func KeyError(addr string, f *peerpb.Failure) error {
	return fromStatus(context.Background(), addr, fromFailure(f))
}
