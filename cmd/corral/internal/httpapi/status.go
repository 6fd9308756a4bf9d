package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/corralcache/corral"
	"github.com/corralcache/corral/cmd/corral/internal/clip"
)

// writeError maps corral's errors to HTTP statuses with a short reason (errorAnswer).
func (a *API) writeError(w http.ResponseWriter, r *http.Request, err error) {
	status, reason := a.errorAnswer(r, err)
	httpError(w, status, reason)
}

// errorAnswer is the status and short reason that answer one of corral's errors for r.
func (a *API) errorAnswer(r *http.Request, err error) (status int, reason string) {
	var le *corral.LimitError
	var ue *corral.UnreachedError
	var fe *corral.FillError
	switch {
	case errors.Is(err, corral.ErrNotFound) && a.cfg.Origin == nil:
		// Without an origin nothing is fetched: a key holds only what was written to it.
		return http.StatusNotFound, "not found: nothing is stored under this key, and this node has no --origin to fetch it from (values come only from PUT and leases)"
	case errors.Is(err, corral.ErrNotFound):
		return http.StatusNotFound, "not found"
	case errors.As(err, &le):
		if le.Limit == "value" {
			return http.StatusRequestEntityTooLarge, err.Error()
		}
		return http.StatusBadRequest, err.Error()
	case errors.Is(err, corral.ErrInvalidTag):
		return http.StatusBadRequest, err.Error()
	case errors.Is(err, corral.ErrFillCycle):
		return http.StatusLoopDetected, err.Error()
	case errors.As(err, &ue):
		// The owner applied the write; some near copies may live until they expire.
		return http.StatusAccepted, err.Error()
	case errors.Is(err, corral.ErrClosed):
		return http.StatusServiceUnavailable, "node is shutting down"
	case errors.Is(err, context.Canceled) && r.Context().Err() != nil:
		// The client went away, as net/http sees it: it closed its connection, or only its
		// writing half — and then it still reads, so it is told, rather than sent the empty
		// 200 a handler that writes nothing gets from net/http.
		return http.StatusServiceUnavailable, "canceled: the client closed its connection before the answer"
	case errors.Is(err, corral.ErrPeerTimeout):
		// The time went to peers that did not answer, not to the origin.
		return http.StatusGatewayTimeout, saying("peers", fe0(err))
	case errors.As(err, &fe):
		return http.StatusBadGateway, saying("origin", fe.Err)
	}
	a.cfg.Log.Warn("request failed", "method", r.Method, "path", r.URL.EscapedPath(), "err", err)
	return http.StatusBadGateway, clip.Reason(err)
}

// saying is err's reason for a client, prefixed with what failed unless it already begins
// with it ("origin answered 503 …", not "origin: origin answered 503 …"), and without the
// library's "corral: ".
func saying(what string, err error) string {
	reason := strings.TrimPrefix(clip.Reason(err), "corral: ")
	if strings.HasPrefix(reason, what) {
		return reason
	}
	return what + ": " + reason
}

// fe0 returns the Err of err's *FillError, or err.
func fe0(err error) error {
	var fe *corral.FillError
	if errors.As(err, &fe) {
		return fe.Err
	}
	return err
}

func httpError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	fmt.Fprintln(w, msg)
}
