package debugui

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"html/template"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"
)

// The page's template (the only thing that knows the prefix) and its static assets. Both are
// compiled into the binary, so a node serves its page with no files on disk and nothing from
// the network.
var (
	//go:embed page.html
	pageHTML string
	//go:embed static
	staticFS embed.FS

	pageTmpl = template.Must(template.New("page").Parse(pageHTML))
	assets   = loadAssets()
)

// contentTypes is fixed rather than read from mime.TypeByExtension, whose answer depends on
// the host's mime tables; a browser refuses a script served as text/plain under nosniff.
var contentTypes = map[string]string{
	".css": "text/css; charset=utf-8",
	".js":  "text/javascript; charset=utf-8",
	".svg": "image/svg+xml",
}

// csp allows this origin's scripts, styles and fetches and nothing else: no inline script
// runs, so even a name that slipped into markup could not execute.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

type asset struct {
	body        []byte
	contentType string
	etag        string
}

func loadAssets() map[string]asset {
	m := make(map[string]asset)
	err := fs.WalkDir(staticFS, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := staticFS.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(body)
		m[strings.TrimPrefix(p, "static/")] = asset{
			body:        body,
			contentType: contentTypes[path.Ext(p)],
			etag:        `"` + hex.EncodeToString(sum[:8]) + `"`,
		}
		return nil
	})
	if err != nil {
		panic("debugui: embedded assets: " + err.Error()) // the embed directive guarantees them
	}
	return m
}

// Handler serves the page at prefix (e.g. "/debug/corral"; a trailing slash is ignored, and
// "" means the root), its assets under prefix+"/assets/", and the JSON state at
// prefix+"/state" by calling state on every request. It matches the full request path:
// mount it at prefix and at prefix+"/", without http.StripPrefix.
func Handler(prefix string, state func() State) http.Handler {
	prefix = strings.TrimRight(prefix, "/")
	var page bytes.Buffer
	err := pageTmpl.Execute(&page, struct{ Prefix string }{prefix})
	return &handler{prefix: prefix, state: state, page: page.Bytes(), pageErr: err}
}

type handler struct {
	prefix  string
	state   func() State
	page    []byte // rendered once: it depends only on prefix
	pageErr error  // from rendering page; nil unless the embedded template is broken
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Path
	var serve func(http.ResponseWriter, *http.Request)
	switch {
	case p == h.prefix || p == h.prefix+"/":
		serve = h.servePage
	case p == h.prefix+"/state":
		serve = h.serveState
	case strings.HasPrefix(p, h.prefix+"/assets/"):
		serve = h.serveAsset
	default:
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	hdr := w.Header()
	hdr.Set("Content-Security-Policy", csp)
	hdr.Set("X-Content-Type-Options", "nosniff")
	hdr.Set("Referrer-Policy", "no-referrer")
	serve(w, r)
}

func (h *handler) servePage(w http.ResponseWriter, r *http.Request) {
	if h.pageErr != nil {
		http.Error(w, "debugui: render page: "+h.pageErr.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(h.page))
}

func (h *handler) serveState(w http.ResponseWriter, r *http.Request) {
	// Encoded whole before anything is written, so an unencodable state (a NaN share) is a
	// clean 500 that the page shows, not a truncated 200 it cannot parse.
	b, err := json.Marshal(h.state())
	if err != nil {
		http.Error(w, "debugui: encode state: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Write(append(b, '\n'))
}

func (h *handler) serveAsset(w http.ResponseWriter, r *http.Request) {
	a, ok := assets[strings.TrimPrefix(r.URL.Path, h.prefix+"/assets/")]
	if !ok {
		http.NotFound(w, r)
		return
	}
	// no-cache with an ETag: a browser revalidates after an upgrade instead of mixing a new
	// page with an old script.
	w.Header().Set("Content-Type", a.contentType)
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("ETag", a.etag)
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(a.body))
}
