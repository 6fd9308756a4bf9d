package transport

import (
	"context"
	"errors"
	"io"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/corralcache/corral/transport/peerpb"
)

// Gets travel on one long-lived GetStream per peer rather than as unary calls. A unary call
// is a new HTTP/2 stream: headers, trailers, a handler goroutine and four goroutine hand-offs
// for 100 bytes of answer, and no grpc-go setting changes that. On one stream, a Get is a
// frame each way: the caller queues its GetCall and waits for the reply with its id; the
// stream's writer sends whatever is queued, the reader hands each reply to its caller, and
// many callers' frames share each read and write. In docs/performance.md (`make
// bench-compare`), a remote hit costs about a third of a bare gRPC unary call's time and CPU
// at 1 caller, and under half at 16 and 64.
//
// A muxStream is one such stream, from its first call until it breaks. It never recovers:
// when it breaks (the connection was lost, closed by Forget or Close, or the peer stopped),
// every call waiting on it fails at once as unreachable — so failover starts at once, not at
// each call's deadline — and the next Get opens a new one (peerConn.stream). Its reader, its
// writer, its pings and its deadlines each have a file: streamread.go, streamwrite.go,
// streamping.go, streamexpiry.go.

// streamCall is a caller waiting on a stream: the reader sends it exactly one reply, or the
// stream's failure, and only while the call is in pending.
type streamCall struct {
	reply chan streamResult // buffered (1): the reader never waits for the caller
	// deadline is when the stream ends the call (expire) if its answer has not come: zero
	// for none. Set while the call is pending.
	deadline time.Time
}

type streamResult struct {
	resp  *peerpb.GetResponse
	err   error // a status error, as a unary call would return
	unary bool  // the peer asks for a unary call (a large value)
}

// callStream is a caller's side of a GetStream: gRPC's, or a framed connection's (frame.go).
type callStream interface {
	Send(*peerpb.GetCall) error
	Recv() (*peerpb.GetReply, error)
}

// muxStream is one open GetStream to a peer, shared by every Get to it.
type muxStream struct {
	stream callStream
	// framed is stream when it is a framed connection: its writer writes what is queued
	// in one write, and a caller's own Send gives up at the caller's deadline.
	framed  *clientFramed
	cancel  context.CancelFunc // ends the stream; called once it broke
	maxSend int                // the Client's MaxMessageSize, both ways
	slots   chan struct{}      // one per call in flight: bounds them (see DefaultMaxStreamCalls)
	wake    chan struct{}      // (1) tells the writer something is queued
	done    chan struct{}      // closed once the stream broke
	// calls recycles the streamCalls of answered Gets. Per stream, not global: in a
	// testing/synctest bubble a channel belongs to the bubble that made it, and a stream's
	// callers all live in its node's bubble.
	calls sync.Pool

	nextID atomic.Uint64
	// reads counts the frames read: the keepalive of a framed stream pings when it stays
	// still (startKeepalive). readerReads counts those the reader read on a framed stream;
	// their callers read the others.
	reads       atomic.Uint64
	readerReads atomic.Uint64
	// keepalive is the framed stream's keepalive timer; nil on a gRPC stream, whose
	// connection has gRPC's. It and the three fields after it are guarded by mu.
	keepalive *time.Timer
	kaEvery   time.Duration // the silence after which it pings
	kaSeen    uint64        // reads when it last looked
	kaPinged  bool          // a ping is out, unanswered
	// pings holds when each ping out was sent, oldest first: the peer answers them in
	// order. Guarded by mu.
	pings []time.Time
	// The silence watch (streamping.go), guarded by mu but sil: sil is the Client's judge of
	// silence (off: no watch); watch is its timer, due at watchDue, running while watching,
	// which is while calls wait; seenReads was reads at seenAt, when the watch last saw the
	// peer answer anything (or began).
	sil       *silence
	peerLate  *toldLateness // what the peer told of its lateness (its peerConn's; nil in tests)
	watch     *time.Timer
	watchDue  time.Time
	watching  bool
	seenReads uint64
	seenAt    time.Time
	// expiry ends the calls whose deadline passed (expire): one timer per stream, set for
	// expiryAt (zero: not set), at or before the earliest deadline of the calls pending.
	// Guarded by mu.
	expiry   *time.Timer
	expiryAt time.Time

	// sendMu is held by whoever calls stream.Send: the writer, for each batch, or a caller
	// sending its own frame (see get).
	sendMu sync.Mutex
	// reading (1) holds a token while someone calls stream.Recv: the reader, or on a
	// framed stream a caller reading its own reply (see readFor). A channel, not a mutex:
	// the reader waits for it, and in a testing/synctest bubble a goroutine waiting on a
	// mutex stops virtual time.
	reading chan struct{}
	// rwake (1) tells the reader of a framed stream that calls wait with nobody reading.
	rwake chan struct{}
	// interrupt ends a framed stream's Recv at once (a caller reading for itself whose ctx
	// ended); made once, as AfterFunc takes it for every such caller.
	interrupt func()

	mu sync.Mutex // guards pending, queue and err
	// pending holds the calls sent and not yet answered, by id.
	pending map[uint64]*streamCall
	// queue holds the frames waiting for the writer, in order.
	queue []*peerpb.GetCall
	// err is why the stream broke; set once, with done closed.
	err error
	// peerBroke says err came from reading or writing the connection, not from this side
	// (Forget, Close, a keepalive): see errStaleStream.
	peerBroke bool
}

