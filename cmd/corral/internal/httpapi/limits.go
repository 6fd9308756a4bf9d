package httpapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/corralcache/corral/cmd/corral/internal/clientlease"
	"github.com/corralcache/corral/cmd/corral/internal/limithits"
)

// Limits bound what a request to the HTTP API may cost. A Limits written by hand must set
// MaxHeaderBytes, ReadHeaderTimeout and ReadBodyTimeout: zero is refused.
type Limits struct {
	// MaxHeaderBytes is the largest request line and headers accepted, bytes
	// (--max-header-bytes); larger get 431. At least 1024.
	MaxHeaderBytes int
	// MaxClientRequests is how many data requests one client IP may have in flight at once
	// (--max-client-requests); more get 429. /healthz, /readyz and /metrics have a budget of
	// their own, 64 per IP. 0 = no bound.
	MaxClientRequests int
	// ReadHeaderTimeout closes a connection that has not sent a whole request header in this
	// time (--read-header-timeout): a slowloris bound. Positive.
	ReadHeaderTimeout time.Duration
	// ReadBodyTimeout bounds the time a request's body may take to arrive whole, from the end
	// of its header (--read-body-timeout): a PUT past it gets 408 and its connection is
	// closed; a body nobody reads (a GET's) closes the connection. net/http bounds only the
	// header: without this, a body trickled a byte at a time would hold its connection, its
	// request's slot and what it sent so far for as long as the client likes. Positive.
	ReadBodyTimeout time.Duration
}

// DefaultLimits returns the production limits. A header of 64 KiB is far past any real
// client's (browsers send a few KiB); 10 s to send a header is generous for any client on a
// pod network and keeps a slowloris from holding sockets for long. 30 s for a body lets the
// largest value by default (8 MiB) arrive at 2.3 Mbit/s, far below a pod network's speed, and
// lets a trickled body hold its connection for 30 s, not for ever.
//
// A stampede is a cache's normal traffic: an application pod sends as many requests at once
// as its rate times the time corral takes to answer, and on a miss that is the origin's
// time (Little's law). Measured here, an application pod (a Go HTTP service calling corral
// through a tuned http.Transport, 1000 keys of 2 s TTL, an origin answering in 200 ms) at
// 1,500 requests a second had 2,327 requests in flight to one node at its peak; 1,000 a
// second against an origin of 1 s, 1,066. 8192 is 3.5 times the first, 8,000 a second
// against a 1 s origin; a request in flight costs the node about 20 KiB, so a client at the
// bound holds about 160 MiB. A proxy in front of corral should get a bound of its own.
// The probes and /metrics have a budget of their own (opsRequestsPerClient).
func DefaultLimits() Limits {
	return Limits{MaxHeaderBytes: 64 << 10, MaxClientRequests: 8192, ReadHeaderTimeout: 10 * time.Second, ReadBodyTimeout: 30 * time.Second}
}

// opsRequestsPerClient is the budget of each client IP's requests in flight to the probes
// and /metrics.
const opsRequestsPerClient = 64

// Validate returns an error, naming the flag, for a limit out of its range.
func (l Limits) Validate() error {
	switch {
	case l.MaxHeaderBytes < 1024:
		return fmt.Errorf("--max-header-bytes %d: want at least 1024", l.MaxHeaderBytes)
	case l.MaxClientRequests < 0:
		return fmt.Errorf("--max-client-requests %d is negative", l.MaxClientRequests)
	case l.ReadHeaderTimeout <= 0:
		return errors.New("--read-header-timeout must be positive")
	case l.ReadBodyTimeout <= 0:
		return errors.New("--read-body-timeout must be positive")
	}
	return nil
}

// httpLimits enforces the HTTP front's limits and counts their hits.
type httpLimits struct {
	lim  Limits
	hits *limithits.Counter

	mu sync.Mutex // guards inFlight, opsInFlight and born
	// inFlight counts each client IP's data requests being served, opsInFlight its requests
	// to the probes and /metrics.
	inFlight    map[string]int
	opsInFlight map[string]int
	// born holds when each connection that has not yet sent a whole request arrived.
	born map[net.Conn]time.Time
}

func newHTTPLimits(lim Limits, hits *limithits.Counter) *httpLimits {
	return &httpLimits{lim: lim, hits: hits, inFlight: map[string]int{}, opsInFlight: map[string]int{}, born: map[net.Conn]time.Time{}}
}

// server applies the limits that live on the http.Server: its own header bound, twice ours
// and a page over, is the hard cap behind the middleware's check (a header between the two
// is answered by the middleware, and counted; past it net/http answers 431 itself, uncounted).
func (l *httpLimits) server(srv *http.Server) {
	srv.ReadHeaderTimeout = l.lim.ReadHeaderTimeout
	srv.MaxHeaderBytes = 2*l.lim.MaxHeaderBytes + 4096
	srv.ConnState = l.connState
	srv.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		return context.WithValue(ctx, connKey{}, c)
	}
}

