package resp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/corralcache/corral"
	"github.com/corralcache/corral/cmd/corral/internal/batch"
	"github.com/corralcache/corral/cmd/corral/internal/objects"
	"github.com/corralcache/corral/cmd/corral/internal/servetest"
	"github.com/corralcache/corral/fill"
)

// startLoaderServer is startTestServer whose group fills keys with load, as a group of
// corral serve fills them from --origin.
func startLoaderServer(tb testing.TB, load corral.LoadFunc[objects.Object]) *testServer {
	tb.Helper()
	reg := prometheus.NewRegistry()
	cfg := testConfig(tb, reg)
	cfg.Node = servetest.Node(tb, reg, cfg.MaxValueBytes)
	groups, err := objects.NewGroups(objects.GroupsConfig{MaxGroups: 1,
		Load: func(string) corral.LoadFunc[objects.Object] { return load }})
	if err != nil {
		tb.Fatal(err)
	}
	if cfg.Group, err = groups.Group(cfg.Node, "resp"); err != nil {
		tb.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	s, err := Start(ln, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Close(ctx); err != nil {
			tb.Errorf("close: %v", err)
		}
	})
	return &testServer{s: s, addr: ln.Addr().String(), hits: cfg.Hits}
}

// MGET answers as Redis does: each key's value or nil, in the order asked, a key named twice
// answered twice, RESP3's null on a connection that said HELLO 3, in a pipeline too.
func TestRESPMGet(t *testing.T) {
	td := startTestServer(t, nil)
	rc := servetest.DialRESP(t, td.addr)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"SET", "a", "1"}, "+OK\r\n"},
		{[]string{"SET", "b", "\x00\r\n\xff"}, "+OK\r\n"},
		{[]string{"MGET", "a"}, "*1\r\n" + servetest.Bulk("1")},
		{[]string{"mget", "a", "none", "b", "a"}, "*4\r\n" + servetest.Bulk("1") + "$-1\r\n" + servetest.Bulk("\x00\r\n\xff") + servetest.Bulk("1")},
		{[]string{"MGET", "none", "none"}, "*2\r\n$-1\r\n$-1\r\n"},
		{[]string{"MGET"}, "-ERR wrong number of arguments for 'mget' command\r\n"},
		{[]string{"MGET", "a", ""}, "-ERR batch refused: key 2 of 2: empty key\r\n"},
		{[]string{"MGET", strings.Repeat("k", fill.MaxKeyBytes+1), "a"}, `-ERR batch refused: key 1 of 2 ("` + strings.Repeat("k", 64) + `…"): key of 4097 bytes exceeds the key limit of 4096 bytes` + "\r\n"},
		{[]string{"HELLO", "3"}, ""},
		{[]string{"MGET", "none", "a"}, "*2\r\n_\r\n" + servetest.Bulk("1")},
	} {
		got := rc.Do(t, tt.args...)
		if tt.want != "" && got != tt.want {
			t.Errorf("%q = %q, want %q", tt.args, got, tt.want)
		}
	}
	if got := td.limitHits("batch"); got != 2 {
		t.Errorf("batch hits = %v, want 2 (the empty key and the long one)", got)
	}
	// A pipeline: GET, MGET, GET.
	if _, err := rc.Conn.Write([]byte("*2\r\n$3\r\nGET\r\n$1\r\na\r\n*3\r\n$4\r\nMGET\r\n$1\r\nb\r\n$1\r\na\r\n*2\r\n$3\r\nGET\r\n$1\r\nx\r\n")); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{servetest.Bulk("1"), "*2\r\n" + servetest.Bulk("\x00\r\n\xff") + servetest.Bulk("1"), "_\r\n"} {
		if got, err := rc.Reply(); err != nil || got != want {
			t.Fatalf("pipelined reply %q, %v; want %q", got, err, want)
		}
	}
}

