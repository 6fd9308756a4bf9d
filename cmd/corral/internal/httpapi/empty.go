package httpapi

import "net/http"

// emptyName answers a request whose path names no key (/v1/groups/g/keys/, or without the
// slash) or no tag (/v1/tags/): the routes' wildcards match only a segment that is not empty,
// and the router's own answer, "404 page not found", would not say what is wrong.
func emptyName(what, route string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		httpError(w, http.StatusBadRequest, "empty "+what+": the path is "+route+", with a "+what+" of 1 to 4096 bytes (path-escaped)")
	}
}
