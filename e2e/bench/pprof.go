package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"runtime/pprof"
	"runtime/trace"
)

// Worker ops that profile the worker's CPU, and trace its goroutines, for finding where a
// row's time goes (bench -profile DIR; go tool pprof and go tool trace read the files).

func init() {
	ops["pprof.start"] = func(_ context.Context, w *workerState, raw json.RawMessage) (any, error) {
		var path string
		if err := json.Unmarshal(raw, &path); err != nil {
			return nil, err
		}
		f, err := os.Create(path)
		if err != nil {
			return nil, err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return nil, err
		}
		w.put("pprof.file", f, nil)
		return nil, nil
	}
	ops["pprof.stop"] = func(_ context.Context, w *workerState, _ json.RawMessage) (any, error) {
		f, err := state[*os.File](w, "pprof.file")
		if err != nil {
			return nil, errors.New("no profile running")
		}
		pprof.StopCPUProfile()
		w.put("pprof.file", nil, nil)
		return nil, f.Close()
	}
	ops["trace.start"] = func(_ context.Context, w *workerState, raw json.RawMessage) (any, error) {
		var path string
		if err := json.Unmarshal(raw, &path); err != nil {
			return nil, err
		}
		f, err := os.Create(path)
		if err != nil {
			return nil, err
		}
		if err := trace.Start(f); err != nil {
			f.Close()
			return nil, err
		}
		w.put("trace.file", f, nil)
		return nil, nil
	}
	ops["trace.stop"] = func(_ context.Context, w *workerState, _ json.RawMessage) (any, error) {
		f, err := state[*os.File](w, "trace.file")
		if err != nil {
			return nil, errors.New("no trace running")
		}
		trace.Stop()
		w.put("trace.file", nil, nil)
		return nil, f.Close()
	}
}
