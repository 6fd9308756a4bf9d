package httpapi

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/corralcache/corral/cmd/corral/internal/intern"
	"github.com/corralcache/corral/cmd/corral/internal/limithits"
)

// The hit path's own HTTP/1.1 front. It takes only requests it can read whole and whose
// answer net/http would give alike: GET of /v1/groups/{group}/keys/{key} with nothing to
// unescape and no query, HTTP/1.1, a Host, no body, no Connection, Expect or Upgrade header,
// every header well formed and the whole header within the limit; and only on a node
// without an API token (a token's requests go to net/http). It serves them through the same
// handler as net/http — the limits, the routes, getKey — with a Request and a ResponseWriter
// it keeps for the connection. Anything else — any other request, a header longer than its
// buffer — and the connection is handed to net/http with the bytes read so far, and served
// there from then on. Like net/http it gives a new connection --read-header-timeout to send
// a request, a kept-alive one IdleTimeout to begin the next and then --read-header-timeout,
// and counts a connection closed for the first as a slowloris (limithits.ReadHeaderTimeout).
//
// Allocations: none a request once the connection is set up and its path has been seen
// (TestFrontAllocs). What it does not do that net/http does: it does not watch for a client
// that hangs up while a request is served (net/http's per-request read, one goroutine and two
// system calls); such a request's context ends with the connection instead, and a fill goes
// on under its own context either way.

// frontBodyBuffer is the largest body the front sends with a Content-Length; a larger one
// goes chunked, as net/http sends a body past its buffer.
const frontBodyBuffer = 8 << 10

// frontReadBuffer is the front's read buffer: a request header longer goes to net/http.
const frontReadBuffer = 4 << 10

// headerBound is the longest request header the front (and a loop) reads itself: within
// its buffer, and short of --max-header-bytes by a margin, so that net/http answers one near
// the bound as it always does.
func (s *Server) headerBound() int {
	return min(s.api.cfg.Limits.MaxHeaderBytes-64, frontReadBuffer)
}

// frontConn is one connection served by the front. Its fields are its goroutine's.
type frontConn struct {
	s        *Server
	c        net.Conn
	br       *bufio.Reader
	bw       *bufio.Writer
	ctx      context.Context
	cancel   context.CancelFunc
	req      *http.Request
	url      url.URL
	w        frontWriter
	keys     []string  // the response's header names, sorted
	deadline time.Time // the connection's read deadline, as last set
	// traced is set when the API traces: the request's trace context headers (API.fields:
	// traceparent and tracestate, or what the propagator reads), kept in trace, go to the
	// handler (in req's Header). Without tracing the front reads them as any other header,
	// and a hit allocates nothing.
	traced bool
	trace  [][]byte // trace[i] is API.fields[i]'s value, empty for none
	// A connection an event loop handed over (loop.go) goes back to loop after
	// handBackAfter hits in a row (streak); pending are the responses the loop could not
	// write, which go first.
	loop    *httpLoop
	streak  int
	pending []byte
	// kept says the connection served a request on its loop before it was handed over, and
	// born, if it did not, when it was accepted: its first request's header is due
	// --read-header-timeout after it.
	kept bool
	born time.Time
}

func newFrontConn(s *Server, c net.Conn) *frontConn {
	fc := &frontConn{s: s, c: c}
	fc.ctx, fc.cancel = context.WithCancel(context.WithValue(context.Background(), connKey{}, c))
	return fc
}

// paths are the front's request targets as strings: a key's path is the key the group keeps.
var paths intern.Strings

