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
			r, w := bufio.NewReader(c), bufio.NewWriter(c)
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
		var size int
		if err := json.Unmarshal(raw, &size); err != nil {
			return nil, err
		}
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		s := &tcpServer{lis: lis, value: payload(size), conns: map[net.Conn]struct{}{}}
		go s.serve()
		w.put("tcp.server", s, s.close)
		return lis.Addr().String(), nil
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
