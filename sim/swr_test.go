package sim

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/corralcache/corral"
)

// Group s holds values that only writes make — no source behind it, as corral serve without
// an origin — each fresh for a moment and then served stale for an hour, and hands out leases
// to refresh them: the checks that moves keep stale values and that a stale value gets one
// refresh token per owner.

const (
	swrTTL    = 50 * time.Millisecond
	swrGrace  = time.Hour
	leaseFill = 300 * time.Millisecond
)

func skey(k int) string { return fmt.Sprint("s", k) }

// noSource is group s's loader: nothing is found at the source.
func (h *history) noSource(node string) corral.LoadFunc[string] {
	return func(context.Context, string) (string, error) { return "", corral.ErrNotFound }
}

// leaseRec is one token granted in group s. The owner granted it at some instant between the
// Lease call's start and its return; it is surely live from the return (granted) until the
// earliest of the call's start plus its fill time (it lapses leaseFill after the grant), its
// holder's FillSet, or a write of its key (which revokes it).
type leaseRec struct {
	key, node  string
	token      string
	start, end time.Duration
	granted    time.Duration
}

// swrOp is one request to group s on a random live node: a Get, a write (SetWithExpiry or
// Remove), or a Lease whose holder refreshes the value half of the time and otherwise lets
// the lease lapse.
func (h *history) swrOp(r *rand.Rand, k int) {
	name, _ := h.group(r)
	if name == "" {
		return
	}
	h.mu.Lock()
	s := h.sgroups[name]
	h.mu.Unlock()
	key := skey(k)
	switch op := r.IntN(20); {
	case op < 10:
		h.get(name, s, key, nil)
	case op < 13:
		h.slocks.lock(k)
		h.swrWrite(name, s, key, false)
		h.slocks.unlock(k)
	case op < 14:
		h.slocks.lock(k)
		h.swrWrite(name, s, key, true)
		h.slocks.unlock(k)
	default:
		ctx, done := context.WithTimeout(context.Background(), getDeadline)
		defer done()
		start := h.now()
		l, err := s.Lease(ctx, key, corral.LeaseOptions{Fill: leaseFill})
		if err != nil || l.Token == "" {
			if err != nil && !errors.Is(err, corral.ErrClosed) {
				h.logf(name, "lease %s: %v", key, err)
			}
			return
		}
		rec := leaseRec{key: key, node: name, token: l.Token, start: start, end: start + leaseFill, granted: h.now()}
		h.logf(name, "lease %s %s %s", key, l.State, l.Token)
		if r.IntN(2) == 0 {
			time.Sleep(time.Duration(1+r.IntN(50)) * time.Millisecond) // the build
			h.slocks.lock(k)
			h.mu.Lock()
			h.gen++
			gen := h.gen
			h.mu.Unlock()
			wstart := h.now()
			stored, err := s.FillSet(ctx, key, fmt.Sprintf("%s@%d", key, gen), l.Token, corral.Expiry{TTL: swrTTL, SWR: swrGrace})
			wend := h.now()
			if stored {
				h.mu.Lock()
				h.writes = append(h.writes, writeRec{key: key, gen: gen, start: wstart, end: wend, err: err, group: "s"})
				h.mu.Unlock()
			}
			h.slocks.unlock(k)
			h.logf(name, "fillset %s gen %d: %v %v", key, gen, stored, err)
			rec.end = min(rec.end, wend)
		}
		h.mu.Lock()
		h.leases = append(h.leases, rec)
		h.mu.Unlock()
	}
}

// swrWrite writes the next generation of key in group s (fresh for swrTTL, then stale for
// swrGrace), or removes it, and records the write.
func (h *history) swrWrite(node string, s *corral.Group[string], key string, remove bool) {
	h.mu.Lock()
	h.gen++
	gen := h.gen
	h.mu.Unlock()
	rec := writeRec{key: key, gen: gen, remove: remove, start: h.now(), group: "s"}
	ctx, done := context.WithTimeout(context.Background(), getDeadline)
	defer done()
	if remove {
		rec.err = s.Remove(ctx, key)
	} else {
		rec.err = s.SetWithExpiry(ctx, key, fmt.Sprintf("%s@%d", key, gen), corral.Expiry{TTL: swrTTL, SWR: swrGrace})
	}
	rec.end = h.now()
	h.mu.Lock()
	h.writes = append(h.writes, rec)
	h.trace = append(h.trace, event{at: rec.end, node: node, what: fmt.Sprintf("s-write %s gen %d remove %v: %v", key, gen, remove, rec.err)})
	h.mu.Unlock()
}
