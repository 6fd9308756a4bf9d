package transport

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/corralcache/corral/transport/peerpb"
)

// Framed streams carry the Gets of a peer connection without gRPC. On a gRPC
// stream every frame crosses four goroutines besides its caller's and its handler's — gRPC's
// reader and writer on each side — and on a small machine each hand-off is a thread wake-up;
// framing took a remote hit at 1 caller from 91 to 71 µs p50 (e2e/bench/HISTORY.md). A
// framed stream is the same GetStream, the same GetCall and GetReply messages, on a TCP
// connection of its own to the same port: a caller writes its frame to the socket itself, the
// stream's reader hands each reply straight to its caller, and the Server's receive loop
// reads the socket and writes a hit's answer back itself.
//
// The connection opens with framePreface from the caller; a Server that speaks framing
// answers with the same bytes, and from then on each side sends frames: a 4-byte big-endian
// length and that many bytes of a GetCall (caller to Server) or GetReply (Server to
// caller). A frame longer than the reader's MaxMessageSize ends the connection. A GetCall
// with id 0 and no request is a ping, answered by a GetReply with id 0 and nothing else but
// the Server's lateness (late_millis), as every GetReply carries it.
//
// With TLS, the preface and its answer cross in clear — eight fixed bytes, which say only
// that frames follow — and then the caller starts a TLS handshake on the connection, with
// the same configs, and so the same checks of each side's certificate, as gRPC's; the frames
// travel inside it. A gRPC connection starts with its TLS handshake, which the Server tells
// from the preface by its first bytes. A Server that does not speak framing (an older
// corral) ends a connection that starts with the preface: the caller uses the gRPC stream.

// framePreface opens a framed connection. Neither HTTP/2's preface ("PRI * HTTP/2.0...")
// nor a TLS record (0x16 ...) starts with it.
const framePreface = "CORRAL\x00\x01"

// maxKeptFrameBuffer is the largest read or write buffer a framed stream keeps between frames;
// a larger frame's buffer is dropped after it.
const maxKeptFrameBuffer = 64 << 10

// errFrameTooLarge ends a framed connection whose peer announced a frame over the limit.
var errFrameTooLarge = errors.New("transport: frame exceeds MaxMessageSize")

// framed is one side of a framed connection: it sends S and receives R. Send, Queue and
// Flush are called by one goroutine at a time (the holder of the stream's sendMu); Recv by
// another.
type framed[S, R proto.Message] struct {
	conn    net.Conn
	r       *bufio.Reader
	rbuf    []byte
	maxRecv int
	newR    func() R
	wbuf    []byte // frames queued and not yet written
	// The frame Recv is reading: its header's bytes read so far, and its body's (in rbuf,
	// or in large above maxKeptFrameBuffer).
	hdr   [4]byte
	hdrN  int
	bodyN int
	large *bytes.Buffer
	// wdl is the connection's write deadline, as the last Send set it.
	wdl time.Time
}

func newFramed[S, R proto.Message](conn net.Conn, br *bufio.Reader, maxRecv int, newR func() R) *framed[S, R] {
	return &framed[S, R]{conn: conn, r: br, maxRecv: maxRecv, newR: newR}
}

// Queue appends m's frame to what the next Flush writes.
func (f *framed[S, R]) Queue(m S) error {
	at := len(f.wbuf)
	f.wbuf = append(f.wbuf, 0, 0, 0, 0)
	var err error
	f.wbuf, err = proto.MarshalOptions{}.MarshalAppend(f.wbuf, m)
	if err != nil {
		f.wbuf = f.wbuf[:at]
		return err
	}
	binary.BigEndian.PutUint32(f.wbuf[at:], uint32(len(f.wbuf)-at-4))
	return nil
}

// Flush writes the queued frames in one write.
func (f *framed[S, R]) Flush() error { return f.flushBy(time.Time{}) }

// flushBy is Flush that gives up at deadline (zero: never). It sets the connection's write
// deadline only when it differs from the one set last, which stays set.
func (f *framed[S, R]) flushBy(deadline time.Time) error {
	if len(f.wbuf) == 0 {
		return nil
	}
	if !deadline.Equal(f.wdl) {
		if err := f.conn.SetWriteDeadline(deadline); err != nil {
			return err
		}
		f.wdl = deadline
	}
	_, err := f.conn.Write(f.wbuf)
	if cap(f.wbuf) > maxKeptFrameBuffer {
		f.wbuf = nil
	} else {
		f.wbuf = f.wbuf[:0]
	}
	return err
}

// Send writes m's frame (and any queued before it).
func (f *framed[S, R]) Send(m S) error { return f.SendBy(m, time.Time{}) }