// serve serves fc's requests until it closes, or hands it to net/http.
func (fc *frontConn) serve() {
	s := fc.s
	handed := false
	defer func() {
		if p := recover(); p != nil {
			// As net/http does: the request's panic is logged, and its connection closed.
			s.api.cfg.Log.Error("http: panic serving "+fc.c.RemoteAddr().String(), "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
		}
		fc.cancel()
		if !handed {
			fc.c.Close()
		}
		s.forget(fc)
		s.wg.Done()
	}()
	if s.api.cfg.Token != nil {
		handed = fc.handOver(nil)
		return
	}
	lim := s.api.cfg.Limits
	fc.br = bufio.NewReaderSize(fc.c, frontReadBuffer)
	fc.bw = bufio.NewWriterSize(fc.c, 4<<10)
	if len(fc.pending) > 0 {
		fc.bw.Write(fc.pending)
		fc.pending = nil
	}
	fc.req = (&http.Request{Method: http.MethodGet, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{}, Body: http.NoBody, RemoteAddr: fc.c.RemoteAddr().String(), URL: &fc.url}).WithContext(fc.ctx)
	fc.w.fc, fc.w.h = fc, http.Header{}
	fc.traced = s.api.tracer != nil
	fc.trace = make([][]byte, len(s.api.fields))
	// A new connection has --read-header-timeout from its accept to send a whole request; a
	// kept-alive one idleTimeout to begin the next, and then --read-header-timeout. A deadline
	// is set only before a read that waits (wait): most requests arrive whole in one read.
	headerBy := time.Now().Add(lim.ReadHeaderTimeout)
	if !fc.born.IsZero() {
		headerBy = fc.born.Add(lim.ReadHeaderTimeout)
	}
	for first := !fc.kept; ; first = false {
		if !s.setIdle(fc, true) {
			return
		}
		begin := headerBy
		if !first {
			if fc.loop != nil && fc.streak >= handBackAfter && fc.br.Buffered() == 0 {
				if handed = fc.handBack(); handed {
					return
				}
				fc.streak = 0
			}
			begin = time.Now().Add(idleTimeout)
		}
		if !fc.wait(1, first, begin) || !s.setIdle(fc, false) {
			return
		}
		if !first {
			headerBy = time.Now().Add(lim.ReadHeaderTimeout)
		}
		n, take, ok := fc.readHeader(first, headerBy)
		if !ok {
			return
		}
		if !take {
			handed = fc.handOver(fc.br)
			return
		}
		fc.br.Discard(n)
		if fc.traced {
			fc.traceHeaders()
		}
		s.serve.ServeHTTP(&fc.w, fc.req)
		if fc.loop != nil {
			if fc.w.status == http.StatusOK && isHit(fc.w.h) {
				fc.streak++
			} else {
				fc.streak = 0
			}
		}
		if !fc.respond() {
			return
		}
	}
}

// wait waits until n bytes are buffered, at most until deadline, sending the replies written
// so far first. A read that fails ends the connection; one that timed out waiting for a
// request's header is a slowloris, counted (a kept-alive connection that sent nothing is not
// one: net/http counts neither). It reports whether the bytes arrived.
func (fc *frontConn) wait(n int, first bool, deadline time.Time) bool {
	if fc.br.Buffered() >= n {
		return true
	}
	if fc.bw.Buffered() > 0 && fc.bw.Flush() != nil {
		return false
	}
	if !deadline.Equal(fc.deadline) {
		fc.c.SetReadDeadline(deadline)
		fc.deadline = deadline
	}
	if _, err := fc.br.Peek(n); err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() && (first || fc.br.Buffered() > 0) {
			fc.s.api.limits.hits.Hit(limithits.ReadHeaderTimeout)
		}
		return false
	}
	return true
}

// readHeader reads the next request's header, without consuming it. It returns the header's
// length and whether the front takes the request; ok is false when the connection ends.
func (fc *frontConn) readHeader(first bool, deadline time.Time) (n int, take, ok bool) {
	max := fc.s.headerBound()
	for {
		buf, _ := fc.br.Peek(fc.br.Buffered())
		if end := bytes.Index(buf, []byte("\r\n\r\n")); end >= 0 {
			return end + 4, fc.parse(buf[:end+2]), true
		}
		if len(buf) >= max {
			return 0, false, true // net/http answers it, within its own bound
		}
		if !fc.wait(len(buf)+1, first, deadline) {
			return 0, false, false
		}
	}
}

