package fill

import (
	"errors"
	"fmt"
	"iter"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
	"weak"
)

// Tags label entries so that one call removes every entry that carries a tag (RemoveByTag),
// without walking the store. An entry's tags are fixed when it is stored: a loader's Tag, a
// write's tags, a copy's. Every entry also has a born version: the reading of the version
// clock when its value was made (a fill's start, a write's version, a copy's own born). A
// purge of a tag at version P removes, at once and everywhere this Tags is shared, every
// entry carrying the tag that was born below P: a read checks the entry's tags against their
// purges (a few ns a tag; untagged entries check nothing), and the sweep reclaims the
// memory. A value born at P or later — a fill that started after the purge was known here —
// is served normally.
//
// A fill in flight when the purge lands was born below it: its value is not stored, and the
// Gets that wait on it start over. A copy from elsewhere (Put, a loader's SetBorn) keeps the
// born of the node that made it, so a purge known here removes it on arrival too; a fill's
// copy that arrives purged goes only to the Gets that waited on the fill before the purge
// was recorded here, and the others start over (see joinedLate).

// Limits of tags.
const (
	MaxTags      = 32   // tags of one entry
	MaxTagBytes  = 256  // bytes of one tag
	MaxTagsBytes = 2048 // bytes of one entry's tags together
)

// TagError reports tags that break a limit or are not well formed: a tag is non-empty, at
// most MaxTagBytes, and holds no space or control character (so that it crosses an HTTP
// Surrogate-Key header and the Redis protocol unchanged).
type TagError struct {
	Tag    string // the offending tag; "" when the limit is on the set
	Reason string
}

func (e *TagError) Error() string {
	if e.Tag == "" {
		return "corral: tags: " + e.Reason
	}
	return fmt.Sprintf("corral: tag %.64q: %s", e.Tag, e.Reason)
}

// Is reports whether target is ErrInvalidTag: errors.Is(err, ErrInvalidTag) finds a *TagError.
func (e *TagError) Is(target error) bool { return target == ErrInvalidTag }

// ErrInvalidTag is what errors.Is finds in every *TagError.
var ErrInvalidTag = errors.New("corral: invalid tag")

// CheckTags returns a *TagError when tags break a limit, else nil.
func CheckTags(tags []string) error {
	if len(tags) > MaxTags {
		return &TagError{Reason: fmt.Sprintf("%d tags exceed the limit of %d", len(tags), MaxTags)}
	}
	total := 0
	for _, t := range tags {
		if err := CheckTag(t); err != nil {
			return err
		}
		total += len(t)
	}
	if total > MaxTagsBytes {
		return &TagError{Reason: fmt.Sprintf("%d bytes of tags exceed the limit of %d", total, MaxTagsBytes)}
	}
	return nil
}

// CheckTag returns a *TagError when tag is not a well-formed tag, else nil.
func CheckTag(tag string) error {
	switch {
	case tag == "":
		return &TagError{Reason: "empty tag"}
	case len(tag) > MaxTagBytes:
		return &TagError{Tag: tag, Reason: fmt.Sprintf("%d bytes exceed the limit of %d", len(tag), MaxTagBytes)}
	}
	for i := 0; i < len(tag); i++ {
		if b := tag[i]; b <= ' ' || b == 0x7f {
			return &TagError{Tag: tag, Reason: "a space or control character"}
		}
	}
	return nil
}

// DefaultTagPurgeTTL is how long a purge is remembered by default: as long as writes are
// (DefaultTombstoneTTL), and far longer than the sweep that drops the entries it removed.
const DefaultTagPurgeTTL = DefaultTombstoneTTL

// TagsConfig configures NewTags.
type TagsConfig struct {
	// TTL is how long a purge is remembered for the copies that may still be on their way
	// from elsewhere: it must outlast them, and the sweep of every Cache sharing the Tags
	// (the entries a purge removed are unreachable from the start, and gone from memory at
	// their cache's next sweep). 0 = DefaultTagPurgeTTL.
	TTL time.Duration
	// Clock measures TTL. nil = the system clock.
	Clock Clock
}

// Tags is the registry of the tags in use and of the recent purges, shared by every Cache of
// a process (a node), so that a purge reaches all of them. It is safe for concurrent use.
type Tags struct {
	cfg TagsConfig

	mu sync.Mutex
	// guards byName and marked
	byName map[string]weak.Pointer[tagState] // every tag some entry (or a recent purge) holds
	marked map[*tagState]int64               // tags purged lately, until when (clock nanos): kept alive for copies on their way
	purges atomic.Uint64                     // purges recorded, ever (Stats); a fill's Gets compare it (see joinedLate)
}

// tagState is one tag: shared by every entry that carries it, so a read checks a purge with
// one atomic load.
type tagState struct {
	name string
	mark atomic.Uint64 // the newest purge's version: an entry of the tag born below it is gone
}

// NewTags returns an empty registry.
func NewTags(cfg TagsConfig) *Tags {
	if cfg.TTL <= 0 {
		cfg.TTL = DefaultTagPurgeTTL
	}
	if cfg.Clock == nil {
		cfg.Clock = NewSystemClock()
	}
	return &Tags{cfg: cfg, byName: make(map[string]weak.Pointer[tagState]), marked: make(map[*tagState]int64)}
}