// SendBy is Send that gives up at deadline (zero: never), which leaves the connection
// unusable: the frame may be half written. A caller sends its own frame with it, so that a
// peer that reads nothing (paused, say) cannot hold the caller past its deadline.
func (f *framed[S, R]) SendBy(m S, deadline time.Time) error {
	if err := f.Queue(m); err != nil {
		return err
	}
	return f.flushBy(deadline)
}

// Recv reads the next frame. It can be resumed: when a read deadline ends it part-way
// through a frame, what it read is kept, and the next Recv goes on from there — a caller
// reading its own answer (muxStream.readFor) leaves at its deadline without breaking the
// stream for the others.
func (f *framed[S, R]) Recv() (R, error) {
	var zero R
	for f.hdrN < len(f.hdr) {
		k, err := f.r.Read(f.hdr[f.hdrN:])
		f.hdrN += k
		if err != nil {
			if f.hdrN > 0 && errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return zero, err
		}
	}
	n := int(binary.BigEndian.Uint32(f.hdr[:]))
	if n > f.maxRecv {
		return zero, fmt.Errorf("%w: %d bytes, limit %d", errFrameTooLarge, n, f.maxRecv)
	}
	var buf []byte
	if n <= maxKeptFrameBuffer {
		if cap(f.rbuf) < n {
			// Only at a frame's start: rbuf holds what was read of this one.
			f.rbuf = make([]byte, max(n, 2*cap(f.rbuf), 512))
		}
		buf = f.rbuf[:n]
		for f.bodyN < n {
			k, err := f.r.Read(buf[f.bodyN:])
			f.bodyN += k
			if err != nil {
				if errors.Is(err, io.EOF) {
					err = io.ErrUnexpectedEOF
				}
				return zero, err
			}
		}
	} else {
		// A large frame's buffer grows with the bytes that come, not with the length
		// announced: a peer that announces MaxMessageSize and sends nothing holds no memory.
		if f.large == nil {
			f.large = new(bytes.Buffer)
		}
		if _, err := io.CopyN(f.large, f.r, int64(n-f.large.Len())); err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return zero, err
		}
		buf = f.large.Bytes()
		f.large = nil
	}
	f.hdrN, f.bodyN = 0, 0
	m := f.newR()
	// Unmarshal copies what it keeps: buf is reused for the next frame.
	if err := proto.Unmarshal(buf, m); err != nil {
		return zero, fmt.Errorf("transport: bad frame: %w", err)
	}
	return m, nil
}

func newFrameReader(conn net.Conn) *bufio.Reader { return bufio.NewReaderSize(conn, 16<<10) }

// clientFramed is a caller's side of a framed stream.
type clientFramed = framed[*peerpb.GetCall, *peerpb.GetReply]

// serverFramed is a Server's side of a framed stream.
type serverFramed = framed[*peerpb.GetReply, *peerpb.GetCall]

func newGetReply() *peerpb.GetReply { return new(peerpb.GetReply) }
func newGetCall() *peerpb.GetCall   { return new(peerpb.GetCall) }

// errNoFraming means the peer did not answer the preface with its own: it runs a corral
// without framed streams, and the gRPC stream is used.
var errNoFraming = errors.New("transport: peer does not speak framed streams")

// openFramed makes the caller's side of a framed connection on conn: it sends the preface
// and reads the peer's, then, with tlsConfig, makes the TLS handshake on conn, all by
// deadline.
func openFramed(conn net.Conn, deadline time.Time, maxRecv int, tlsConfig *tls.Config) (*clientFramed, error) {
	if err := conn.SetDeadline(deadline); err != nil {
		return nil, err
	}
	if _, err := io.WriteString(conn, framePreface); err != nil {
		return nil, err
	}
	br := newFrameReader(conn)
	var got [len(framePreface)]byte
	if _, err := io.ReadFull(br, got[:]); err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return nil, err
		}
		// Closed or reset without an answer: an older Server's gRPC refused the preface.
		return nil, fmt.Errorf("%w: %v", errNoFraming, err)
	}
	if string(got[:]) != framePreface {
		return nil, errNoFraming
	}
	fc := conn
	if tlsConfig != nil {
		if br.Buffered() > 0 {
			return nil, errors.New("transport: framed stream: bytes before the TLS handshake")
		}
		tc := tls.Client(conn, tlsConfig)
		if err := tc.Handshake(); err != nil {
			return nil, err
		}
		fc, br = tc, newFrameReader(tc)
	}
	if err := conn.SetDeadline(time.Time{}); err != nil {
		return nil, err
	}
	return newFramed[*peerpb.GetCall](fc, br, maxRecv, newGetReply), nil
}