// newMuxStream starts the reader and writer of an open stream; wg counts them.
func newMuxStream(stream callStream, cancel context.CancelFunc, maxSend, maxCalls int, sil *silence, peerLate *toldLateness, wg *sync.WaitGroup) *muxStream {
	s := &muxStream{
		sil:      sil,
		peerLate: peerLate,
		stream:   stream,
		cancel:   cancel,
		maxSend:  maxSend,
		slots:    make(chan struct{}, maxCalls),
		wake:     make(chan struct{}, 1),
		done:     make(chan struct{}),
		rwake:    make(chan struct{}, 1),
		reading:  make(chan struct{}, 1),
		pending:  make(map[uint64]*streamCall),
	}
	s.framed, _ = stream.(*clientFramed)
	if s.framed != nil {
		conn := s.framed.conn
		s.interrupt = func() { conn.SetReadDeadline(time.Now()) }
	}
	s.calls.New = func() any { return &streamCall{reply: make(chan streamResult, 1)} }
	wg.Add(2)
	go func() { defer wg.Done(); s.read() }()
	go func() { defer wg.Done(); s.write() }()
	return s
}

// broken reports whether the stream broke.
func (s *muxStream) broken() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// get sends req and waits for its reply until ctx ends. Its errors are status errors, as a
// unary call's are: fromStatus maps them.
//
// Under a fill's context, the stream ends the call at ctx's deadline itself (expire), and
// before it when cancelOf(ctx) ends: the Get makes no timer of its own.
func (s *muxStream) get(ctx context.Context, req *peerpb.GetRequest) (*peerpb.GetResponse, error) {
	select {
	case s.slots <- struct{}{}:
	default:
		select {
		case s.slots <- struct{}{}:
		case <-ctx.Done():
			return nil, fromContext(ctx.Err())
		case <-s.done:
			return nil, s.failure()
		}
	}
	call := &peerpb.GetCall{Id: s.nextID.Add(1), Request: req, MaxReplySize: uint32(min(s.maxSend, math.MaxUint32))}
	deadline, hasDeadline := ctx.Deadline()
	if hasDeadline {
		call.TimeoutNanos = max(int64(time.Until(deadline)), 1)
	}
	cancel := cancelOf(ctx)
	// A ctx with a Canceller ends at its own deadline by its own reckoning (its Err says so
	// from then on): the stream ends the call then. A deadline that is the Canceller's, and
	// any other ctx's, its Done ends.
	expires := hasDeadline && cancel != ctx && !deadlineOf(cancel, deadline)
	size := proto.Size(call)
	if size > s.maxSend {
		<-s.slots
		// Sent, it would end the stream for every call on it.
		return nil, oversized("transport: get request of %d bytes exceeds MaxMessageSize %d", size, s.maxSend)
	}
	c := s.calls.Get().(*streamCall)
	s.mu.Lock()
	if s.err != nil {
		s.mu.Unlock()
		<-s.slots
		s.calls.Put(c)
		return nil, s.failure()
	}
	s.pending[call.Id] = c
	c.deadline = time.Time{}
	if expires {
		c.deadline = deadline
		if s.expiryAt.IsZero() || deadline.Before(s.expiryAt) {
			s.expireAtLocked(deadline)
		}
	}
	// A call on a framed stream nobody was waiting on: if the stream turns out broken before
	// anything is read, the peer closed it while it was idle, unseen (see errStaleStream).
	idle := s.framed != nil && len(s.pending) == 1 && len(s.pings) == 0
	reads := s.reads.Load()
	if !s.watching && s.sil.on() {
		s.startWatchLocked()
	}
	// With few calls in flight and nothing queued, the caller sends its own frame, saving
	// the hand-off to the writer (at 1 caller the hand-offs are the call's cost). Such a
	// Send cannot block: grpc-go's SendMsg waits only once 64 KiB of the stream's frames
	// are not yet written to the connection, and directSendCalls small frames are far less.
	// Otherwise the writer sends it: a caller must be free to leave at its deadline.
	direct := len(s.queue) == 0 && len(s.pending) <= directSendCalls && size <= directSendBytes && s.sendMu.TryLock()
	if !direct {
		s.queue = append(s.queue, call)
	}
	s.mu.Unlock()
	if direct {
		var err error
		if s.framed != nil {
			err = s.framed.SendBy(call, deadline)
		} else {
			err = s.stream.Send(call)
		}
		s.sendMu.Unlock()
		if err != nil && !errors.Is(err, io.EOF) {
			s.breakIO(err) // the reply channel gets the failure
		}
	} else {
		s.signal()
	}

	// On a framed stream nobody else reads, the caller reads its own reply: at 1 caller
	// the reader's hand-off to the caller cost nearly half a remote hit's time
	// (e2e/bench/HISTORY.md, step 4). Otherwise the one who reads hands it over.
	if s.framed != nil && s.tryRead() {
		r, ok := s.readFor(ctx, cancel, deadline, c)
		if !ok && !s.leave(call.Id) {
			r, ok = <-c.reply, true // handed over as it left
		}
		<-s.reading
		if s.awaited() {
			s.wakeReader()
		}
		if ok {
			return s.result(c, r, idle, reads)
		}
		<-s.slots
		s.calls.Put(c)
		if deadlineOf(cancel, deadline) {
			<-cancel.Done() // its deadline has passed; its timer may not have fired yet
		}
		err := ctx.Err()
		if err == nil { // a fill's context that made its timer: it has not fired yet
			err = context.DeadlineExceeded
		}
		return nil, fromContext(err)
	}
	select {
	case r := <-c.reply: // or the expiry's
		return s.result(c, r, idle, reads)
	case <-cancel.Done():
		waiting := s.leave(call.Id)
		<-s.slots
		if waiting {
			s.calls.Put(c)
		} // else the reader has taken it and sends its reply: c cannot be reused
		return nil, fromContext(ctx.Err())
	}
}

