package transport

import (
	"context"
	"time"

	"github.com/corralcache/corral/transport/peerpb"
)

// cancelOf returns the context whose end ends a call under ctx before ctx's deadline: ctx
// itself, or what its Canceller method returns. A fill's loader context (package fill) has
// one: it ends at its deadline or when its Canceller does, and its own Done costs a timer,
// which a Get on a stream does without — the stream ends the call at its deadline (expire)
// and waits on the Canceller's Done, nil when only the deadline ends it.
func cancelOf(ctx context.Context) context.Context {
	if c, ok := ctx.(interface{ Canceller() context.Context }); ok {
		return c.Canceller()
	}
	return ctx
}

// deadlineOf reports whether d is ctx's deadline or later: ctx's Done then closes by d.
func deadlineOf(ctx context.Context, d time.Time) bool {
	cd, ok := ctx.Deadline()
	return ok && !cd.After(d)
}

// expireAtLocked sets the expiry timer for at; s.mu is held.
func (s *muxStream) expireAtLocked(at time.Time) {
	s.expiryAt = at
	if s.expiry == nil {
		s.expiry = time.AfterFunc(time.Until(at), s.expire)
	} else {
		s.expiry.Reset(time.Until(at))
	}
}

// expire ends the calls whose deadline has passed, as a caller that leaves at its deadline
// would (leave), and sets the expiry timer for the earliest deadline of the others. Each
// call makes no timer of its own: a stream's calls under fills' contexts have deadlines
// later than the calls before them (FillTimeout on), so the timer, once set, is seldom moved.
func (s *muxStream) expire() {
	now := time.Now()
	var ended []*streamCall
	s.mu.Lock()
	if s.err != nil {
		s.mu.Unlock()
		return
	}
	var next time.Time
	for id, c := range s.pending {
		switch {
		case c.deadline.IsZero():
		case !c.deadline.After(now):
			delete(s.pending, id)
			s.queue = append(s.queue, &peerpb.GetCall{Id: id, Cancel: true})
			ended = append(ended, c)
		case next.IsZero() || c.deadline.Before(next):
			next = c.deadline
		}
	}
	s.expiryAt = time.Time{}
	if !next.IsZero() {
		s.expireAtLocked(next)
	}
	s.mu.Unlock()
	if len(ended) > 0 {
		s.signal()
	}
	for _, c := range ended {
		c.reply <- streamResult{err: errExpired}
	}
}

// errExpired is the answer of a call the stream ended at its deadline.
var errExpired = fromContext(context.DeadlineExceeded)
