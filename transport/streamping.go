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

// startWatchLocked starts the silence watch as a call begins to wait, when the watch is on
// (silent > 0) and not running; s.mu is held.
func (s *muxStream) startWatchLocked() {
	s.watching = true
	if s.watch == nil {
		s.watch = time.AfterFunc(s.silent/2, s.checkSilence)
	} else {
		s.watch.Reset(s.silent / 2)
	}
}

// checkSilence is the silence watch: every half SilentPeerTimeout while calls wait on the
// stream, it pings the peer, and when a ping has gone unanswered for SilentPeerTimeout the
// peer is silent — paused, cut off, its answers lost — and the stream breaks, failing every
// call on it at once as unreachable. A call sent to a silent peer waits at most 1.5 ×
// SilentPeerTimeout: the next ping within half of it, then that ping's wait. A peer that
// answers its pings is filling slowly, and its calls wait on; a ping's wait leaves room for
// one TCP retransmission (200 ms by default). One timer per stream, running while calls wait
// on it: none per call.
func (s *muxStream) checkSilence() {
	s.mu.Lock()
	silent := false
	switch {
	case s.err != nil || !s.watching:
	case len(s.pending) == 0:
		s.watching = false // the next call to wait starts it again
	case len(s.pings) > 0 && time.Since(s.pings[0]) >= s.silent:
		silent = true
	default:
		s.pingLocked()
		s.watch.Reset(s.silent / 2)
	}
	s.mu.Unlock()
	if silent {
		s.breakWith(fmt.Errorf("transport: no answer to a ping within %v while Gets waited", s.silent))
	}
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
