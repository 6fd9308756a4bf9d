package main

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// A client decides how often the daemon warns: one pipeline cut off by a hang-up, a port
// scan of the peer port, a flood of bad requests. floodHandler keeps such warnings from
// flooding the log: records of level Warn and above are passed while their kind — the
// level, the message and the value of a "reason" attribute, if any — has tokens (a burst of
// floodBurst, then one per floodEvery); the others are dropped and counted in
// corral_log_suppressed_total, and the next record of the kind that is passed carries
// "suppressed": how many were dropped before it. Records below Warn always pass.

// floodBurst and floodEvery: ten records of one kind at once say all there is to say; one
// a second after that keeps a lasting cause visible.
const (
	floodBurst = 10
	floodEvery = time.Second
	// floodKinds bounds the kinds remembered: past it, kinds not seen for a minute are
	// forgotten, and if none is, the new kind shares the bucket of every other new kind.
	floodKinds = 1024
)

type floodHandler struct {
	next slog.Handler
	st   *floodState
}

var _ slog.Handler = floodHandler{}

// floodState is shared by a handler and those derived from it (WithAttrs, WithGroup).
type floodState struct {
	now        func() time.Time // for tests
	suppressed prometheus.Counter

	mu sync.Mutex // guards kinds
	// kinds holds each kind's bucket.
	kinds map[string]*floodBucket
}

type floodBucket struct {
	tokens  float64
	at      time.Time // when tokens was last brought up to date
	dropped int       // records dropped since the last one passed
}

func newFloodHandler(next slog.Handler, suppressed prometheus.Counter) floodHandler {
	return floodHandler{next: next, st: &floodState{now: time.Now, suppressed: suppressed, kinds: map[string]*floodBucket{}}}
}

func (h floodHandler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

func (h floodHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level < slog.LevelWarn {
		return h.next.Handle(ctx, r)
	}
	kind := r.Level.String() + " " + r.Message
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "reason" {
			kind += " " + a.Value.String()
			return false
		}
		return true
	})
	pass, dropped := h.st.take(kind)
	if !pass {
		if h.st.suppressed != nil {
			h.st.suppressed.Inc()
		}
		return nil
	}
	if dropped > 0 {
		r = r.Clone()
		r.AddAttrs(slog.Int("suppressed", dropped))
	}
	return h.next.Handle(ctx, r)
}

// take reports whether a record of kind may pass, and how many were dropped before it.
func (s *floodState) take(kind string) (bool, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	b := s.kinds[kind]
	if b == nil {
		if len(s.kinds) >= floodKinds {
			for k, old := range s.kinds {
				if now.Sub(old.at) > time.Minute {
					delete(s.kinds, k)
				}
			}
		}
		if len(s.kinds) >= floodKinds {
			kind = "" // every other new kind
			b = s.kinds[kind]
		}
		if b == nil {
			b = &floodBucket{tokens: floodBurst, at: now}
			s.kinds[kind] = b
		}
	}
	b.tokens = min(floodBurst, b.tokens+now.Sub(b.at).Seconds()/floodEvery.Seconds())
	b.at = now
	if b.tokens < 1 {
		b.dropped++
		return false, 0
	}
	b.tokens--
	dropped := b.dropped
	b.dropped = 0
	return true, dropped
}

func (h floodHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return floodHandler{next: h.next.WithAttrs(as), st: h.st}
}

func (h floodHandler) WithGroup(name string) slog.Handler {
	return floodHandler{next: h.next.WithGroup(name), st: h.st}
}
