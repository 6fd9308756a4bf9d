package httpapi

import (
	"net/http"
	"strings"
)

// keyPath returns the group and key of a GET of /v1/groups/{group}/keys/{key}, when the path
// is one the mux would route as it stands, to the same values: the hit's own route, which
// spares every hit the mux's work (cleaning the path, walking its tree, and the slice of
// wildcard values it allocates on each request). It declines (ok false) whatever the mux
// might treat otherwise — any other method (HEAD included), an escaped path (RawPath set,
// as for %2F), an empty segment, a "." or ".." segment (the mux redirects those to the
// cleaned path) — and the mux serves those as before.
func keyPath(r *http.Request) (group, key string, ok bool) {
	if r.Method != http.MethodGet || r.URL.RawPath != "" {
		return "", "", false
	}
	return splitKeyPath(r.URL.Path)
}

// splitKeyPath returns the group and key of a path /v1/groups/{group}/keys/{key} whose
// segments cleaning leaves as they are.
func splitKeyPath(path string) (group, key string, ok bool) {
	rest, ok := strings.CutPrefix(path, "/v1/groups/")
	if !ok {
		return "", "", false
	}
	group, key, ok = strings.Cut(rest, "/keys/")
	if !ok || !plainSegment(group) || !plainSegment(key) {
		return "", "", false
	}
	return group, key, true
}

// plainSegment reports whether s is one path segment that cleaning leaves as it is.
func plainSegment(s string) bool {
	return s != "" && s != "." && s != ".." && !strings.Contains(s, "/")
}
