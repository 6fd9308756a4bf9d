package transport

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/proto"

	"github.com/corralcache/corral/transport/peerpb"
)

// HitHandler is a Handler that can answer some Gets at once. A Server asks it first for each
// Get on a GetStream, on the stream's receive loop; what it does not answer runs on a
// goroutine of its own, through Handler.Get, so that a slow fill never delays the hits
// queued behind it on the stream.
type HitHandler interface {
	Handler
	// GetHit answers req when that takes no waiting — a fresh value already held — and
	// reports whether it did. It must not block, fill, or call peers; any error, and any
	// Get it cannot answer at once, it leaves to Get (ok = false).
	GetHit(ctx context.Context, req *peerpb.GetRequest) (resp *peerpb.GetResponse, ok bool)
}

// GetStream serves one peer's stream of Gets: each call is served as Handler.Get would
// serve a unary Get (with its timeout, and until the peer cancels it), and answered on the
// stream in whatever order the answers come. The stream ends when the peer ends it, or when
// the Server stops: the calls running then finish (Stop's ctx bounds them), calls that
// arrive after are answered as a stopped server's (unreachable), and then the stream ends.
func (p *peerService) GetStream(stream peerpb.Peer_GetStreamServer) error {
	p.serveStream(stream.Context(), stream)
	return nil
}

// replyStream is a Server's side of a GetStream: gRPC's, or a framed connection's.
type replyStream interface {
	Send(*peerpb.GetReply) error
	Recv() (*peerpb.GetCall, error)
}

// serveStream serves stream (see GetStream) until it ends; ctx is the stream's. The receive
// loop may outlive it until stream's Recv returns (p.loops counts it).
func (p *peerService) serveStream(ctx context.Context, stream replyStream) {
	ss := &serverStream{p: p, stream: stream, ctx: ctx, wake: make(chan struct{}, 1),
		drained: make(chan struct{}, 1), calls: make(map[uint64]context.CancelFunc)}
	ss.framed, _ = stream.(*serverFramed)
	writerDone := make(chan struct{})
	go func() { defer close(writerDone); ss.write() }()
	// The receive loop runs on a goroutine of its own so that Stop can end the stream while
	// the loop waits in Recv: returning from here cancels the stream (or closes the framed
	// connection), which ends that wait. Server.Stop waits for the loop (p.loops).
	recvDone := make(chan struct{})
	p.loops.Add(1)
	go func() { defer p.loops.Done(); defer close(recvDone); ss.receive() }()

	select {
	case <-recvDone: // the peer ended the stream or went away: nobody reads the answers
		ss.mu.Lock()
		for _, cancel := range ss.calls {
			cancel()
		}
		ss.mu.Unlock()
	case <-p.quit: // the Server stops: finish what runs, take nothing new
	}
	ss.mu.Lock()
	ss.stopping = true
	ss.mu.Unlock()
	ss.running.Wait()
	ss.mu.Lock()
	ss.closed = true
	ss.mu.Unlock()
	ss.signal()
	<-writerDone
	// A hit the receive loop is sending itself (answerHit) is sent before the handler
	// returns: grpc-go does not allow a Send after. One it starts later sees closed.
	ss.sendMu.Lock()
	if ss.framed != nil {
		ss.framed.Flush() // what the receive loop queued and had not flushed yet
	}
	ss.sendMu.Unlock()
}

// maxQueuedAnswers bounds the bytes of answers queued on one stream and not yet taken by its
// writer: past it, the receive loop reads no more calls until the writer takes them. A peer
// that sends Gets and reads no answers (or reads them slower than it asks) is then held back
// by the transport's flow control instead of growing the queue; calls on goroutines of their
// own are bounded apart, by MaxStreamCalls. The writer holds one batch besides, so a stream
// keeps at most about twice this, plus one answer.
const maxQueuedAnswers = 4 << 20

// frameOverhead is what a queued answer counts for beside its message: its frame header and
// slice slot.
const frameOverhead = 16

