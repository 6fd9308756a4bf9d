package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"
)

// The raw TCP floor: a request and its answer over a kept-alive loopback connection between
// two Go processes, with nothing else — length-prefixed key out, length-prefixed value back,
// the caller's goroutine doing its own write and read (as go-redis does), the server one
// goroutine per connection (as Redis's event loop and net/http do). No cache can answer a
// remote Get faster than this on this machine; it shows what each system adds on top.

type tcpServer struct {
	lis   net.Listener
	value []byte
	wg    sync.WaitGroup
	// mu guards conns.
	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

func (s *tcpServer) serve() {
	for {
		c, err := s.lis.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		s.conns[c] = struct{}{}
		s.mu.Unlock()
		s.wg.Go(func() {
			defer func() {
				s.mu.Lock()
				delete(s.conns, c)
				s.mu.Unlock()
				c.Close()
			}()
			// Buffers that hold a whole answer: one write a request, a page's too.
			r, w := bufio.NewReaderSize(c, len(s.value)+4), bufio.NewWriterSize(c, len(s.value)+4)
			var key []byte
			for {
				var err error
				if key, err = readFrame(r, key); err != nil {
					return
				}
				if err := writeFrame(w, s.value); err != nil || w.Flush() != nil {
					return
				}
			}
		})
	}
}

func (s *tcpServer) close() {
	s.lis.Close()
	s.mu.Lock()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

func readFrame(r *bufio.Reader, buf []byte) ([]byte, error) {
	var n [4]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return nil, err
	}
	size := binary.BigEndian.Uint32(n[:])
	if size > 1<<20 {
		return nil, fmt.Errorf("frame of %d bytes", size)
	}
	buf = append(buf[:0], make([]byte, size)...)
	_, err := io.ReadFull(r, buf)
	return buf, err
}

func writeFrame(w *bufio.Writer, b []byte) error {
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(b)))
	w.Write(n[:])
	_, err := w.Write(b)
	return err
}

// tcpConn is one pooled client connection.
type tcpConn struct {
	c   net.Conn
	r   *bufio.Reader
	w   *bufio.Writer
	buf []byte
}

// tcpClient is a pool of connections: a caller takes one, does its round trip, puts it back.
type tcpClient struct {
	addr string
	pool chan *tcpConn
}

func (t *tcpClient) get(ctx context.Context, key string) (int, error) {
	tc, err := t.take(ctx)
	if err != nil {
		return 0, err
	}
	if err = tc.send(ctx, []byte(key)); err == nil {
		tc.buf, err = readFrame(tc.r, tc.buf)
	}
	if err != nil {
		tc.c.Close()
		return 0, err
	}
	n := len(tc.buf) // tc is another caller's once back in the pool
	t.put(tc)
	return n, nil
}

// take takes a connection from the pool, or dials one when the pool is empty.
func (t *tcpClient) take(ctx context.Context) (*tcpConn, error) {
	select {
	case tc := <-t.pool:
		return tc, nil
	default:
	}
	c, err := (&net.Dialer{Timeout: 2 * time.Second}).DialContext(ctx, "tcp", t.addr)
	if err != nil {
		return nil, err
	}
	// A reader that holds a page's answer (row 9) in one read.
	return &tcpConn{c: c, r: bufio.NewReaderSize(c, 64<<10), w: bufio.NewWriter(c)}, nil
}

// put gives tc back to the pool, or closes it when the pool is full.
func (t *tcpClient) put(tc *tcpConn) {
	select {
	case t.pool <- tc:
	default:
		tc.c.Close()
	}
}

// send writes a request of b on tc, within ctx's deadline.
func (tc *tcpConn) send(ctx context.Context, b []byte) error {
	if dl, ok := ctx.Deadline(); ok {
		tc.c.SetDeadline(dl)
	}
	if err := writeFrame(tc.w, b); err != nil {
		return err
	}
	return tc.w.Flush()
}

func (t *tcpClient) close() {
	for {
		select {
		case tc := <-t.pool:
			tc.c.Close()
		default:
			return
		}
	}
}

