package resp

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/corralcache/corral/cmd/corral/internal/objects"
	"github.com/corralcache/corral/cmd/corral/internal/origin"
)

// getClient sends pipelines of GETs of one key over a loopback connection to a front whose
// group holds that key (512 bytes, as in the comparison with Redis), and reads the replies,
// allocating nothing itself.
type getClient struct {
	c     net.Conn
	br    *bufio.Reader
	batch []byte
	depth int
	value []byte
}

func newGetClient(tb testing.TB, depth int, withOrigin bool) *getClient {
	tb.Helper()
	ts := startTestServer(tb, func(cfg *Config) {
		if !withOrigin {
			return
		}
		// As corral serve runs in the comparison with Redis: a GET's key is checked against
		// the origin's template first (a hit never asks the origin).
		o, err := origin.New(origin.Config{Template: "http://127.0.0.1:1/items/{key}", FillTimeout: time.Second, MaxBytes: 1 << 20})
		if err != nil {
			tb.Fatal(err)
		}
		cfg.Origin = o
	})
	const key = "key:000000000042"
	if err := ts.s.cfg.Group.Set(context.Background(), key, objects.Object{Body: bytes.Repeat([]byte("v"), 512)}); err != nil {
		tb.Fatal(err)
	}
	c, err := net.Dial("tcp", ts.addr)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	cmd := fmt.Sprintf("*2\r\n$3\r\nGET\r\n$%d\r\n%s\r\n", len(key), key)
	return &getClient{c: c, br: bufio.NewReaderSize(c, 64<<10), batch: bytes.Repeat([]byte(cmd), depth),
		depth: depth, value: make([]byte, 512+2)}
}

// round sends one pipeline and reads its replies.
func (gc *getClient) round(tb testing.TB) {
	if _, err := gc.c.Write(gc.batch); err != nil {
		tb.Fatal(err)
	}
	for range gc.depth {
		line, err := gc.br.ReadSlice('\n')
		if err != nil || string(line) != "$512\r\n" {
			tb.Fatalf("reply %q, %v", line, err)
		}
		if _, err := io.ReadFull(gc.br, gc.value); err != nil {
			tb.Fatal(err)
		}
	}
}

// TestGetAllocs holds a Redis protocol GET that hits to no allocation in the whole process:
// the front reading the command, the group's Get and the reply, counted over every goroutine
// by the runtime (the client allocates nothing). A pipeline of 1 and of 16, as
// redis-benchmark's -P1 and -P16; without an origin, and with one (--origin), as corral serve
// runs in the comparison.
func TestGetAllocs(t *testing.T) {
	for _, tc := range []struct {
		depth      int
		withOrigin bool
	}{{1, false}, {16, false}, {1, true}, {16, true}} {
		depth := tc.depth
		t.Run(fmt.Sprint("pipeline=", depth, ",origin=", tc.withOrigin), func(t *testing.T) {
			gc := newGetClient(t, depth, tc.withOrigin)
			for range 100 { // the connection's buffers, the key's string
				gc.round(t)
			}
			const rounds = 2000
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			for range rounds {
				gc.round(t)
			}
			runtime.ReadMemStats(&after)
			// As testing.AllocsPerRun counts: whole allocations per GET. The node's own
			// timers (gossip, probes) allocate a little while this runs: far fewer than
			// one per GET.
			if per := (after.Mallocs - before.Mallocs) / (rounds * uint64(depth)); per != 0 {
				t.Errorf("a GET allocates %d times, want 0", per)
			}
		})
	}
}

// BenchmarkGet measures a Redis protocol GET that hits, over loopback, in pipelines of 1 and
// 16; allocs/op counts the whole process (0: TestGetAllocs).
//
//	go test -run '^$' -bench BenchmarkGet -benchmem ./cmd/corral/internal/resp
func BenchmarkGet(b *testing.B) {
	for _, depth := range []int{1, 16} {
		b.Run(fmt.Sprint("pipeline=", depth), func(b *testing.B) {
			gc := newGetClient(b, depth, false)
			gc.round(b)
			b.ReportAllocs()
			for b.Loop() {
				gc.round(b)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*depth), "ns/GET")
		})
	}
}