// parse reads a request header — the request line and header lines, each ending in CRLF —
// into fc.req, and reports whether the front takes it.
func (fc *frontConn) parse(h []byte) bool {
	line, rest, _ := bytes.Cut(h, []byte("\r\n"))
	target, ok := bytes.CutPrefix(line, []byte("GET "))
	if !ok {
		return false
	}
	if target, ok = bytes.CutSuffix(target, []byte(" HTTP/1.1")); !ok || len(target) == 0 || target[0] != '/' {
		return false
	}
	for _, c := range target {
		if c <= ' ' || c >= 0x7f || c == '%' || c == '?' || c == '#' {
			return false // escapes, a query, a fragment, or not a target at all
		}
	}
	hosts := 0
	for i := range fc.trace {
		fc.trace[i] = fc.trace[i][:0]
	}
	for len(rest) > 0 {
		var hl []byte
		hl, rest, _ = bytes.Cut(rest, []byte("\r\n"))
		name, value, ok := bytes.Cut(hl, []byte(":"))
		if !ok || !validName(name) || !validValue(value) {
			return false // also a folded line, which begins with a space
		}
		switch {
		case asciiEqualFold(name, "Host"):
			hosts++
			if !validHost(bytes.Trim(value, " \t")) {
				return false
			}
		case fc.traced && fc.keepTrace(name, value):
		case asciiEqualFold(name, "Content-Length"), asciiEqualFold(name, "Transfer-Encoding"),
			asciiEqualFold(name, "Connection"), asciiEqualFold(name, "Expect"), asciiEqualFold(name, "Upgrade"):
			return false
		}
	}
	if hosts != 1 {
		return false
	}
	path := paths.Of(target)
	if _, _, ok := splitKeyPath(path); !ok {
		return false
	}
	fc.url.Path = path
	fc.req.RequestURI = path
	return true
}

