package resp

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"testing"
)

// setClient sends pipelines of SETs of 512-byte values over a loopback connection, each
// pipeline to keys of its own among 1000 (redis-benchmark -r 1000), and reads the replies,
// allocating nothing itself.
type setClient struct {
	c       net.Conn
	br      *bufio.Reader
	batches [][]byte // one pipeline per turn, cycling
	turn    int
	depth   int
}

func newSetClient(tb testing.TB, depth int) *setClient {
	tb.Helper()
	ts := startTestServer(tb, nil)
	c, err := net.Dial("tcp", ts.addr)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	value := bytes.Repeat([]byte("v"), 512)
	sc := &setClient{c: c, br: bufio.NewReaderSize(c, 64<<10), depth: depth}
	for k := 0; k < 1000; k += depth {
		var b bytes.Buffer
		for i := range depth {
			key := fmt.Sprintf("key:%012d", (k+i)%1000)
			fmt.Fprintf(&b, "*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n", len(key), key, len(value), value)
		}
		sc.batches = append(sc.batches, b.Bytes())
	}
	return sc
}

// round sends one pipeline and reads its replies.
func (sc *setClient) round(tb testing.TB) {
	if _, err := sc.c.Write(sc.batches[sc.turn]); err != nil {
		tb.Fatal(err)
	}
	sc.turn = (sc.turn + 1) % len(sc.batches)
	for range sc.depth {
		line, err := sc.br.ReadSlice('\n')
		if err != nil || string(line) != "+OK\r\n" {
			tb.Fatalf("reply %q, %v", line, err)
		}
	}
}

// BenchmarkSet measures a Redis protocol SET of a 512-byte value, over loopback, in
// pipelines of 1 and 16; allocs/op counts the whole process, per pipeline.
//
//	go test -run '^$' -bench BenchmarkSet -benchmem ./cmd/corral/internal/resp
func BenchmarkSet(b *testing.B) {
	for _, depth := range []int{1, 16} {
		b.Run(fmt.Sprint("pipeline=", depth), func(b *testing.B) {
			sc := newSetClient(b, depth)
			sc.round(b)
			b.ReportAllocs()
			for b.Loop() {
				sc.round(b)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*depth), "ns/SET")
		})
	}
}