func init() {
	ops["tcp.start"] = func(_ context.Context, w *workerState, raw json.RawMessage) (any, error) {
		return startTCPServer(w, raw, "tcp.server")
	}
	ops["tcp.dial"] = func(_ context.Context, w *workerState, raw json.RawMessage) (any, error) {
		var addr string
		if err := json.Unmarshal(raw, &addr); err != nil {
			return nil, err
		}
		if addr == "" {
			return nil, errors.New("no address")
		}
		t := &tcpClient{addr: addr, pool: make(chan *tcpConn, 128)}
		w.put("tcp.client", t, t.close)
		return nil, nil
	}
}

// The raw TCP floor of a page (row 9): each owner's share of a page's keys sent to a raw TCP
// server standing in for it (c1's and c2's, each answering every request with a canned
// buffer as large as its share of the page's values), every request written before any
// answer is read, on the caller's goroutine. No cache that spreads a page over owners can
// answer it faster on this machine.

// tcpPager reads pages from its servers, a connection to each per caller.
type tcpPager struct{ servers []*tcpClient }

func (t *tcpPager) read(ctx context.Context, keys []string) (int, error) {
	conns := make([]*tcpConn, len(t.servers))
	fail := func(err error) (int, error) {
		for _, tc := range conns {
			if tc != nil {
				tc.c.Close()
			}
		}
		return 0, err
	}
	// Every server's share of the keys (the i-th of len(servers) equal runs) is asked before
	// any answer is read.
	for i, s := range t.servers {
		tc, err := s.take(ctx)
		if err != nil {
			return fail(err)
		}
		conns[i] = tc
		if err := tc.send(ctx, []byte(strings.Join(keys[i*len(keys)/len(conns):(i+1)*len(keys)/len(conns)], "\n"))); err != nil {
			return fail(err)
		}
	}
	n := 0
	for _, tc := range conns {
		var err error
		if tc.buf, err = readFrame(tc.r, tc.buf); err != nil {
			return fail(err)
		}
		n += len(tc.buf)
	}
	for i, tc := range conns {
		t.servers[i].put(tc)
	}
	return n, nil
}

func (t *tcpPager) close() {
	for _, s := range t.servers {
		s.close()
	}
}

func init() {
	// tcp.page.start starts a page floor's server, answering every request with a buffer
	// of the given bytes.
	ops["tcp.page.start"] = func(_ context.Context, w *workerState, raw json.RawMessage) (any, error) {
		return startTCPServer(w, raw, "tcp.page.server")
	}
	// tcp.page.dial makes the page floor's client, of the servers at the given addresses.
	ops["tcp.page.dial"] = func(_ context.Context, w *workerState, raw json.RawMessage) (any, error) {
		var addrs []string
		if err := json.Unmarshal(raw, &addrs); err != nil {
			return nil, err
		}
		if len(addrs) == 0 {
			return nil, errors.New("no addresses")
		}
		t := &tcpPager{}
		for _, addr := range addrs {
			t.servers = append(t.servers, &tcpClient{addr: addr, pool: make(chan *tcpConn, 128)})
		}
		w.put("tcp.pager", t, t.close)
		return nil, nil
	}
}

// startTCPServer starts a raw TCP server answering every request with a buffer of the size
// raw holds, kept in w's state as key, and returns its address.
func startTCPServer(w *workerState, raw json.RawMessage, key string) (any, error) {
	size, lis, err := listenSized(raw)
	if err != nil {
		return nil, err
	}
	s := &tcpServer{lis: lis, value: payload(size), conns: map[net.Conn]struct{}{}}
	go s.serve()
	w.put(key, s, s.close)
	return lis.Addr().String(), nil
}

// listenSized decodes the value size a server op is given, and listens on loopback for it.
func listenSized(raw json.RawMessage) (int, net.Listener, error) {
	var size int
	if err := json.Unmarshal(raw, &size); err != nil {
		return 0, nil, err
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	return size, lis, err
}