// testHookHeldBack, if set, is called each time a receive loop waits for its writer to take
// a full queue of answers.
var testHookHeldBack func()

// receive reads the peer's calls until the stream ends, answering hits at once and starting
// a goroutine for every other call.
func (ss *serverStream) receive() {
	p := ss.p
	hits, _ := p.h.(HitHandler)
	for {
		if ss.framed != nil {
			ss.flushHits()
		}
		for ss.queued.Load() >= maxQueuedAnswers {
			if testHookHeldBack != nil {
				testHookHeldBack()
			}
			select {
			case <-ss.drained:
			case <-ss.ctx.Done():
				return // the stream is over
			}
		}
		call, err := ss.stream.Recv()
		if err != nil {
			return // the peer closed its side, went away, or the stream ended
		}
		id := call.GetId()
		if call.GetCancel() {
			ss.mu.Lock()
			if cancel, ok := ss.calls[id]; ok {
				cancel()
				delete(ss.calls, id) // its slot is free at once; its answer is not sent
			}
			ss.mu.Unlock()
			continue
		}
		req := call.GetRequest()
		if req == nil && id == 0 {
			ss.push(ss.reply(0), 0) // a ping (frame.go)
			continue
		}
		if req == nil {
			ss.fail(id, fmt.Errorf("%w: get call without a request", ErrInvalidArgument))
			continue
		}
		base := ss.ctx
		// The Get's server span, when p traces and the Get carries a trace that was sampled.
		// One sampled out is read only if the Get is no hit: a hit has nothing to pass it on
		// to.
		var span trace.Span
		if p.tracer != nil && trace.TraceFlags(req.GetTraceFlags()).IsSampled() {
			base, span = p.startGet(base, req)
		}
		if hits != nil {
			if resp, ok := p.hit(hits, base, req); ok {
				if span != nil { // ended before the answer goes: the caller's span ends after it
					answered(span, resp)
					endSpan(span, nil)
				}
				ss.answerHit(id, resp, call.GetMaxReplySize())
				continue
			}
		}
		if p.tracer != nil && span == nil {
			base, _ = p.startGet(base, req) // its trace context, for the loader's calls
		}
		ctx, cancel := context.WithCancel(base)
		if t := call.GetTimeoutNanos(); t > 0 {
			ctx, cancel = context.WithTimeout(base, time.Duration(t))
		}
		ss.mu.Lock()
		var refuse error
		full := false
		switch {
		case ss.stopping:
			refuse = unavailable("transport: server stopping")
		case len(ss.calls) >= p.maxStreamCalls:
			refuse, full = streamFull(p.maxStreamCalls), true
		default:
			ss.calls[id] = cancel
			ss.running.Add(1) // under mu, with stopping unset: never after GetStream's Wait began
		}
		ss.mu.Unlock()
		if refuse != nil {
			cancel()
			if full {
				p.onLimit("peer_stream_calls")
			}
			ss.fail(id, refuse)
			endSpan(span, refuse)
			continue
		}
		go func() {
			defer ss.running.Done()
			resp, err := p.Get(ctx, req)
			if span != nil {
				answered(span, resp)
				endSpan(span, err)
			}
			ss.mu.Lock()
			_, live := ss.calls[id]
			delete(ss.calls, id)
			ss.mu.Unlock()
			cancel()
			if !live {
				return // cancelled by the peer: it reads no answer
			}
			if err != nil {
				ss.fail(id, err)
				return
			}
			ss.answer(id, resp, call.GetMaxReplySize())
		}()
	}
}

// hit asks h for an answer at once, recovering a panic as peerService.Get does (the Get
// that follows reports it).
func (p *peerService) hit(h HitHandler, ctx context.Context, req *peerpb.GetRequest) (resp *peerpb.GetResponse, ok bool) {
	defer func() {
		if recover() != nil {
			resp, ok = nil, false
		}
	}()
	return h.GetHit(ctx, req)
}