// An MGET's misses are filled once each by the group's loader, however often the MGET names
// them; a key not found is nil. A key that failed fails the command, naming it (and the
// others found stay cached: the MGET again loads only the failed key).
func TestRESPMGetFills(t *testing.T) {
	var mu sync.Mutex
	calls := map[string]int{}
	down := true
	td := startLoaderServer(t, func(_ context.Context, key string) (objects.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		calls[key]++
		switch {
		case strings.HasPrefix(key, "gone"):
			return objects.Object{}, corral.ErrNotFound
		case key == "flaky" && down:
			return objects.Object{}, errors.New("origin answered 503 Service Unavailable")
		}
		return objects.Object{Body: []byte("v:" + key)}, nil
	})
	rc := servetest.DialRESP(t, td.addr)
	if got, want := rc.Do(t, "MGET", "a", "gone", "b", "a", "gone"), "*5\r\n"+servetest.Bulk("v:a")+"$-1\r\n"+servetest.Bulk("v:b")+servetest.Bulk("v:a")+"$-1\r\n"; got != want {
		t.Fatalf("MGET = %q, want %q", got, want)
	}
	got := rc.Do(t, "MGET", "a", "flaky", "c")
	if want := "-ERR MGET: 1 of 3 keys failed, so no key is answered (the others are cached: MGET again); 'flaky': origin answered 503 Service Unavailable\r\n"; got != want {
		t.Fatalf("MGET with a failing key = %q, want %q", got, want)
	}
	mu.Lock()
	down = false
	mu.Unlock()
	if got, want := rc.Do(t, "MGET", "a", "flaky", "c"), "*3\r\n"+servetest.Bulk("v:a")+servetest.Bulk("v:flaky")+servetest.Bulk("v:c"); got != want {
		t.Fatalf("MGET again = %q, want %q", got, want)
	}
	mu.Lock()
	defer mu.Unlock()
	for key, want := range map[string]int{"a": 1, "b": 1, "gone": 1, "c": 1, "flaky": 2} {
		if calls[key] != want {
			t.Errorf("%q loaded %d times, want %d", key, calls[key], want)
		}
	}
}

// The failed keys are named, the first three of them, with how many more.
func TestRESPMGetNamesFailedKeys(t *testing.T) {
	var failed []batch.Failure
	for i := range 5 {
		failed = append(failed, batch.Failure{Key: fmt.Sprint("k", i), Err: &corral.FillError{Group: "resp", Key: fmt.Sprint("k", i), Err: errors.New("down")}})
	}
	want := "ERR MGET: 5 of 9 keys failed, so no key is answered (the others are cached: MGET again); 'k0': down; 'k1': down; 'k2': down; and 2 more"
	if got := failedKeys(failed, 9); got != want {
		t.Fatalf("failedKeys = %q, want %q", got, want)
	}
}

// An MGET of more keys than a batch read may name is answered with an error and reads
// nothing, and the connection goes on with its next command; so does any command of more
// arguments than the bound, and an inline line of more words. At the bound, MGET answers.
func TestRESPMGetTooManyKeys(t *testing.T) {
	td := startTestServer(t, nil)
	rc := servetest.DialRESP(t, td.addr)
	keys := make([]string, batch.MaxKeys+1)
	for i := range keys {
		keys[i] = fmt.Sprint("k", i)
	}
	if got, want := rc.Do(t, append([]string{"MGET"}, keys...)...), "-ERR MGET of 10001 keys exceeds the limit of 10000 keys of one batch read: nothing was read\r\n"; got != want {
		t.Fatalf("MGET of 10001 keys = %q, want %q", got, want)
	}
	if got := td.limitHits("batch"); got != 1 {
		t.Fatalf("batch hits = %v, want 1", got)
	}
	if got := rc.Do(t, "PING"); got != "+PONG\r\n" {
		t.Fatalf("PING on the same connection after = %q", got)
	}
	if got, want := rc.Do(t, append([]string{"DEL"}, keys...)...), "-ERR a command of 10002 arguments exceeds the limit of 10001: it was not run\r\n"; got != want {
		t.Fatalf("DEL of 10001 keys = %q, want %q", got, want)
	}
	if got := td.limitHits("resp_command"); got != 1 {
		t.Fatalf("resp_command hits = %v, want 1", got)
	}
	inline := "MGET" + strings.Repeat(" k", batch.MaxKeys+1) + "\r\n"
	if _, err := rc.Conn.Write([]byte(inline)); err != nil {
		t.Fatal(err)
	}
	if got, err := rc.Reply(); err != nil || got != "-ERR a command of more than 10001 arguments exceeds the limit: it was not run\r\n" {
		t.Fatalf("an inline MGET of 10001 words = %q, %v", got, err)
	}
	got := rc.Do(t, append([]string{"MGET"}, keys[:batch.MaxKeys]...)...)
	if want := "*10000\r\n" + strings.Repeat("$-1\r\n", batch.MaxKeys); got != want {
		t.Fatalf("MGET of 10000 keys = %d bytes %.40q…, want 10000 nils", len(got), got)
	}
	if got := rc.Do(t, "PING"); got != "+PONG\r\n" {
		t.Fatalf("PING after = %q", got)
	}
}