// result is get's answer once c's reply r has come. A call sent on an idle framed stream
// that broke from the peer's side before anything was read is errStaleStream.
func (s *muxStream) result(c *streamCall, r streamResult, idle bool, reads uint64) (*peerpb.GetResponse, error) {
	<-s.slots
	s.calls.Put(c)
	if r.unary {
		return nil, errAskUnary
	}
	if r.err != nil && idle && s.reads.Load() == reads && s.brokeFromPeer() {
		return nil, errStaleStream
	}
	return r.resp, r.err
}

// leave takes the call id, whose caller's ctx ended, off the stream: its reply is no longer
// waited for, and the peer is told to drop it. It reports whether the call was still
// waiting; if not, its reply has been or is being handed to its streamCall.
func (s *muxStream) leave(id uint64) bool {
	s.mu.Lock()
	_, waiting := s.pending[id]
	if waiting {
		delete(s.pending, id)
		if s.err == nil {
			s.queue = append(s.queue, &peerpb.GetCall{Id: id, Cancel: true})
		}
	}
	s.mu.Unlock()
	if waiting {
		s.signal()
	}
	return waiting
}

// failure is the error of a call on a broken stream: unreachable, whatever broke it.
func (s *muxStream) failure() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if isUnimplemented(s.err) {
		return s.err // a peer without GetStream: the caller asks it with a unary call
	}
	return unavailable("transport: get stream broke: %v", s.err)
}

// breakIO is breakWith for an error of the connection itself: the peer closed or reset it,
// or it could not be read or written.
func (s *muxStream) breakIO(err error) { s.breakAs(err, true) }

// brokeFromPeer reports whether the stream broke by breakIO.
func (s *muxStream) brokeFromPeer() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.peerBroke
}

// breakWith marks the stream broken by err (the first cause wins) and fails every call
// waiting on it.
func (s *muxStream) breakWith(err error) { s.breakAs(err, false) }

func (s *muxStream) breakAs(err error, fromPeer bool) {
	s.mu.Lock()
	if s.err != nil {
		s.mu.Unlock()
		return
	}
	if err == nil {
		err = errors.New("stream ended")
	}
	s.err, s.peerBroke = err, fromPeer
	pending := s.pending
	s.pending = nil
	s.queue = nil
	close(s.done)
	if s.keepalive != nil {
		s.keepalive.Stop()
	}
	if s.watch != nil {
		s.watch.Stop()
	}
	if s.expiry != nil {
		s.expiry.Stop()
	}
	s.mu.Unlock()
	s.cancel()
	fail := s.failure()
	for _, c := range pending {
		c.reply <- streamResult{err: fail}
	}
}

// errStaleStream is get's answer when its call was the only one on a framed stream and the
// stream broke from the peer's side before anything was read: the peer closed it while it
// stood idle — nobody reads a framed stream no call waits on, so that went unseen — as a
// restarting peer does. The Get is sent again, once, on a new stream (Gets are reads: a
// peer that did get the first has answered nobody).
var errStaleStream = errors.New("transport: get stream closed by the peer while idle")

// errAskUnary is get's answer when the peer asks for a unary call.
var errAskUnary = errors.New("transport: ask with a unary call")