// serverStream is the sending side of one GetStream: answers are queued by the calls'
// goroutines and the receive loop, and sent in order by one writer.
type serverStream struct {
	p      *peerService
	stream replyStream
	framed *serverFramed // stream when it is a framed connection: batches go in one write
	// unflushed is set by the receive loop when it queued a hit's answer on framed and has
	// not flushed it yet (flushHits).
	unflushed bool
	ctx       context.Context
	wake      chan struct{} // (1) tells the writer something is queued
	// drained (1) tells a receive loop held back by a full queue that the writer took it.
	drained chan struct{}
	// queued is the bytes of the answers in queue (their messages' sizes plus
	// frameOverhead each): written under mu, read by the receive loop without it.
	queued atomic.Int64

	// running counts the calls running on goroutines of their own.
	running sync.WaitGroup

	// sendMu is held by whoever calls stream.Send: the writer, for each batch, or the
	// receive loop answering a hit itself (answerHit).
	sendMu sync.Mutex

	mu sync.Mutex // guards calls, queue, stopping and closed
	// calls holds a cancel func per call running on its own goroutine, by id.
	calls    map[uint64]context.CancelFunc
	queue    []*peerpb.GetReply
	stopping bool // no call starts any more
	closed   bool // the stream is over: the writer sends what is queued and ends
}

// answer sends resp to call id, unless it is larger than this Server or the caller reads
// (callerMax, 0 = no limit of its own): sent, it would end the stream for every call on it,
// so the call gets a ResourceExhausted failure instead, as a unary call would.
func (ss *serverStream) answer(id uint64, resp *peerpb.GetResponse, callerMax uint32) {
	r := ss.reply(id)
	r.Response = resp
	limit, side := ss.p.maxMessage, "the server's"
	if callerMax > 0 && int64(callerMax) < int64(limit) {
		limit, side = int(callerMax), "the caller's"
	}
	size := proto.Size(r)
	if size > ss.p.maxStreamAnswer && (resp.GetSource() == peerpb.Source_HIT || resp.GetSource() == peerpb.Source_STALE) {
		// A large value held here: sent on the stream, it would hold back every answer
		// queued behind it for its whole transfer. The caller asks again with a unary
		// call, an HTTP/2 stream of its own whose frames interleave with the others'.
		// (A value a fill just made goes on the stream: it may not be held, and asking
		// again could fill again.)
		r.Response, r.Unary = nil, true
		ss.push(r, 0)
		return
	}
	if size > limit {
		ss.fail(id, oversized("transport: get answer of %d bytes exceeds %s MaxMessageSize %d", size, side, limit))
		return
	}
	ss.push(r, size)
}

// answerHit is answer for a hit on the receive loop: when nothing is queued and the writer
// is idle, the loop sends a small answer itself, saving the hand-off to the writer (at 1
// caller the hand-offs are the call's cost). Such a Send waits only when the peer has not
// read 64 KiB of this stream's answers; then the loop would wait for the peer to read in
// any case, as the writer would.
func (ss *serverStream) answerHit(id uint64, resp *peerpb.GetResponse, callerMax uint32) {
	r := ss.reply(id)
	r.Response = resp
	limit := min(directSendBytes, ss.p.maxStreamAnswer, ss.p.maxMessage)
	if callerMax > 0 {
		limit = min(limit, int(min(callerMax, math.MaxInt32)))
	}
	if proto.Size(r) > limit || !ss.sendMu.TryLock() {
		ss.answer(id, resp, callerMax)
		return
	}
	ss.mu.Lock()
	idle := len(ss.queue) == 0 && !ss.closed
	ss.mu.Unlock()
	if !idle {
		ss.sendMu.Unlock()
		ss.answer(id, resp, callerMax)
		return
	}
	if ss.framed != nil {
		// Written with the answers to the other calls of the same read: the loop flushes
		// before it waits for more (flushHits), so at 1 caller each answer goes at once
		// and at many, one write carries many answers.
		if err := ss.framed.Queue(r); err != nil {
			ss.sendMu.Unlock()
			ss.fail(id, internal("transport: get answer: %v", err))
			return
		}
		ss.unflushed = true
		if len(ss.framed.wbuf) >= maxKeptFrameBuffer/2 {
			ss.framed.Flush() // an error ends the stream: the next Recv fails
			ss.unflushed = false
		}
		ss.sendMu.Unlock()
		return
	}
	if ss.stream.Send(r) != nil {
		// The peer went away: the stream ends, and the writer's next Send fails too.
		ss.sendMu.Unlock()
		return
	}
	ss.sendMu.Unlock()
}

