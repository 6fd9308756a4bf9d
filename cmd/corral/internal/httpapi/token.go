package httpapi

import (
	"net/http"
	"strings"
)

// authorize wraps the HTTP API: with a token, every request that changes something needs
// it, and so do the profiles (--pprof); with --api-token-reads every other request too,
// except the probes and /metrics, which a kubelet and a Prometheus scrape without credentials. A request without it gets
// 401 and changes nothing. POST …/keys:batch is a read, as the GET it stands for.
func (a *API) authorize(next http.Handler) http.Handler {
	if a.cfg.Token == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/metrics", "/healthz", "/readyz":
			next.ServeHTTP(w, r)
			return
		}
		read := r.Method == http.MethodGet || r.Method == http.MethodHead || isBatchRead(r)
		if strings.HasPrefix(r.URL.Path, "/debug/pprof/") {
			read = false // a profile costs CPU while it runs, and tells the node's internals
		}
		if (read && !a.cfg.TokenReads) || a.cfg.Token.Bearer(r.Header.Get("Authorization")) {
			next.ServeHTTP(w, r)
			return
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="corral"`)
		httpError(w, http.StatusUnauthorized, "unauthorized: send Authorization: Bearer <token> (see --api-token-file)")
	})
}
