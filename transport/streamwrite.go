package transport

import (
	"errors"
	"io"

	"google.golang.org/protobuf/proto"

	"github.com/corralcache/corral/transport/peerpb"
)

// A caller sends its own frame (muxStream.get) when at most directSendCalls calls are in
// flight on the stream, its own included, and the frame is at most directSendBytes: so the
// frames sent and not yet answered stay well under grpc-go's 64 KiB of write quota per
// stream, and a Send never waits on a peer that reads nothing. A Server's receive loop sends a
// hit's answer itself under the same byte bound (serverStream.answerHit).
const (
	directSendCalls = 8
	directSendBytes = 6 << 10
)

// signal tells the writer that frames are queued.
func (s *muxStream) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// write sends the queued frames, in order, until the stream breaks: every frame a caller does
// not send itself (see get), since a Send can block for as long as the peer does not read
// (it is paused, say), and a caller must be free to leave at its deadline.
func (s *muxStream) write() {
	var batch []*peerpb.GetCall
	for {
		select {
		case <-s.wake:
		case <-s.done:
			return
		}
		s.sendMu.Lock()
		s.mu.Lock()
		batch, s.queue = s.queue, batch[:0]
		s.mu.Unlock()
		err := s.send(batch)
		clear(batch)
		s.sendMu.Unlock()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				s.breakIO(err)
			}
			// io.EOF: the peer ended the stream, and its status is what the reader's Recv
			// returns (Unimplemented from a peer without GetStream, say); the reader fails
			// the calls with it.
			return
		}
	}
}

// send sends batch, in order: on a framed stream, in one write.
func (s *muxStream) send(batch []*peerpb.GetCall) error {
	return sendBatch(s.stream.Send, s.framed, batch)
}

// sendBatch sends batch with send, in order, or, when f is the stream's framed connection,
// queues it on f and writes it in one write.
func sendBatch[S, R proto.Message](send func(S) error, f *framed[S, R], batch []S) error {
	if f == nil {
		for _, m := range batch {
			if err := send(m); err != nil {
				return err
			}
		}
		return nil
	}
	for _, m := range batch {
		if err := f.Queue(m); err != nil {
			return err
		}
	}
	return f.Flush()
}
