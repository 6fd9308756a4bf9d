// Command origin is the counting origin of the Docker failure suite: a tiny HTTP server, built
// static and packaged FROM scratch, that corral serve fills from.
//
//	GET  /items/{group}/{key}  "key@gen", after the configured delay; counts the call
//	POST /bump?key=K           advances K's generation and answers the new one
//	POST /delay?d=300ms        sets the fill delay of every later call
//	GET  /counts[?times]       JSON {"calls": {key: n}, "inflight": n[, "times": {key: [when…]},
//	                           "from": {key: [caller IP…]}]}: with times, when each of a key's
//	                           first 8 calls came and from which address
//	POST /reset                forgets every count (not the generations)
//
// A value carries its generation, so the test can tell a stale answer from a fresh one: the
// test bumps a key's generation before it writes the key through corral (PUT key@gen or
// DELETE), and no answer after that write returned may carry an older generation.
package main

import (
	"encoding/json"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

type origin struct {
	inflight atomic.Int64
	delay    atomic.Int64 // nanoseconds

	mu sync.Mutex
	// guards calls and gens
	calls map[string]int
	gens  map[string]int
	times map[string][]time.Time // when each call came, up to 8 per key
	from  map[string][]string    // the caller's IP of each of those calls
}

func (o *origin) item(w http.ResponseWriter, r *http.Request) {
	key := r.PathValue("key")
	o.inflight.Add(1)
	defer o.inflight.Add(-1)
	o.mu.Lock()
	o.calls[key]++
	if len(o.times[key]) < 8 {
		o.times[key] = append(o.times[key], time.Now())
		ip, _, _ := net.SplitHostPort(r.RemoteAddr)
		o.from[key] = append(o.from[key], ip)
	}
	o.mu.Unlock()
	if d := time.Duration(o.delay.Load()); d > 0 {
		select {
		case <-time.After(d):
		case <-r.Context().Done():
			return
		}
	}
	// The generation is read after the delay: a fill that started before a bump and ends
	// after it returns the newer value, never an older one than the origin holds now.
	o.mu.Lock()
	gen := o.gens[key]
	o.mu.Unlock()
	fmt.Fprintf(w, "%s@%d", key, gen)
}

func (o *origin) bump(w http.ResponseWriter, r *http.Request) {
	key := r.URL.Query().Get("key")
	o.mu.Lock()
	o.gens[key]++
	gen := o.gens[key]
	o.mu.Unlock()
	fmt.Fprint(w, gen)
}

func (o *origin) setDelay(w http.ResponseWriter, r *http.Request) {
	d, err := time.ParseDuration(r.URL.Query().Get("d"))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	o.delay.Store(int64(d))
}

func (o *origin) counts(w http.ResponseWriter, r *http.Request) {
	o.mu.Lock()
	out := struct {
		Calls    map[string]int         `json:"calls"`
		Times    map[string][]time.Time `json:"times,omitempty"`
		From     map[string][]string    `json:"from,omitempty"`
		Inflight int64                  `json:"inflight"`
	}{Calls: make(map[string]int, len(o.calls)), Inflight: o.inflight.Load()}
	for k, n := range o.calls {
		out.Calls[k] = n
	}
	if r.URL.Query().Has("times") {
		out.Times, out.From = o.times, o.from
	}
	o.mu.Unlock()
	json.NewEncoder(w).Encode(out)
}

func (o *origin) reset(w http.ResponseWriter, r *http.Request) {
	o.mu.Lock()
	o.calls = map[string]int{}
	o.times = map[string][]time.Time{}
	o.from = map[string][]string{}
	o.mu.Unlock()
}

func main() {
	addr := ":9000"
	if len(os.Args) > 1 {
		addr = os.Args[1]
	}
	o := &origin{calls: map[string]int{}, gens: map[string]int{}, times: map[string][]time.Time{}, from: map[string][]string{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /items/{group}/{key}", o.item)
	mux.HandleFunc("POST /bump", o.bump)
	mux.HandleFunc("POST /delay", o.setDelay)
	mux.HandleFunc("GET /counts", o.counts)
	mux.HandleFunc("POST /reset", o.reset)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {})
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	log.Fatal(srv.ListenAndServe())
}
