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

// trickle sends head, then a byte of the body every gap until stop is closed or the server
// closes the connection. It returns at once; the bytes go on in the background.
func trickle(tb testing.TB, c net.Conn, head string, gap time.Duration, stop <-chan struct{}) {
	tb.Helper()
	if _, err := io.WriteString(c, head); err != nil {
		tb.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(gap)
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
	tb.Cleanup(func() { <-done })
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
		c, err := net.Dial("tcp", td.http)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		stop := make(chan struct{})
		start := time.Now()
		trickle(t, c, "PUT /v1/groups/g/keys/slow HTTP/1.1\r\nHost: corral\r\nContent-Type: text/plain\r\nContent-Length: 1000\r\n\r\n", 100*time.Millisecond, stop)
		c.SetReadDeadline(time.Now().Add(20 * time.Second))
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("no answer: %v", err)
		}
		body, _ := io.ReadAll(resp.Body)
		took := time.Since(start)
		close(stop)
		if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(body), "did not arrive whole within 600ms (--read-body-timeout)") || !resp.Close {
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
		c, err := net.Dial("tcp", td.http)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		stop := make(chan struct{})
		trickle(t, c, "GET /v1/cluster HTTP/1.1\r\nHost: corral\r\nContent-Length: 1000\r\n\r\n", 100*time.Millisecond, stop)
		c.SetReadDeadline(time.Now().Add(20 * time.Second))
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("no answer: %v", err)
		}
		io.Copy(io.Discard, resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /v1/cluster: %d", resp.StatusCode)
		}
		// The body goes on trickling; the server reads it (to find the next request) until
		// the bound, then closes.
		n, err := br.Read(make([]byte, 1))
		close(stop)
		if !closed(err) {
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
