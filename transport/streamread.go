package transport

import (
	"context"
	"errors"
	"os"
	"time"

	"github.com/corralcache/corral/transport/peerpb"
)

// read reads the stream and hands each reply to its caller until the stream breaks (then
// every call still waiting fails). A framed stream's reader reads only while calls wait and
// no caller reads for itself: woken by rwake, until no call waits; so a framed stream
// nobody waits on is not read at all (see errStaleStream).
func (s *muxStream) read() {
	if s.framed == nil {
		for s.readOne() == nil {
		}
		return
	}
	for {
		select {
		case <-s.rwake:
		case <-s.done:
			return
		}
		select {
		case s.reading <- struct{}{}:
		case <-s.done:
			return
		}
		err := s.framed.conn.SetReadDeadline(time.Time{})
		for err == nil && s.awaited() {
			if err = s.readOne(); err == nil {
				s.readerReads.Add(1)
			} else if errors.Is(err, os.ErrDeadlineExceeded) {
				// Interrupted for a caller that read before it and left.
				err = s.framed.conn.SetReadDeadline(time.Time{})
			}
		}
		<-s.reading
		if err != nil {
			s.breakIO(err)
			return
		}
		if s.awaited() {
			s.wakeReader() // a call came as it stopped, and found the token held
		}
	}
}

// readOne reads one frame and hands it to its caller. An error breaks the stream, except a
// read deadline's on a framed stream, which changes nothing (Recv resumes where it was).
func (s *muxStream) readOne() error {
	r, err := s.stream.Recv()
	if err != nil {
		if s.framed == nil || !errors.Is(err, os.ErrDeadlineExceeded) {
			s.breakIO(err)
		}
		return err
	}
	s.reads.Add(1)
	if s.peerLate != nil {
		s.peerLate.heard(r.GetLateMillis())
	}
	if r.GetId() == 0 {
		s.pingAnswered()
		return nil
	}
	s.mu.Lock()
	c, ok := s.pending[r.GetId()]
	delete(s.pending, r.GetId())
	s.mu.Unlock()
	if !ok {
		return nil // its caller left (and sent a cancel the peer had not read yet)
	}
	res := streamResult{resp: r.GetResponse(), unary: r.GetUnary()}
	if f := r.GetFailure(); f != nil {
		res = streamResult{err: fromFailure(f)}
	} else if res.resp == nil {
		res.resp = &peerpb.GetResponse{}
	}
	c.reply <- res
	return nil
}

// tryRead takes the reading token if nobody holds it.
func (s *muxStream) tryRead() bool {
	select {
	case s.reading <- struct{}{}:
		return true
	default:
		return false
	}
}

// readFor reads a framed stream for the caller of c, who holds the reading token, until c's reply has
// come (returned, ok) or ctx ends (not ok); the replies of others it reads it hands to
// their callers, as the reader does. The connection's read deadline is d, ctx's, and
// cancel's end (cancelOf(ctx)) ends the read at once.
func (s *muxStream) readFor(ctx, cancel context.Context, d time.Time, c *streamCall) (streamResult, bool) {
	conn := s.framed.conn
	if err := conn.SetReadDeadline(d); err != nil {
		s.breakIO(err) // c's reply is the failure
	}
	if cancel.Done() != nil {
		stop := context.AfterFunc(cancel, s.interrupt)
		defer stop()
	}
	for {
		select {
		case r := <-c.reply:
			return r, true
		default:
		}
		err := s.readOne()
		if err == nil || !errors.Is(err, os.ErrDeadlineExceeded) {
			continue // a reply handed over, or the stream broke and c's reply is its failure
		}
		if cancel.Err() != nil || (!d.IsZero() && !time.Now().Before(d)) {
			return streamResult{}, false
		}
		// Interrupted for a caller that read before this one and left: read on.
		if err := conn.SetReadDeadline(d); err != nil {
			s.breakIO(err)
		}
	}
}

// awaited reports whether calls wait for replies, or a ping for its answer.
func (s *muxStream) awaited() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.pending) > 0 || len(s.pings) > 0
}

// wakeReader tells the reader of a framed stream that calls wait with nobody reading.
func (s *muxStream) wakeReader() {
	select {
	case s.rwake <- struct{}{}:
	default:
	}
}