func validName(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	for _, c := range b {
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}

func validValue(b []byte) bool {
	for _, c := range b {
		if (c < ' ' && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

// validHost accepts the hosts clients send to a cache: a name or IPv4 address, an IPv6
// literal in brackets, and a port.
func validHost(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	for _, c := range b {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte(".-:[]_", c) >= 0) {
			return false
		}
	}
	return true
}

func asciiEqualFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range b {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		d := s[i]
		if 'A' <= d && d <= 'Z' {
			d += 'a' - 'A'
		}
		if c != d {
			return false
		}
	}
	return true
}

// handOver gives the connection to net/http, with what br has buffered (nil: nothing read).
// It reports whether net/http took it.
func (fc *frontConn) handOver(br *bufio.Reader) bool {
	if fc.bw != nil && fc.bw.Buffered() > 0 && fc.bw.Flush() != nil {
		return false
	}
	fc.c.SetReadDeadline(time.Time{}) // net/http sets its own
	var c net.Conn = fc.c
	if br != nil && br.Buffered() > 0 {
		buffered, _ := br.Peek(br.Buffered())
		c = &earlyConn{Conn: fc.c, early: bytes.Clone(buffered)}
	}
	fc.s.forget(fc)
	return fc.s.hand.give(c)
}

// earlyConn is a connection handed on — by the front to net/http, or by an event loop to the
// front's goroutine — with bytes read from it and not yet served: its reads return those
// first.
type earlyConn struct {
	net.Conn
	early []byte
}

func (c *earlyConn) Read(p []byte) (int, error) {
	if len(c.early) > 0 {
		n := copy(p, c.early)
		c.early = c.early[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

// CloseWrite lets net/http close the writing half first, as it does on a *net.TCPConn.
func (c *earlyConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// frontWriter is the ResponseWriter of the front's requests: the header, the status, and
// the body up to frontBodyBuffer, written by respond once the handler returns — or, past
// that, the header at once and the body in chunks.
type frontWriter struct {
	fc      *frontConn
	h       http.Header
	status  int
	body    []byte
	chunked bool // the header has been sent, and the body goes in chunks
	err     error
}

var _ http.ResponseWriter = (*frontWriter)(nil)

func (w *frontWriter) Header() http.Header { return w.h }

func (w *frontWriter) WriteHeader(status int) {
	if w.status == 0 && status >= 200 {
		w.status = status
	}
}

func (w *frontWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if !bodyAllowed(w.status) {
		return 0, http.ErrBodyNotAllowed
	}
	if !w.chunked && len(w.body)+len(p) <= frontBodyBuffer {
		w.body = append(w.body, p...)
		return len(p), nil
	}
	bw := w.fc.bw
	if !w.chunked {
		w.chunked = true
		w.fc.writeHeader(w, -1)
		w.writeChunk(w.body)
		w.body = w.body[:0]
	}
	w.writeChunk(p)
	if w.err != nil {
		return 0, w.err
	}
	if err := bw.Flush(); err != nil {
		w.err = err
		return 0, err
	}
	return len(p), nil
}

func (w *frontWriter) writeChunk(p []byte) {
	if len(p) == 0 {
		return
	}
	bw := w.fc.bw
	bw.Write(strconv.AppendInt(bw.AvailableBuffer(), int64(len(p)), 16))
	bw.WriteString("\r\n")
	bw.Write(p)
	if _, err := bw.WriteString("\r\n"); err != nil && w.err == nil {
		w.err = err
	}
}

func bodyAllowed(status int) bool {
	return status != http.StatusNoContent && status != http.StatusNotModified && status >= 200
}

// respond sends the response the handler wrote, and readies the writer for the next. It
// reports whether the connection may serve another request.
func (fc *frontConn) respond() bool {
	w := &fc.w
	if w.status == 0 {
		w.status = http.StatusOK
	}
	switch {
	case w.chunked:
		fc.bw.WriteString("0\r\n\r\n")
	case bodyAllowed(w.status):
		fc.writeHeader(w, len(w.body))
		fc.bw.Write(w.body)
	default:
		fc.writeHeader(w, -1)
	}
	ok := w.err == nil
	fc.resetWriter()
	if fc.br == nil || fc.br.Buffered() == 0 { // a loop's writer flushes to its scratch
		ok = ok && fc.bw.Flush() == nil
	}
	return ok
}

// resetWriter readies the writer for the next response.
func (fc *frontConn) resetWriter() {
	w := &fc.w
	clear(w.h)
	w.status, w.body, w.chunked, w.err = 0, w.body[:0], false, nil
}

// writeHeader writes the status line and header of w, with Content-Length length (-1: none,
// or chunked), a Date, and a sniffed Content-Type when the handler set none, as net/http
// sends them.
func (fc *frontConn) writeHeader(w *frontWriter, length int) {
	bw := fc.bw
	bw.WriteString("HTTP/1.1 ")
	bw.Write(strconv.AppendInt(bw.AvailableBuffer(), int64(w.status), 10))
	bw.WriteByte(' ')
	bw.WriteString(http.StatusText(w.status))
	bw.WriteString("\r\n")
	if _, ok := w.h["Content-Type"]; !ok && bodyAllowed(w.status) && len(w.body) > 0 {
		w.h["Content-Type"] = []string{http.DetectContentType(w.body)}
	}
	fc.keys = fc.keys[:0]
	for k := range w.h {
		if k != "Content-Length" && k != "Transfer-Encoding" && k != "Date" {
			fc.keys = append(fc.keys, k)
		}
	}
	slices.Sort(fc.keys)
	for _, k := range fc.keys {
		for _, v := range w.h[k] {
			bw.WriteString(k)
			bw.WriteString(": ")
			if strings.ContainsAny(v, "\r\n") {
				v = strings.NewReplacer("\r", " ", "\n", " ").Replace(v)
			}
			bw.WriteString(v)
			bw.WriteString("\r\n")
		}
	}
	bw.WriteString("Date: ")
	bw.Write(httpDate())
	bw.WriteString("\r\n")
	switch {
	case w.chunked:
		bw.WriteString("Transfer-Encoding: chunked\r\n")
	case length >= 0:
		bw.WriteString("Content-Length: ")
		bw.Write(strconv.AppendInt(bw.AvailableBuffer(), int64(length), 10))
		bw.WriteString("\r\n")
	}
	bw.WriteString("\r\n")
}

// dateValue is a Date header's value for one second.
type dateValue struct {
	sec int64
	b   []byte
}

var date atomic.Pointer[dateValue]

// httpDate is the Date header's value now, made once a second.
func httpDate() []byte {
	now := time.Now()
	if d := date.Load(); d != nil && d.sec == now.Unix() {
		return d.b
	}
	d := &dateValue{sec: now.Unix(), b: now.UTC().AppendFormat(make([]byte, 0, len(http.TimeFormat)), http.TimeFormat)}
	date.Store(d)
	return d.b
}

// keepTrace keeps value if name is one of the trace context's headers, and reports whether
// it was.
func (fc *frontConn) keepTrace(name, value []byte) bool {
	for i, f := range fc.s.api.fields {
		if asciiEqualFold(name, f) {
			fc.trace[i] = append(fc.trace[i][:0], bytes.Trim(value, " \t")...)
			return true
		}
	}
	return false
}

// traceHeaders gives the request the trace context its header carried, and nothing of the
// request before it.
func (fc *frontConn) traceHeaders() {
	h := fc.req.Header
	for i, f := range fc.s.api.fields {
		delete(h, f)
		if len(fc.trace[i]) > 0 {
			h[f] = []string{string(fc.trace[i])}
		}
	}
}
