package httpapi

import "net/http"

// Event loops (loop_linux.go) answer the front's hits without a goroutine per connection:
// a loop reads the requests of many connections, answers each GET of a key this node holds
// fresh (as its owner, or as a near copy of a hot key owned elsewhere) through the API's own
// middleware — the limits, the token check — and getKey's answer of a held value with its
// headers (atOnceHandler), and hands a connection to a goroutine of its own, a frontConn
// with the bytes not yet answered, at the first request it cannot answer at once. The goroutine
// serves it as a connection that never was on a loop, and gives it back after handBackAfter
// hits in a row, when it would wait for the client again.

// handBackAfter is how many hits in a row a connection's goroutine answers, each of them
// one a loop would have answered, before the connection goes back to its loop.
const handBackAfter = 16

// atOnce is a loop's word with its requests' handler (atOnceHandler): a request the handler
// does not answer at once is declined — nothing is written, and the request goes to the
// connection's goroutine, which answers it as any other.
type atOnce struct{ declined bool }

// atOnceKey keys a loop's *atOnce in its requests' context.
type atOnceKey struct{}

// atOnceHandler is the handler of a loop's requests: the API's handler (see handler) with
// the hit's route alone, answered by getKeyAtOnce. A loop's request's context holds its
// *atOnce.
func (a *API) atOnceHandler() http.Handler {
	return a.traced(a.limits.middleware(a.authorize(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ao := r.Context().Value(atOnceKey{}).(*atOnce)
		group, key, ok := keyPath(r)
		if !ok {
			ao.declined = true // the loop takes only the hit's paths: not reached
			return
		}
		a.getKeyAtOnce(w, r, ao, group, key)
	}))))
}

// getKeyAtOnce is getKey on a loop: the answer getKey would give when this node holds the
// key's value fresh — as its owner, or as a near copy of a key owned elsewhere — and nothing
// (the request declined) otherwise, or when the answer would need anything else (a group not
// made yet, a key the origin refuses).
func (a *API) getKeyAtOnce(w http.ResponseWriter, r *http.Request, ao *atOnce, group, key string) {
	g, ok := a.cfg.Groups.Existing(group)
	if !ok || a.cfg.Origin != nil && a.cfg.Origin.Check(g.Name(), key) != nil {
		ao.declined = true
		return
	}
	v, info, ok := g.GetIfHeld(r.Context(), key)
	if !ok {
		ao.declined = true
		return
	}
	a.entryHeaders(w, info.Source, info.Tags)
	a.writeObject(w, v)
}

// isHit reports whether h is a response's header of a value held fresh, as the key's owner
// or as a near copy: one a loop would have answered.
func isHit(h http.Header) bool {
	v := h["X-Corral-Source"]
	return len(v) == 1 && (v[0] == "hit" || v[0] == "near")
}
