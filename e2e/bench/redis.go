package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ErrNoRedis is returned by startRedis when redis-server is not installed.
var ErrNoRedis = errors.New("redis-server is not installed (Debian: apt-get install -y redis-server; `make bench-compare` installs it)")

// redisServer is a redis-server process this program started on a loopback port.
type redisServer struct {
	Addr string // "127.0.0.1:port"
	cmd  *exec.Cmd
	dir  string
	done chan struct{}
}

// startRedis starts redis-server on a free port of 127.0.0.1, with persistence off, and
// waits until it answers PING. Stop it with stop.
func startRedis(ctx context.Context) (*redisServer, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, ErrNoRedis
	}
	var lastErr error
	for range 3 { // the free port may be taken between picking it and redis binding it
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		r, err := runRedis(ctx, bin, port)
		if err == nil {
			return r, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

// redisServerArgs are redis-server's flags but for its port and directory: persistence off,
// as a cache runs it.
var redisServerArgs = []string{"--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--daemonize", "no",
	"--protected-mode", "yes", "--loglevel", "warning", "--maxclients", "4096"}

func runRedis(ctx context.Context, bin string, port int) (*redisServer, error) {
	dir, err := os.MkdirTemp("", "corral-bench-redis-")
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, append([]string{"--port", strconv.Itoa(port), "--dir", dir}, redisServerArgs...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start redis-server: %w", err)
	}
	r := &redisServer{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), cmd: cmd, dir: dir, done: make(chan struct{})}
	go func() { cmd.Wait(); close(r.done) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if err := redisPing(r.Addr); err == nil {
			return r, nil
		}
		select {
		case <-r.done:
			os.RemoveAll(dir)
			return nil, fmt.Errorf("redis-server on port %d exited: %s", port, strings.TrimSpace(stderr.String()))
		case <-ctx.Done():
			r.stop()
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			r.stop()
			return nil, fmt.Errorf("redis-server on port %d did not answer PING within 10s", port)
		}
	}
}

// Pid returns the server's process id.
func (r *redisServer) Pid() int { return r.cmd.Process.Pid }

// stop ends the server (SIGTERM, then SIGKILL after 5 s) and removes its directory. It is safe
// to call twice.
func (r *redisServer) stop() {
	r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.done:
	case <-time.After(5 * time.Second):
		r.cmd.Process.Kill()
		<-r.done
	}
	os.RemoveAll(r.dir)
}

// redisPing sends PING in the inline protocol and expects +PONG: enough to know the server is
// up without a client library.
func redisPing(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if strings.TrimSpace(line) != "+PONG" {
		return fmt.Errorf("PING answered %q", line)
	}
	return nil
}

// freePort returns a TCP port of 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
