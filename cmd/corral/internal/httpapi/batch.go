package httpapi

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/corralcache/corral"
	"github.com/corralcache/corral/cmd/corral/internal/batch"
	"github.com/corralcache/corral/cmd/corral/internal/clip"
	"github.com/corralcache/corral/cmd/corral/internal/limithits"
	"github.com/corralcache/corral/cmd/corral/internal/objects"
)

// The many-keys form of a read: a page's keys in one request, read as one batch (package
// batch: one GetMany, the keys that miss here asked of their owners in one request per
// owner, each key filled once in the cluster).
//
//	GET  /v1/groups/{group}/keys?key=a&key=b   the keys in the query, one key= each
//	POST /v1/groups/{group}/keys:batch         {"keys": ["a", "b"]}: for lists a URL cannot hold
//
// Both answer 200 with one JSON object, each key asked for in exactly one of its members:
//
//	{"values": {"a": "aGVsbG8="}, "missing": ["b"], "errors": {"c": {"status": 502, "error": "origin answered 503 …"}}}
//
// values holds each key found with its value in standard base64, byte for byte (a JSON
// string cannot carry every byte); missing lists the keys not found, errors the keys that
// failed with the status and reason a GET of the key alone would have answered. Each key is
// there once, in the order first asked, however often it was asked. The request is refused
// whole (400, nothing read) for more than batch.MaxKeys keys, a key empty or over 4 KiB, one
// the origin cannot be asked for, or one that is not UTF-8 (a JSON answer cannot name it: read
// it alone at …/keys/{key}). A POST body is at most MaxValueBytes (413 above); the keys of a
// GET are bounded by the header limit (431). POST …:batch is a read: it needs the token only
// with TokenReads, and without the token it serves only a group that exists, as GET does.

// batchBody is the body of POST …/keys:batch.
type batchBody struct {
	Keys []string `json:"keys"`
}

// batchPathSuffix ends the path of POST …/keys:batch.
const batchPathSuffix = "/keys:batch"

// isBatchRead reports whether r is a POST …/keys:batch: a read, whatever its method.
func isBatchRead(r *http.Request) bool {
	return r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/v1/groups/") && strings.HasSuffix(r.URL.Path, batchPathSuffix)
}

// noKeys is the answer to a batch read that names no keys.
const noKeys = `no keys: name them as ?key=a&key=b (GET /v1/groups/{group}/keys), or as {"keys": ["a", "b"]} (POST /v1/groups/{group}/keys:batch); one key is read at /v1/groups/{group}/keys/{key}`

// getKeys answers GET /v1/groups/{group}/keys?key=a&key=b.
func (a *API) getKeys(w http.ResponseWriter, r *http.Request) {
	g, ok := a.keyGroup(w, r, r.PathValue("group"))
	if !ok {
		return
	}
	query, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		httpError(w, http.StatusBadRequest, "query: "+clip.Reason(err))
		return
	}
	keys, ok := query["key"]
	if !ok {
		httpError(w, http.StatusBadRequest, noKeys)
		return
	}
	a.readBatch(w, r, g, keys)
}

// postKeys answers POST /v1/groups/{group}/keys:batch.
func (a *API) postKeys(w http.ResponseWriter, r *http.Request) {
	g, ok := a.keyGroup(w, r, r.PathValue("group"))
	if !ok {
		return
	}
	body, ok := a.readBody(w, r, fmt.Sprintf("body exceeds the limit of %d bytes of a batch read's keys (--max-value-bytes)", a.cfg.MaxValueBytes))
	if !ok {
		return
	}
	const want = `want {"keys": ["a", "b"]}`
	if !utf8.Valid(body) {
		httpError(w, http.StatusBadRequest, "body is not UTF-8: "+want)
		return
	}
	var req batchBody
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		httpError(w, http.StatusBadRequest, "body: "+clip.Reason(err)+": "+want)
		return
	}
	if dec.More() {
		httpError(w, http.StatusBadRequest, "body: more than one JSON value: "+want)
		return
	}
	if req.Keys == nil {
		httpError(w, http.StatusBadRequest, noKeys)
		return
	}
	a.readBatch(w, r, g, req.Keys)
}

// readBatch reads keys of g as one batch and answers them as JSON (see the top of the file).
func (a *API) readBatch(w http.ResponseWriter, r *http.Request, g *corral.Group[objects.Object], keys []string) {
	for i, key := range keys {
		if !utf8.ValidString(key) {
			a.cfg.Hits.Hit(limithits.Batch)
			httpError(w, http.StatusBadRequest, fmt.Sprintf("%v: key %d of %d (%q) is not UTF-8, which a JSON answer cannot name: read it alone at /v1/groups/{group}/keys/{key}",
				batch.ErrRefused, i+1, len(keys), clip.String(key, 64)))
			return
		}
	}
	ans, err := batch.Read(r.Context(), g, a.cfg.Origin, keys)
	switch {
	case errors.Is(err, batch.ErrRefused):
		a.cfg.Hits.Hit(limithits.Batch)
		httpError(w, http.StatusBadRequest, err.Error())
		return
	case err != nil:
		a.writeError(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	bw := bufio.NewWriterSize(w, 32<<10)
	bw.WriteString(`{"values":{`)
	written := make(map[string]bool, len(ans.Values))
	var scratch []byte
	for _, key := range keys {
		v, found := ans.Values[key]
		if !found || written[key] {
			continue
		}
		if len(written) > 0 {
			bw.WriteByte(',')
		}
		written[key] = true
		writeJSONString(bw, key)
		scratch = base64.StdEncoding.AppendEncode(append(scratch[:0], ':', '"'), v.Body)
		scratch = append(scratch, '"')
		bw.Write(scratch)
	}
	bw.WriteString(`},"missing":[`)
	for i, key := range ans.Missing {
		if i > 0 {
			bw.WriteByte(',')
		}
		writeJSONString(bw, key)
	}
	bw.WriteString(`],"errors":{`)
	for i, f := range ans.Failed {
		if i > 0 {
			bw.WriteByte(',')
		}
		status, reason := a.errorAnswer(r, f.Err)
		writeJSONString(bw, f.Key)
		fmt.Fprintf(bw, `:{"status":%d,"error":`, status)
		writeJSONString(bw, reason)
		bw.WriteByte('}')
	}
	bw.WriteString("}}\n")
	bw.Flush()
}

// writeJSONString writes s, valid UTF-8, as a JSON string.
func writeJSONString(bw *bufio.Writer, s string) {
	b, _ := json.Marshal(s) // a string always marshals
	bw.Write(b)
}
