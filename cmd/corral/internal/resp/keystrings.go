package resp

import "sync"

// keyStrings turns a command's key into the string the group is asked with, without
// allocating for a key it has seen: the key's bytes are the reader's, reused by the next
// command, and the group keeps the key it is given on a miss, so each key needs a string of
// its own — made once and handed out again. A GET of a key seen before costs no allocation
// on the way to the group (TestGetAllocs). The zero value is ready to use.
type keyStrings struct {
	mu    sync.RWMutex // guards m and bytes
	m     map[string]string
	bytes int // of the keys in m
}

// Bounds of what keyStrings keeps. A key longer than maxKeyStringBytes is not kept (it
// costs its allocation every time); past maxKeyStringsBytes in all, the set starts again
// empty, so a client cycling through more keys than that pays an allocation a key, as
// before, and the memory stays bounded.
const (
	maxKeyStringBytes  = 256
	maxKeyStringsBytes = 4 << 20
)

// of returns b as a string.
func (ks *keyStrings) of(b []byte) string {
	ks.mu.RLock()
	s, ok := ks.m[string(b)] // a map index by string(bytes) does not allocate
	ks.mu.RUnlock()
	if ok {
		return s
	}
	s = string(b)
	if len(s) > maxKeyStringBytes {
		return s
	}
	ks.mu.Lock()
	defer ks.mu.Unlock()
	if ks.m == nil || ks.bytes+len(s) > maxKeyStringsBytes {
		ks.m, ks.bytes = map[string]string{}, 0
	}
	if _, ok := ks.m[s]; !ok {
		ks.m[s] = s
		ks.bytes += len(s)
	}
	return s
}