// connKey keys a request's connection in its context.
type connKey struct{}

// connState keeps, for each connection that is waiting for a request header, when it began
// to: a new connection, or an idle one that began to send a request. The middleware drops it
// when a whole request arrives. A connection closed while still waiting for the read-header
// timeout was closed by net/http for it: a slowloris, counted.
func (l *httpLimits) connState(c net.Conn, st http.ConnState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch st {
	case http.StateNew:
		l.born[c] = time.Now()
	case http.StateActive:
		if _, ok := l.born[c]; !ok {
			l.born[c] = time.Now()
		}
	case http.StateIdle, http.StateHijacked:
		delete(l.born, c)
	case http.StateClosed:
		if at, ok := l.born[c]; ok {
			delete(l.born, c)
			// The server's timer started a moment after ours: allow it a little.
			if time.Since(at) >= l.lim.ReadHeaderTimeout*9/10 {
				l.hits.Hit(limithits.ReadHeaderTimeout)
			}
		}
	}
}

// headerArrived records that c sent a whole request header.
func (l *httpLimits) headerArrived(r *http.Request) {
	if c, ok := r.Context().Value(connKey{}).(net.Conn); ok {
		l.mu.Lock()
		delete(l.born, c)
		l.mu.Unlock()
	}
}

// middleware answers a request over the header bound with 431 and one from a client with
// too many requests in flight with 429, before next sees it.
func (l *httpLimits) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l.headerArrived(r)
		if size := headerSize(r); size > l.lim.MaxHeaderBytes {
			l.hits.Hit(limithits.Header)
			httpError(w, http.StatusRequestHeaderFieldsTooLarge,
				fmt.Sprintf("request line and headers of %d bytes exceed the limit of %d bytes (--max-header-bytes)", size, l.lim.MaxHeaderBytes))
			return
		}
		inFlight, max, limit, what := l.inFlight, l.lim.MaxClientRequests, limithits.ClientRequests, "requests in flight, the limit (--max-client-requests)"
		switch r.URL.Path {
		case "/healthz", "/readyz", "/metrics":
			inFlight, max, limit, what = l.opsInFlight, opsRequestsPerClient, limithits.OpsRequests, "requests in flight to /healthz, /readyz and /metrics, the limit"
		}
		if r.ContentLength != 0 {
			r = l.bodyDeadline(w, r)
		}
		if max > 0 {
			ip := clientlease.ClientOf(r.RemoteAddr)
			if !l.enter(inFlight, ip, max) {
				l.hits.Hit(limit)
				w.Header().Set("Retry-After", "1")
				httpError(w, http.StatusTooManyRequests, fmt.Sprintf("this client has %d %s", max, what))
				return
			}
			defer l.leave(inFlight, ip)
		}
		next.ServeHTTP(w, r)
	})
}

// bodyDeadline bounds the time r's body may take to arrive (ReadBodyTimeout): net/http lifts
// the read deadline once a header has arrived. The deadline is lifted again when the body has
// arrived whole: net/http then reads the connection in the background to see the client
// leave, and a deadline passing while the handler still works (a write told to every
// member) would read as the client gone and cancel the request.
//
// It returns a shallow copy of r whose Body lifts the deadline: net/http keeps r's own, and
// handles the part of a body that the handler left unread (or that did not arrive in time) as
// it always does.
func (l *httpLimits) bodyDeadline(w http.ResponseWriter, r *http.Request) *http.Request {
	rc := http.NewResponseController(w)
	if rc.SetReadDeadline(time.Now().Add(l.lim.ReadBodyTimeout)) != nil {
		return r // not a connection's writer (a test's recorder): nothing to bound
	}
	rb := *r
	rb.Body = &untilBodyEnd{ReadCloser: r.Body, rc: rc}
	return &rb
}

// untilBodyEnd lifts its connection's read deadline when the body ends.
type untilBodyEnd struct {
	io.ReadCloser
	rc     *http.ResponseController
	lifted bool
}

func (b *untilBodyEnd) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if errors.Is(err, io.EOF) && !b.lifted {
		b.lifted = true
		b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}

// bodyTimedOut reports whether err, from reading a request's body, is ReadBodyTimeout's.
func bodyTimedOut(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// enter counts a request of ip in inFlight, unless ip has max there already.
func (l *httpLimits) enter(inFlight map[string]int, ip string, max int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if inFlight[ip] >= max {
		return false
	}
	inFlight[ip]++
	return true
}

func (l *httpLimits) leave(inFlight map[string]int, ip string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if inFlight[ip]--; inFlight[ip] <= 0 {
		delete(inFlight, ip)
	}
}

// headerSize approximates the bytes of the request line and headers as sent.
func headerSize(r *http.Request) int {
	n := len(r.Method) + len(r.RequestURI) + len(r.Proto) + 4
	for k, vs := range r.Header {
		for _, v := range vs {
			n += len(k) + len(v) + 4
		}
	}
	return n + len(r.Host) + 8
}
