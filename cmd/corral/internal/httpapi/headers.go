package httpapi

import (
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/corralcache/corral"
)

// Response headers of a hit, set without allocating. http.Header.Set makes a one-element
// slice for every value, two allocations a hit (X-Corral-Source and Content-Type), each
// garbage the collector must chase: at tens of thousands of hits a second on a small heap
// that alone made the runtime collect dozens of times a second. These headers' values are
// shared slices instead, one per distinct value, each of length and capacity 1. Sharing is
// safe because nothing writes into a header's value slice: net/http copies the handler's
// header when the response begins (Header.Clone), and Header.Add appends, which copies a
// full slice rather than writing into it.

// sourceValues are X-Corral-Source's values, one shared slice per source.
var sourceValues = func() map[corral.Source][]string {
	m := map[corral.Source][]string{}
	for _, s := range []corral.Source{corral.SourceHit, corral.SourceFill, corral.SourceCoalesced,
		corral.SourceStale, corral.SourceNear, corral.SourcePeer} {
		m[s] = []string{string(s)}
	}
	return m
}()

// setSource sets X-Corral-Source.
func setSource(h http.Header, s corral.Source) {
	if v, ok := sourceValues[s]; ok {
		h["X-Corral-Source"] = v
		return
	}
	h.Set("X-Corral-Source", string(s))
}

// maxTypeValues bounds the distinct Content-Types whose header values are kept: an origin
// serves a handful; past the bound a type is set as any header is.
const maxTypeValues = 64

// typeValues holds a shared header value of each Content-Type seen, up to maxTypeValues.
// Reads load the map without a lock; a new type copies it under mu.
type typeValues struct {
	m atomic.Pointer[map[string][]string]

	mu sync.Mutex // guards writes of m
}

// set sets h's Content-Type to t.
func (tv *typeValues) set(h http.Header, t string) {
	if m := tv.m.Load(); m != nil {
		if v, ok := (*m)[t]; ok {
			h["Content-Type"] = v
			return
		}
	}
	h["Content-Type"] = tv.add(t)
}

// add returns t's value, kept for the next response if there is room.
func (tv *typeValues) add(t string) []string {
	v := []string{t}
	tv.mu.Lock()
	defer tv.mu.Unlock()
	old := tv.m.Load()
	if old != nil {
		if kept, ok := (*old)[t]; ok {
			return kept
		}
		if len(*old) >= maxTypeValues {
			return v
		}
	}
	m := make(map[string][]string, 1+len(ptrMap(old)))
	for k, x := range ptrMap(old) {
		m[k] = x
	}
	m[t] = v
	tv.m.Store(&m)
	return v
}

func ptrMap(m *map[string][]string) map[string][]string {
	if m == nil {
		return nil
	}
	return *m
}
