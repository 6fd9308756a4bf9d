package objects

import (
	"net/http"
	"strings"
)

// SurrogateKeyHeader is the CDNs' header of a response's tags (Fastly, Varnish xkey):
// space-separated. An origin's response tags the entry it fills, a PUT's request tags the
// value it writes, and a GET's answer carries the entry's tags; DELETE /v1/tags/{tag} purges
// one.
const SurrogateKeyHeader = "Surrogate-Key"

// Tags returns the tags of h's Surrogate-Key headers, nil for none.
func Tags(h http.Header) []string {
	var tags []string
	for _, v := range h.Values(SurrogateKeyHeader) {
		tags = append(tags, strings.Fields(v)...)
	}
	return tags
}
