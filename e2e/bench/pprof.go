package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"runtime/trace"
)

// Worker ops that profile the worker's CPU, and trace its goroutines, for finding where a
// row's time goes (bench -profile DIR; go tool pprof and go tool trace read the files).

func init() {
	recorder("pprof", pprof.StartCPUProfile, pprof.StopCPUProfile)
	recorder("trace", trace.Start, trace.Stop)
}

// recorder registers the ops NAME.start (a file path: start recording into it) and
// NAME.stop.
func recorder(name string, start func(io.Writer) error, stop func()) {
	key := name + ".file"
	ops[name+".start"] = func(_ context.Context, w *workerState, raw json.RawMessage) (any, error) {
		var path string
		if err := json.Unmarshal(raw, &path); err != nil {
			return nil, err
		}
		f, err := os.Create(path)
		if err != nil {
			return nil, err
		}
		if err := start(f); err != nil {
			f.Close()
			return nil, err
		}
		w.put(key, f, nil)
		return nil, nil
	}
	ops[name+".stop"] = func(_ context.Context, w *workerState, _ json.RawMessage) (any, error) {
		f, err := state[*os.File](w, key)
		if err != nil {
			return nil, fmt.Errorf("no %s running", name)
		}
		stop()
		w.put(key, nil, nil)
		return nil, f.Close()
	}
}
