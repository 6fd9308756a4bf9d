// Command fakenode serves the debug page over a state that a test or a person scripts, with
// no cluster behind it. The browser test in e2e drives it (e2e is another module, so it
// cannot import the internal debugui package and runs this program instead), and
//
//	go run ./cmd/corral/internal/debugui/fakenode -addr 127.0.0.1:8099 -animate
//
// shows the page with moving counters while working on it.
//
// Once it serves, it prints "listening on http://HOST:PORT" on stdout. Besides the page under
// /debug/corral it answers
//
//	PUT /fake/state   a debugui.State as JSON: what every poll returns from now on (204)
//
// It runs until SIGINT or SIGTERM.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/corralcache/corral/cmd/corral/internal/debugui"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "fakenode:", err)
		os.Exit(1)
	}
}

// fake is the scripted node.
type fake struct {
	mu    sync.Mutex // guards state
	state debugui.State
}

func (f *fake) get() debugui.State {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.state
}

func (f *fake) put(w http.ResponseWriter, r *http.Request) {
	var st debugui.State
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&st); err != nil {
		http.Error(w, "decode state: "+err.Error(), http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	f.state = st
	f.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// animate moves the counters four times a second, as a busy node's would.
func (f *fake) animate(ctx context.Context, rnd *rand.Rand) {
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		f.mu.Lock()
		for i := range f.state.Groups {
			g := &f.state.Groups[i]
			gets := uint64(rnd.IntN(400))
			g.Gets += gets
			g.Fills += gets / 50
			g.Coalesced += gets / 20
			g.NearHits += gets / 4
			g.StaleServed += uint64(rnd.IntN(3))
			if rnd.IntN(20) == 0 {
				g.FillErrors++
			}
			g.Entries += rnd.IntN(5)
			g.Bytes += uint64(rnd.IntN(5000))
		}
		f.mu.Unlock()
	}
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("fakenode", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:0", "listen address (port 0 = any free port)")
	anim := fs.Bool("animate", false, "move the counters by themselves")
	if err := fs.Parse(args); err != nil {
		return err
	}

	f := &fake{state: sample(time.Now())}
	ui := debugui.Handler("/debug/corral", f.get)
	mux := http.NewServeMux()
	mux.Handle("/debug/corral", ui)
	mux.Handle("/debug/corral/", ui)
	mux.HandleFunc("PUT /fake/state", f.put)

	l, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	fmt.Fprintf(stdout, "listening on http://%s\n", l.Addr())

	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if *anim {
		wg.Go(func() { f.animate(ctx, rand.New(rand.NewPCG(1, 2))) })
	}
	wg.Go(func() {
		<-ctx.Done()
		shut, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		srv.Shutdown(shut)
	})
	if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
		cancel()
		return err
	}
	return nil
}

// sample is a three-member cluster with two groups, some of whose keys are hostile.
func sample(now time.Time) debugui.State {
	return debugui.State{
		Self: "corral-0", Epoch: 12, Ready: true, StartedAt: now.Add(-3*time.Hour - 17*time.Minute),
		Members: []debugui.Member{
			{Name: "corral-0", GossipAddr: "10.1.0.4:7946", PeerAddr: "10.1.0.4:7947", Share: 0.34, Self: true, Status: "alive"},
			{Name: "corral-1", GossipAddr: "10.1.0.5:7946", PeerAddr: "10.1.0.5:7947", Share: 0.33, Status: "alive"},
			{Name: "corral-2", GossipAddr: "10.1.0.6:7946", PeerAddr: "10.1.0.6:7947", Share: 0.33, Status: "suspect"},
		},
		Groups: []debugui.Group{
			{Name: "demo", Gets: 48210, Fills: 310, Coalesced: 2212, StaleServed: 14, NearHits: 9120,
				FillErrors: 2, Entries: 1840, Bytes: 3 << 20,
				HotKeys: []string{"k1", "k7", "<script>alert('key')</script>", "k12", "tab\there"}},
			{Name: "users", Gets: 1200, Fills: 40, Coalesced: 12, Entries: 40, Bytes: 81920,
				HotKeys: []string{"user:42", "user:7"}},
		},
	}
}
