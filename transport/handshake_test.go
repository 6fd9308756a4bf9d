package transport

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"
)

type limitCounter struct {
	mu   sync.Mutex
	hits map[string]int
}

func (l *limitCounter) hit(limit string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.hits == nil {
		l.hits = map[string]int{}
	}
	l.hits[limit]++
}

func (l *limitCounter) count(limit string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.hits[limit]
}

// A connection that never completes its handshake (a slowloris, a port scan that holds the
// socket) is closed at HandshakeTimeout and counted; the Server goes on serving its peers.
func TestHandshakeTimeoutClosesSilentConnections(t *testing.T) {
	var limits limitCounter
	addr, _ := serve(t, newFakeHandler(), ServerConfig{HandshakeTimeout: 200 * time.Millisecond, OnLimit: limits.hit})
	silent, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	silent.Write([]byte("PRI * HTTP/2.0\r\n")) // half a preface, then nothing
	silent.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := silent.Read(make([]byte, 1)); err == nil {
		// The server's settings frame may come first; read until it closes.
		for err == nil {
			_, err = silent.Read(make([]byte, 4096))
		}
	}
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("the server kept a connection that never completed its handshake for 30s")
	}
	for deadline := time.Now().Add(10 * time.Second); limits.count("peer_handshake") == 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if got := limits.count("peer_handshake"); got != 1 {
		t.Fatalf("peer_handshake counted %d times, want 1", got)
	}
	c := newClient(t, ClientConfig{})
	if _, err := getKey(c, context.Background(), addr, "k"); err != nil {
		t.Fatalf("a peer after the silent one: %v", err)
	}
	if got := limits.count("peer_handshake"); got != 1 {
		t.Fatalf("a good connection was counted as a handshake timeout (%d)", got)
	}
}

// A Get past MaxStreamCalls is counted.
func TestStreamFullIsCounted(t *testing.T) {
	var limits limitCounter
	h := newHitHandler()
	addr, _ := serve(t, h, ServerConfig{MaxStreamCalls: 1, OnLimit: limits.hit})
	c := newClient(t, ClientConfig{MaxStreamCalls: 4, CallTimeout: time.Minute, SilentPeerTimeout: -1})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	held := make(chan error, 1)
	go func() { _, err := getKey(c, ctx, addr, "hang"); held <- err }()
	<-h.deadline
	if _, err := getKey(c, context.Background(), addr, "second"); err == nil {
		t.Fatal("a Get past MaxStreamCalls was served")
	}
	if got := limits.count("peer_stream_calls"); got != 1 {
		t.Fatalf("peer_stream_calls counted %d times, want 1", got)
	}
	cancel()
	<-held
}
