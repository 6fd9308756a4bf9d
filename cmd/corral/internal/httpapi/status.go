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

// writeError maps corral's errors to HTTP statuses with a short reason.
func (a *API) writeError(w http.ResponseWriter, r *http.Request, err error) {
	var le *corral.LimitError
	var ue *corral.UnreachedError
	var fe *corral.FillError
	switch {
	case errors.Is(err, corral.ErrNotFound) && a.cfg.Origin == nil:
		// Without an origin nothing is fetched: a key holds only what was written to it.
		httpError(w, http.StatusNotFound, "not found: nothing is stored under this key, and this node has no --origin to fetch it from (values come only from PUT and leases)")
	case errors.Is(err, corral.ErrNotFound):
		httpError(w, http.StatusNotFound, "not found")
	case errors.As(err, &le):
		status := http.StatusBadRequest
		if le.Limit == "value" {
			status = http.StatusRequestEntityTooLarge
		}
		httpError(w, status, err.Error())
	case errors.Is(err, corral.ErrInvalidTag):
		httpError(w, http.StatusBadRequest, err.Error())
	case errors.Is(err, corral.ErrFillCycle):
		httpError(w, http.StatusLoopDetected, err.Error())
	case errors.As(err, &ue):
		// The owner applied the write; some near copies may live until they expire.
		httpError(w, http.StatusAccepted, err.Error())
	case errors.Is(err, corral.ErrClosed):
		httpError(w, http.StatusServiceUnavailable, "node is shutting down")
	case errors.Is(err, context.Canceled) && r.Context().Err() != nil:
		// The client went away; nobody reads the answer.
	case errors.Is(err, corral.ErrPeerTimeout):
		// The time went to peers that did not answer, not to the origin.
		httpError(w, http.StatusGatewayTimeout, saying("peers", fe0(err)))
	case errors.As(err, &fe):
		httpError(w, http.StatusBadGateway, saying("origin", fe.Err))
	default:
		a.cfg.Log.Warn("request failed", "method", r.Method, "path", r.URL.EscapedPath(), "err", err)
		httpError(w, http.StatusBadGateway, clip.Reason(err))
	}
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
