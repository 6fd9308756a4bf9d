package intern

import "sync"

// Strings turns bytes a request named — a key, a path — into a string that may be kept,
// without allocating for bytes it has seen: a front reads requests into buffers it reuses, and
// a group keeps the key it is given on a miss, so each key needs a string of its own — made
// once and handed out again. The zero value is ready to use; it is safe for concurrent use.
type Strings struct {
	mu    sync.RWMutex // guards m and bytes
	m     map[string]string
	bytes int // of the strings in m
}

// Bounds of what Strings keeps. A string longer than maxStringBytes is not kept (it
// costs its allocation every time); past maxTotalBytes in all, the set starts again
// empty, so a client cycling through more than that pays an allocation a string, as
// before, and the memory stays bounded.
const (
	maxStringBytes = 512
	maxTotalBytes  = 4 << 20
)

// Of returns b as a string.
func (ks *Strings) Of(b []byte) string {
	ks.mu.RLock()
	s, ok := ks.m[string(b)] // a map index by string(bytes) does not allocate
	ks.mu.RUnlock()
	if ok {
		return s
	}
	s = string(b)
	if len(s) > maxStringBytes {
		return s
	}
	ks.mu.Lock()
	defer ks.mu.Unlock()
	if ks.m == nil || ks.bytes+len(s) > maxTotalBytes {
		ks.m, ks.bytes = map[string]string{}, 0
	}
	if _, ok := ks.m[s]; !ok {
		ks.m[s] = s
		ks.bytes += len(s)
	}
	return s
}