// flushHits writes the answers answerHit queued on a framed stream once the loop has read
// every call that came with them: before it waits for the next.
func (ss *serverStream) flushHits() {
	if !ss.unflushed || ss.framed.r.Buffered() > 0 {
		return
	}
	ss.unflushed = false
	ss.sendMu.Lock()
	ss.framed.Flush() // an error ends the stream: the next Recv fails, and the writer's Flush
	ss.sendMu.Unlock()
}

// fail answers id with err, a status error (peerService.Get's) or any Handler error.
func (ss *serverStream) fail(id uint64, err error) {
	r := ss.reply(id)
	r.Failure = toFailure(ss.ctx, err)
	ss.push(r, proto.Size(r))
}

// reply returns a reply to call id that tells this node's lateness (ServerConfig.Lateness).
func (ss *serverStream) reply(id uint64) *peerpb.GetReply {
	r := &peerpb.GetReply{Id: id}
	if late := ss.p.lateness; late != nil {
		r.LateMillis = uint32(min(late(), time.Hour) / time.Millisecond)
	}
	return r
}

// push queues r, of size bytes (its proto.Size; 0 for one known to be a few bytes), for the
// writer.
func (ss *serverStream) push(r *peerpb.GetReply, size int) {
	ss.mu.Lock()
	if ss.closed {
		ss.mu.Unlock()
		return // the writer has ended
	}
	ss.queue = append(ss.queue, r)
	ss.queued.Add(int64(size + frameOverhead))
	ss.mu.Unlock()
	ss.signal()
}

func (ss *serverStream) signalDrained() {
	select {
	case ss.drained <- struct{}{}:
	default:
	}
}

func (ss *serverStream) signal() {
	select {
	case ss.wake <- struct{}{}:
	default:
	}
}

// write sends the queued answers until the stream is over. A Send that fails (the peer went
// away) ends the stream; the answers after it are dropped, as their peer is gone.
func (ss *serverStream) write() {
	var batch []*peerpb.GetReply
	for {
		<-ss.wake
		ss.sendMu.Lock()
		ss.mu.Lock()
		batch, ss.queue = ss.queue, batch[:0]
		full := ss.queued.Swap(0) >= maxQueuedAnswers
		closed := ss.closed
		ss.mu.Unlock()
		if full {
			ss.signalDrained()
		}
		err := ss.send(batch)
		clear(batch)
		ss.sendMu.Unlock()
		if err != nil {
			if ss.framed != nil {
				// Its frames after the failed one are lost: end the connection, so that
				// the peer's calls fail at once rather than at their deadlines.
				ss.framed.conn.Close()
			}
			ss.drain()
			return
		}
		if closed {
			return
		}
	}
}

// send sends batch, in order: on a framed stream, in one write.
func (ss *serverStream) send(batch []*peerpb.GetReply) error {
	return sendBatch(ss.stream.Send, ss.framed, batch)
}

// drain drops answers queued after a failed Send until the stream is over.
func (ss *serverStream) drain() {
	for {
		ss.mu.Lock()
		ss.queue = nil
		ss.queued.Store(0)
		closed := ss.closed
		ss.mu.Unlock()
		ss.signalDrained()
		if closed {
			return
		}
		<-ss.wake
	}
}
