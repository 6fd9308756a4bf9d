package transport

import (
	"context"
	"encoding/binary"
	"net"
	"sync"
	"testing"

	"golang.org/x/net/http2"

	"github.com/corralcache/corral/transport/peerpb"
)

// frameTap records the bytes a connection writes and reads, to count its HTTP/2 frames.
type frameTap struct {
	net.Conn
	mu          sync.Mutex
	sent, recvd []byte
}

func (c *frameTap) Write(p []byte) (int, error) {
	c.mu.Lock()
	c.sent = append(c.sent, p...)
	c.mu.Unlock()
	return c.Conn.Write(p)
}

func (c *frameTap) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.mu.Lock()
	c.recvd = append(c.recvd, p[:n]...)
	c.mu.Unlock()
	return n, err
}

// frames counts the frames of each type in b, an HTTP/2 byte stream (a client's starts with
// the connection preface).
func frames(t *testing.T, b []byte, client bool) map[http2.FrameType]int {
	t.Helper()
	if client {
		if len(b) < len(http2.ClientPreface) || string(b[:len(http2.ClientPreface)]) != http2.ClientPreface {
			t.Fatalf("client bytes do not start with the HTTP/2 preface")
		}
		b = b[len(http2.ClientPreface):]
	}
	n := map[http2.FrameType]int{}
	for len(b) >= 9 {
		length := int(binary.BigEndian.Uint32(append([]byte{0}, b[:3]...)))
		if len(b) < 9+length {
			break // the rest of a frame still in flight
		}
		n[http2.FrameType(b[3])]++
		b = b[9+length:]
	}
	return n
}

// TestGetsSendNoFlowControlPings: serial Gets on a gRPC peer connection cost their own frames and
// nothing more — no bandwidth-delay PING, ACK or WINDOW_UPDATE around each one (grpc-go's
// dynamic windows send them once per Get each way; the windows here are fixed, limits.go).
func TestGetsSendNoFlowControlPings(t *testing.T) {
	addr, _ := serve(t, newFakeHandler(), ServerConfig{})
	var tapMu sync.Mutex
	var taps []*frameTap
	c := newClient(t, ClientConfig{Dialer: func(ctx context.Context, addr string) (net.Conn, error) {
		conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, err
		}
		tap := &frameTap{Conn: conn}
		tapMu.Lock()
		taps = append(taps, tap)
		tapMu.Unlock()
		return tap, nil
	}})
	c.framing = false // the Gets go on the gRPC stream, as on a TLS connection
	ctx := context.Background()
	const gets = 200
	for i := range gets {
		if _, err := c.Get(ctx, addr, &peerpb.GetRequest{Group: "g", Key: []byte{byte(i)}}); err != nil {
			t.Fatalf("Get %d: %v", i, err)
		}
	}
	tapMu.Lock()
	defer tapMu.Unlock()
	if len(taps) != 1 {
		t.Fatalf("%d connections made, want 1", len(taps))
	}
	tap := taps[0]
	tap.mu.Lock()
	defer tap.mu.Unlock()
	sent, recvd := frames(t, tap.sent, true), frames(t, tap.recvd, false)
	t.Logf("client sent %v, received %v (frame type: count)", sent, recvd)
	if sent[http2.FrameData] < gets || recvd[http2.FrameData] < gets {
		t.Fatalf("DATA frames: sent %d, received %d; want at least %d each way", sent[http2.FrameData], recvd[http2.FrameData], gets)
	}
	// The connection's setup may exchange a ping or a window update or two; one per Get
	// would be hundreds.
	for _, ft := range []http2.FrameType{http2.FramePing, http2.FrameWindowUpdate} {
		if sent[ft] > 4 || recvd[ft] > 4 {
			t.Errorf("%v frames: client sent %d, received %d over %d Gets; want a handful at most", ft, sent[ft], recvd[ft], gets)
		}
	}
}
