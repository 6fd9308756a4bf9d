package httpapi

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

// trickled sends head to addr on a new connection, then a byte of the body every 100 ms, as
// a slow-body attack does, until the server answers (or closes the connection). It returns
// the answer, with its body read, and the connection's reader past it; tb's cleanup closes
// the connection.
func trickled(tb testing.TB, addr, head string) (*http.Response, string, *bufio.Reader) {
	tb.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := io.WriteString(c, head); err != nil {
		tb.Fatal(err)
	}
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			if _, err := c.Write([]byte("x")); err != nil {
				return
			}
		}
	}()
	tb.Cleanup(func() { c.Close(); <-done })
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	close(stop)
	if err != nil {
		tb.Fatalf("no answer: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body), br
}

// closed reports whether err is the end of a connection the server closed: EOF, or a reset
// when the client's last bytes reached a socket already closed.
func closed(err error) bool { return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) }

// A body that trickles in — a byte every 100 ms, as a slow-body attack sends it — is cut at
// --read-body-timeout: a PUT is answered 408 and its connection closed, a body nobody reads
// closes its connection, each is counted, and nothing is stored. A body that arrives in time
// leaves no deadline behind: the connection serves its next request after a pause longer
// than the bound.
func TestBodyTimeout(t *testing.T) {
	const bound = 600 * time.Millisecond
	td := startTestServer(t, func(c *apiSetup) { c.Limits.ReadBodyTimeout = bound })

	t.Run("a trickled PUT", func(t *testing.T) {
		start := time.Now()
		resp, body, br := trickled(t, td.http, "PUT /v1/groups/g/keys/slow HTTP/1.1\r\nHost: corral\r\nContent-Type: text/plain\r\nContent-Length: 1000\r\n\r\n")
		took := time.Since(start)
		if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(body, "did not arrive whole within 600ms (--read-body-timeout)") || !resp.Close {
			t.Fatalf("answer %d %q (close %v), want 408 saying --read-body-timeout, and the connection closed", resp.StatusCode, body, resp.Close)
		}
		if took < bound {
			t.Errorf("answered after %v, before the bound of %v", took, bound)
		}
		if n, err := br.Read(make([]byte, 1)); !closed(err) {
			t.Errorf("after the 408 the connection gave %d bytes, %v; want it closed", n, err)
		}
		if got := td.limitHits("read_body_timeout"); got != 1 {
			t.Errorf("read_body_timeout hits = %v, want 1", got)
		}
		if resp, _ := td.do(t, "GET", "/v1/groups/g/keys/slow", ""); resp.StatusCode != http.StatusNotFound {
			t.Errorf("the cut PUT stored something: GET answers %d", resp.StatusCode)
		}
	})

	t.Run("a trickled body nobody reads", func(t *testing.T) {
		resp, _, br := trickled(t, td.http, "GET /v1/cluster HTTP/1.1\r\nHost: corral\r\nContent-Length: 1000\r\n\r\n")
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /v1/cluster: %d", resp.StatusCode)
		}
		// The server reads the rest of the body (to find the next request) until the bound,
		// then closes.
		if n, err := br.Read(make([]byte, 1)); !closed(err) {
			t.Errorf("the connection gave %d bytes, %v; want it closed at the bound", n, err)
		}
	})

	t.Run("a body in time leaves no deadline", func(t *testing.T) {
		c, err := net.Dial("tcp", td.http)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		br := bufio.NewReader(c)
		for i, pause := range []time.Duration{0, 2 * bound} {
			time.Sleep(pause) // time passing on an idle connection is the point here
			fmt.Fprintf(c, "PUT /v1/groups/g/keys/fast%d HTTP/1.1\r\nHost: corral\r\nContent-Length: 2\r\n\r\nok", i)
			c.SetReadDeadline(time.Now().Add(20 * time.Second))
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("PUT %d after %v: %v", i, pause, err)
			}
			io.Copy(io.Discard, resp.Body)
			if resp.StatusCode != http.StatusNoContent || resp.Close {
				t.Fatalf("PUT %d after %v: %d (close %v)", i, pause, resp.StatusCode, resp.Close)
			}
		}
	})
}
