package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
)

// workerEnv marks a process started by launch as a worker.
const workerEnv = "CORRAL_BENCH_WORKER"

// request is one command to a worker: one JSON object on one line of its stdin.
type request struct {
	ID   int             `json:"id"`
	Op   string          `json:"op"`
	Args json.RawMessage `json:"args,omitempty"`
}

// response answers the request with the same ID: one JSON object on one line of its stdout.
type response struct {
	ID     int             `json:"id"`
	Err    string          `json:"err,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
}

// handler runs one op. args is the request's Args; the result is marshalled as JSON.
type handler func(ctx context.Context, w *workerState, args json.RawMessage) (any, error)

// ops are the commands a worker understands, by name. Each file adds its own in init.
var ops = map[string]handler{
	"ping": func(context.Context, *workerState, json.RawMessage) (any, error) { return os.Getpid(), nil },
	"loads": func(_ context.Context, w *workerState, args json.RawMessage) (any, error) {
		var name string
		if err := json.Unmarshal(args, &name); err != nil {
			return nil, err
		}
		return w.counter(name).Load(), nil
	},
}

// workerState is everything a worker holds between commands. Commands run one at a time, but
// the goroutines they start (servers, loaders) outlive them, hence the lock.
type workerState struct {
	// mu guards the maps below.
	mu     sync.Mutex
	loads  map[string]*atomic.Int64 // loader calls, by counter name
	values map[string]any           // systems this worker runs, by name (see state)
	closer []func()                 // run when the worker exits, last first
}

func newWorkerState() *workerState {
	return &workerState{loads: map[string]*atomic.Int64{}, values: map[string]any{}}
}

// counter returns the loader-call counter called name, creating it.
func (w *workerState) counter(name string) *atomic.Int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	c, ok := w.loads[name]
	if !ok {
		c = new(atomic.Int64)
		w.loads[name] = c
	}
	return c
}

// state returns the value stored under name, or an error naming what is missing.
func state[T any](w *workerState, name string) (T, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	v, ok := w.values[name].(T)
	if !ok {
		return v, fmt.Errorf("worker has no %T called %q", v, name)
	}
	return v, nil
}

func (w *workerState) put(name string, v any, closer func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.values[name] = v
	if closer != nil {
		w.closer = append(w.closer, closer)
	}
}

func (w *workerState) close() {
	w.mu.Lock()
	cs := w.closer
	w.closer = nil
	w.mu.Unlock()
	for i := len(cs) - 1; i >= 0; i-- {
		cs[i]()
	}
}

// serveWorker reads commands from in and answers on out, one at a time, until in ends.
func serveWorker(ctx context.Context, in io.Reader, out io.Writer) error {
	w := newWorkerState()
	defer w.close()
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	enc := json.NewEncoder(out)
	for sc.Scan() {
		var req request
		if err := json.Unmarshal(sc.Bytes(), &req); err != nil {
			return fmt.Errorf("bad request %q: %w", sc.Text(), err)
		}
		resp := response{ID: req.ID}
		if h, ok := ops[req.Op]; !ok {
			resp.Err = fmt.Sprintf("unknown op %q", req.Op)
		} else if res, err := h(ctx, w, req.Args); err != nil {
			resp.Err = err.Error()
		} else if resp.Result, err = json.Marshal(res); err != nil {
			resp.Err = err.Error()
		}
		if err := enc.Encode(resp); err != nil {
			return err
		}
	}
	return sc.Err()
}
