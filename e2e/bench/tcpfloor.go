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
	var tc *tcpConn
	select {
	case tc = <-t.pool:
	default:
		c, err := (&net.Dialer{Timeout: 2 * time.Second}).DialContext(ctx, "tcp", t.addr)
		if err != nil {
			return 0, err
		}
		tc = &tcpConn{c: c, r: bufio.NewReader(c), w: bufio.NewWriter(c)}
	}
	if dl, ok := ctx.Deadline(); ok {
		tc.c.SetDeadline(dl)
	}
	var err error
	if err = writeFrame(tc.w, []byte(key)); err == nil {
		if err = tc.w.Flush(); err == nil {
			tc.buf, err = readFrame(tc.r, tc.buf)
		}
	}
	if err != nil {
		tc.c.Close()
		return 0, err
	}
	n := len(tc.buf) // tc is another caller's once back in the pool
	select {
	case t.pool <- tc:
	default:
		tc.c.Close()
	}
	return n, nil
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

// tcpPager reads pages from its servers, one connection to each per caller.
type tcpPager struct {
	addrs []string
	pool  chan []*tcpConn
}

func (t *tcpPager) read(ctx context.Context, keys []string) (int, error) {
	var conns []*tcpConn
	select {
	case conns = <-t.pool:
	default:
		for _, addr := range t.addrs {
			c, err := (&net.Dialer{Timeout: 2 * time.Second}).DialContext(ctx, "tcp", addr)
			if err != nil {
				closeConns(conns)
				return 0, err
			}
			conns = append(conns, &tcpConn{c: c, r: bufio.NewReaderSize(c, 64<<10), w: bufio.NewWriter(c)})
		}
	}
	n, err := t.roundTrip(ctx, conns, keys)
	if err != nil {
		closeConns(conns)
		return 0, err
	}
	select {
	case t.pool <- conns:
	default:
		closeConns(conns)
	}
	return n, nil
}

// roundTrip asks each of conns for its share of keys (the i-th of len(conns) equal runs),
// all at once, and returns the bytes of their answers.
func (t *tcpPager) roundTrip(ctx context.Context, conns []*tcpConn, keys []string) (int, error) {
	for i, tc := range conns {
		if dl, ok := ctx.Deadline(); ok {
			tc.c.SetDeadline(dl)
		}
		share := keys[i*len(keys)/len(conns) : (i+1)*len(keys)/len(conns)]
		if err := writeFrame(tc.w, []byte(strings.Join(share, "\n"))); err != nil {
			return 0, err
		}
		if err := tc.w.Flush(); err != nil {
			return 0, err
		}
	}
	n := 0
	for _, tc := range conns {
		var err error
		if tc.buf, err = readFrame(tc.r, tc.buf); err != nil {
			return 0, err
		}
		n += len(tc.buf)
	}
	return n, nil
}

func (t *tcpPager) close() {
	for {
		select {
		case conns := <-t.pool:
			closeConns(conns)
		default:
			return
		}
	}
}

func closeConns(conns []*tcpConn) {
	for _, tc := range conns {
		tc.c.Close()
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
		t := &tcpPager{addrs: addrs, pool: make(chan []*tcpConn, 128)}
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
