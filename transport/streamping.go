package transport

import (
	"fmt"
	"time"

	"github.com/corralcache/corral/transport/peerpb"
)

// A stream pings its peer for two reasons, with the same frame: a framed stream's keepalive,
// once it has read nothing for KeepaliveTime, as gRPC pings its connections; and the silence
// watch (SilentPeerTimeout), while calls wait, on either kind of stream. The peer answers
// pings in order, so the stream keeps when each ping out was sent, oldest first (pings).

// startKeepalive makes a framed stream ping the peer once it has read nothing for every, and
// break when the ping is not answered within timeout: the stream of a peer that vanished
// without closing its connection (node lost, partition) breaks, as gRPC's keepalive closes
// its connection. A ping is a GetCall with id 0 and no request; the peer answers it with a
// GetReply of id 0.
func (s *muxStream) startKeepalive(every, timeout time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.kaEvery = every
	s.keepalive = time.AfterFunc(every, func() {
		s.mu.Lock()
		if s.err != nil {
			s.mu.Unlock()
			return
		}
		switch r := s.reads.Load(); {
		case r != s.kaSeen:
			s.kaSeen, s.kaPinged = r, false
			s.keepalive.Reset(s.kaEvery)
		case !s.kaPinged:
			s.kaPinged = true
			s.keepalive.Reset(timeout)
			s.pingLocked()
		default:
			s.mu.Unlock()
			s.breakWith(fmt.Errorf("transport: no answer to a keepalive ping within %v", timeout))
			return
		}
		s.mu.Unlock()
	})
}

// The silence watch, while calls wait on a stream, asks the peer a ping a moment after the
// first call began to wait (watchFirst: a hit is answered well within it, so a stream of hits
// is never pinged), then every watchEvery; and it calls the peer silent — paused, cut off, its
// answers lost — once its oldest ping has gone unanswered, and nothing at all has been read
// from it, for the silence bound less watchFirst (silence.bound: SilentPeerTimeout, stretched
// while this node runs late). So a call sent to a peer that has gone silent waits at most the
// silence bound, and one whose peer goes silent while it waits at most a quarter of
// SilentPeerTimeout more; a ping's own wait, the bound less watchFirst, leaves room for one TCP
// retransmission (200 ms of the default 300 ms). A peer that answers anything — a ping, a
// Get — is not silent: it is filling slowly, and the calls wait on. One timer per stream,
// running while calls wait on it: none per call.

// watchFirst and watchEvery are fractions of SilentPeerTimeout: when a waiting call's stream is
// first pinged, and how often after that.
const (
	watchFirst = 6 // 1/6 of SilentPeerTimeout
	watchEvery = 4 // 1/4 of it
)

// startWatchLocked starts the silence watch as a call begins to wait, when the watch is on
// and not running; s.mu is held.
func (s *muxStream) startWatchLocked() {
	s.watching = true
	now := time.Now()
	s.seenReads, s.seenAt = s.reads.Load(), now
	first := s.sil.timeout / watchFirst
	s.watchDue = now.Add(first)
	if s.watch == nil {
		s.watch = time.AfterFunc(first, s.checkSilence)
	} else {
		s.watch.Reset(first)
	}
}

// checkSilence is the silence watch's timer (see above): it pings the peer, or breaks the
// stream once the peer is silent, failing every call on it at once as unreachable.
func (s *muxStream) checkSilence() {
	now := time.Now()
	s.mu.Lock()
	if s.err != nil || !s.watching {
		s.mu.Unlock()
		return
	}
	s.sil.late.observe(now, s.watchDue) // this timer's own lateness counts in the bound
	if len(s.pending) == 0 {
		s.watching = false // the next call to wait starts it again
		s.mu.Unlock()
		return
	}
	if r := s.reads.Load(); r != s.seenReads {
		s.seenReads, s.seenAt = r, now // it answered something since the last look
	}
	bound := s.sil.boundFor(s.peerLate)
	wait := bound - s.sil.timeout/watchFirst // a ping's allowance
	if len(s.pings) > 0 {
		if since := now.Sub(later(s.pings[0], s.seenAt)); since >= wait {
			s.mu.Unlock()
			s.breakWith(fmt.Errorf("transport: no answer to a ping within %v while Gets waited", since.Round(time.Millisecond)))
			return
		}
	}
	every := s.sil.timeout / watchEvery
	if n := len(s.pings); n == 0 || now.Sub(s.pings[n-1]) >= every {
		s.pingLocked()
	}
	next := min(every, later(s.pings[0], s.seenAt).Add(wait).Sub(now))
	s.watchDue = now.Add(next)
	s.watch.Reset(next)
	s.mu.Unlock()
}

// later returns the later of a and b.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// pingLocked sends the peer a ping, under mu.
func (s *muxStream) pingLocked() {
	s.pings = append(s.pings, time.Now())
	s.queue = append(s.queue, &peerpb.GetCall{})
	s.signal()
	s.wakeReader() // its answer must be read
}

// pingAnswered takes the oldest ping out as answered and restarts the keepalive's wait.
func (s *muxStream) pingAnswered() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.pings) > 0 {
		s.pings = s.pings[1:]
	}
	if s.keepalive != nil && s.err == nil {
		s.kaSeen, s.kaPinged = s.reads.Load(), false
		s.keepalive.Reset(s.kaEvery)
	}
}