// Purge records that every entry carrying tag and born below version is gone. It reports
// whether version is newer than the purge of tag remembered before. It does nothing for a
// malformed tag.
func (t *Tags) Purge(tag string, version uint64) bool {
	if CheckTag(tag) != nil {
		return false
	}
	now := t.cfg.Clock.NowNano()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.expireLocked(now)
	ts := t.stateLocked(tag)
	newer := false
	for {
		m := ts.mark.Load()
		if version <= m {
			break
		}
		if ts.mark.CompareAndSwap(m, version) {
			newer = true
			break
		}
	}
	t.marked[ts] = now + int64(t.cfg.TTL)
	t.purges.Add(1)
	return newer
}

// Mark returns the version of the newest purge of tag remembered here, or 0.
func (t *Tags) Mark(tag string) uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	if wp, ok := t.byName[tag]; ok {
		if ts := wp.Value(); ts != nil {
			return ts.mark.Load()
		}
	}
	return 0
}

// All yields the purges remembered here, tag and version (for a member that comes back and
// must learn of them). Purges recorded while it runs may or may not be seen.
func (t *Tags) All() iter.Seq2[string, uint64] {
	return func(yield func(string, uint64) bool) {
		t.mu.Lock()
		t.expireLocked(t.cfg.Clock.NowNano())
		out := make(map[string]uint64, len(t.marked))
		for ts := range t.marked {
			out[ts.name] = ts.mark.Load()
		}
		t.mu.Unlock()
		for name, v := range out {
			if !yield(name, v) {
				return
			}
		}
	}
}

// Len returns how many purges are remembered now.
func (t *Tags) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.expireLocked(t.cfg.Clock.NowNano())
	return len(t.marked)
}

// Expire forgets the purges older than the TTL; a Cache's sweep calls it.
func (t *Tags) Expire() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.expireLocked(t.cfg.Clock.NowNano())
}

func (t *Tags) expireLocked(now int64) {
	for ts, until := range t.marked {
		if now >= until {
			// Entries that carry it keep it alive, and it stays purged for them; the
			// registry forgets it once none does.
			delete(t.marked, ts)
		}
	}
}

// intern returns the shared states of tags, making the missing ones.
func (t *Tags) intern(tags []string) []*tagState {
	out := make([]*tagState, len(tags))
	t.mu.Lock()
	defer t.mu.Unlock()
	for i, name := range tags {
		out[i] = t.stateLocked(name)
	}
	return out
}

func (t *Tags) stateLocked(name string) *tagState {
	if wp, ok := t.byName[name]; ok {
		if ts := wp.Value(); ts != nil {
			return ts
		}
	}
	ts := &tagState{name: name}
	t.byName[name] = weak.Make(ts)
	// Once no entry and no remembered purge holds it, the state is collected, and its
	// name leaves the registry.
	runtime.AddCleanup(ts, t.forget, name)
	return ts
}

func (t *Tags) forget(name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if wp, ok := t.byName[name]; ok && wp.Value() == nil {
		delete(t.byName, name)
	}
}

// taggedEntry is a stored entry with tags. It is allocated only for tagged values, so an
// untagged entry keeps its 48 bytes; the store holds a pointer to its first field, and
// flagTagged says that the rest is there.
type taggedEntry[V any] struct {
	entry[V] // first: the store's *entry[V] points here
	born     uint64
	tags     []*tagState
}

// tagged returns the tagged entry e is the head of. Only for an entry with flagTagged.
func (e *entry[V]) tagged() *taggedEntry[V] {
	// e points at the first field of a taggedEntry (see newTaggedEntry): the conversion
	// recovers the whole allocation.
	return (*taggedEntry[V])(unsafe.Pointer(e))
}

// purged reports whether a tag of e was purged after e was born. An untagged entry checks
// one bit.
func (e *entry[V]) purged() bool {
	if e.flags.Load()&flagTagged == 0 {
		return false
	}
	te := e.tagged()
	for _, ts := range te.tags {
		if ts.mark.Load() > te.born {
			return true
		}
	}
	return false
}

// tagsOf returns e's tags and born, or nil and 0 for an untagged entry.
func (e *entry[V]) tagsOf() ([]string, uint64) {
	if e.flags.Load()&flagTagged == 0 {
		return nil, 0
	}
	te := e.tagged()
	names := make([]string, len(te.tags))
	for i, ts := range te.tags {
		names[i] = ts.name
	}
	return names, te.born
}

// newEntry returns a new entry of v, tagged when tags is not empty (interned in reg), with
// the given born version.
func newEntry[V any](v V, reg *Tags, tags []string, born uint64) *entry[V] {
	if len(tags) == 0 {
		return &entry[V]{value: v}
	}
	te := &taggedEntry[V]{born: born, tags: reg.intern(tags)}
	te.value = v
	te.flags.Store(flagTagged)
	return &te.entry
}

// Purged reports whether a purge of one of tags remembered here is newer than born: a value
// with these tags, made then, is gone (a copy of it from elsewhere is not to be taken).
func (t *Tags) Purged(tags []string, born uint64) bool {
	if len(tags) == 0 || t.purges.Load() == 0 {
		return false
	}
	for _, name := range tags {
		if t.Mark(name) > born {
			return true
		}
	}
	return false
}
