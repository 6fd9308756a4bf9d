package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// worker is the driver's handle on one worker process.
type worker struct {
	name string
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  *bufio.Scanner

	mu     sync.Mutex // guards one call at a time: a worker answers in order
	nextID int

	exited chan struct{} // closed when the process is gone
	dead   atomic.Bool   // set by kill
}

// launch starts this binary again as a worker called name. The worker's stderr is the
// driver's, each line prefixed with name.
func launch(name string) (*worker, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find own binary: %w", err)
	}
	cmd := exec.Command(exe, "-test.run=^$") // the flag only matters when exe is a test binary
	cmd.Env = append(os.Environ(), workerEnv+"="+name)
	// A worker must not outlive the driver: it exits when stdin closes, and the kernel kills
	// it if the driver dies first.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Stderr = &prefixWriter{prefix: name + ": ", w: os.Stderr}
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start worker %s: %w", name, err)
	}
	w := &worker{name: name, cmd: cmd, in: in, out: bufio.NewScanner(out), exited: make(chan struct{})}
	w.out.Buffer(make([]byte, 1<<20), 64<<20)
	go func() { cmd.Wait(); close(w.exited) }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := w.call(ctx, "ping", nil, nil); err != nil {
		w.stop()
		return nil, fmt.Errorf("worker %s: %w", name, err)
	}
	return w, nil
}

// Pid returns the worker's process id.
func (w *worker) Pid() int { return w.cmd.Process.Pid }

// call sends op with args and decodes the answer into result (if not nil). When ctx ends
// first, the worker is killed: its answer would arrive out of turn.
func (w *worker) call(ctx context.Context, op string, args, result any) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.dead.Load() {
		return fmt.Errorf("worker %s was killed", w.name)
	}
	w.nextID++
	req := request{ID: w.nextID, Op: op}
	if args != nil {
		b, err := json.Marshal(args)
		if err != nil {
			return err
		}
		req.Args = b
	}
	line, err := json.Marshal(req)
	if err != nil {
		return err
	}
	if _, err := w.in.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("worker %s: %s: %w", w.name, op, err)
	}
	type answer struct {
		resp response
		err  error
	}
	got := make(chan answer, 1)
	go func() {
		var a answer
		if !w.out.Scan() {
			a.err = errors.Join(errors.New("worker exited"), w.out.Err())
		} else {
			a.err = json.Unmarshal(w.out.Bytes(), &a.resp)
		}
		got <- a
	}()
	select {
	case a := <-got:
		switch {
		case a.err != nil:
			return fmt.Errorf("worker %s: %s: %w", w.name, op, a.err)
		case a.resp.ID != req.ID:
			return fmt.Errorf("worker %s: %s: answer %d to request %d", w.name, op, a.resp.ID, req.ID)
		case a.resp.Err != "":
			return fmt.Errorf("worker %s: %s: %s", w.name, op, a.resp.Err)
		case result != nil:
			return json.Unmarshal(a.resp.Result, result)
		}
		return nil
	case <-ctx.Done():
		w.killLocked()
		<-got
		return fmt.Errorf("worker %s: %s: %w", w.name, op, ctx.Err())
	}
}

// kill ends the worker at once with SIGKILL: a crash, as far as its peers can tell.
func (w *worker) kill() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.killLocked()
}

func (w *worker) killLocked() {
	w.dead.Store(true)
	w.cmd.Process.Kill()
	<-w.exited
}

// stop closes the worker's stdin, so it exits, and kills it if it has not within 5 s.
func (w *worker) stop() {
	w.in.Close()
	select {
	case <-w.exited:
	case <-time.After(5 * time.Second):
		w.kill()
	}
}

// workerRaces counts the data races that workers built with -race reported on stderr, so the
// tests, whose workers are the test binary, fail on a race in a worker too.
var workerRaces atomic.Int64

// prefixWriter writes each line with a prefix; it is used for one worker's stderr, which
// exec.Cmd copies from one goroutine.
type prefixWriter struct {
	prefix  string
	w       io.Writer
	partial string
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	s := p.partial + string(b)
	lines := strings.SplitAfter(s, "\n")
	p.partial = lines[len(lines)-1]
	for _, l := range lines[:len(lines)-1] {
		if strings.Contains(l, "WARNING: DATA RACE") {
			workerRaces.Add(1)
		}
		fmt.Fprint(p.w, p.prefix+l)
	}
	return len(b), nil
}
