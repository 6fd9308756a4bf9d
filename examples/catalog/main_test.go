package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/corralcache/corral/internal/clustertest"
	"github.com/corralcache/corral/internal/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// The README's three-replica recipe, run as written but in this process and on free ports:
// the replicas form one cluster, a product asked of all three at once is loaded once, and
// every replica stops cleanly.
func TestLocalRecipe(t *testing.T) {
	recipe := readmeRecipe(t)
	if len(recipe) != 3 {
		t.Fatalf("README.md's recipe has %d go run lines, want 3", len(recipe))
	}
	type replica struct {
		http   string
		cancel context.CancelFunc
		done   chan error
		logs   *clustertest.SyncBuffer
	}
	var replicas []*replica
	for _, args := range recipe {
		ctx, cancel := context.WithCancel(context.Background())
		r := &replica{cancel: cancel, done: make(chan error, 1), logs: &clustertest.SyncBuffer{}}
		ready := make(chan string, 1)
		log := slog.New(slog.NewTextHandler(r.logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
		go func() { r.done <- run(ctx, args, func(string) string { return "" }, log, ready) }()
		select {
		case r.http = <-ready:
		case err := <-r.done:
			t.Fatalf("catalog %q: %v", args, err)
		}
		t.Cleanup(func() {
			r.cancel()
			if t.Failed() {
				t.Logf("catalog %q logged:\n%s", args, r.logs.String())
			}
		})
		replicas = append(replicas, r)
	}
	for _, r := range replicas {
		clustertest.Eventually(t, r.http+" to see 3 members", func() bool { return metric(t, r.http, "corral_members") == 3 })
	}

	var wg sync.WaitGroup
	bodies := make(chan string, 3*20)
	for _, r := range replicas {
		for range 20 {
			wg.Go(func() {
				code, body := get(t, "http://"+r.http+"/products/42")
				if code != http.StatusOK {
					t.Errorf("GET /products/42 on %s: %d %s", r.http, code, body)
				}
				bodies <- body
			})
		}
	}
	wg.Wait()
	close(bodies)
	first := <-bodies
	for b := range bodies {
		if b != first {
			t.Fatalf("replicas answered two products: %s and %s", first, b)
		}
	}
	loads := 0
	for _, r := range replicas {
		loads += metric(t, r.http, "catalog_product_loads_total")
	}
	if loads != 1 {
		t.Fatalf("60 reads on 3 replicas made %d loads, want 1", loads)
	}
	if code, _ := get(t, "http://"+replicas[0].http+"/products/no%20such"); code != http.StatusNotFound {
		t.Errorf("a product the demo API does not have: %d, want 404", code)
	}

	for _, r := range replicas {
		r.cancel()
	}
	for _, r := range replicas {
		if err := <-r.done; err != nil {
			t.Errorf("catalog on %s stopped with %v", r.http, err)
		}
	}
}

func TestBadSettings(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		wantErr string
	}{
		{"products URL without {id}", []string{"-products", "http://api/items"}, nil, "must contain {id}"},
		{"a port that is no number", nil, map[string]string{"CORRAL_GOSSIP_PORT": "seven"}, `CORRAL_GOSSIP_PORT="seven": not a port number`},
		{"a key file that is not there", []string{"-key-file", "/nonexistent/key", "-bind", "127.0.0.1", "-gossip-port", "0"}, nil, "no such file"},
		{"a stray argument", []string{"serve"}, nil, "unexpected arguments"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := run(t.Context(), tt.args, func(k string) string { return tt.env[k] }, slog.New(slog.DiscardHandler), nil)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("run = %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}

// readmeRecipe returns the arguments of README.md's `go run ./examples/catalog` lines, every
// port in them replaced by a free one (the same number by the same port).
func readmeRecipe(t *testing.T) [][]string {
	t.Helper()
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	ports := map[string]string{}
	portRE := regexp.MustCompile(`^(-gossip-port|-peer-port)$|:(\d+)$`)
	var recipe [][]string
	for line := range strings.Lines(string(b)) {
		rest, ok := strings.CutPrefix(line, "go run ./examples/catalog ")
		if !ok {
			continue
		}
		args := strings.Fields(rest)
		for i := 0; i < len(args); i++ {
			at, old := i, ""
			switch m := portRE.FindStringSubmatch(args[i]); {
			case m == nil:
				continue
			case m[1] != "" && i+1 < len(args):
				at, old = i+1, args[i+1]
				i++
			case m[2] != "":
				old = m[2]
			default:
				continue
			}
			if ports[old] == "" {
				ports[old] = strconv.Itoa(freePort(t))
			}
			args[at] = strings.TrimSuffix(args[at], old) + ports[old]
		}
		recipe = append(recipe, args)
	}
	return recipe
}

// freePort returns a port free on 127.0.0.1 for TCP and UDP when it returns.
func freePort(t *testing.T) int {
	t.Helper()
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		u, err := net.ListenPacket("udp", fmt.Sprintf("127.0.0.1:%d", port))
		l.Close()
		if err == nil {
			u.Close()
			return port
		}
	}
	t.Fatal("no free port")
	return 0
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Errorf("GET %s: %v", url, err)
		return 0, ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// metric returns the value of an unlabelled metric on a replica's /metrics, or -1.
func metric(t *testing.T, addr, name string) int {
	t.Helper()
	_, page := get(t, "http://"+addr+"/metrics")
	m := regexp.MustCompile(`(?m)^` + name + ` (\d+)`).FindStringSubmatch(page)
	if m == nil {
		return -1
	}
	n, _ := strconv.Atoi(m[1])
	return n
}
