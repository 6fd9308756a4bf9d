package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Processes of the HTTP and Redis protocol rows: corral serve nodes, nginx, Varnish and an
// origin, each on free loopback ports. Each is started in a process group of its own, killed
// with it, and dies with the driver (nginx's and Varnish's workers with their group, when
// stop runs; the kernel's parent-death signal for the rest).

// ErrNoFront is returned when a program the HTTP or Redis protocol rows need is missing.
var ErrNoFront = errors.New("not installed (Debian: apt-get install -y varnish nginx wrk redis-tools; `make bench-compare` does it)")

// proc is a server process this program started.
type proc struct {
	name string
	cmd  *exec.Cmd
	out  *strings.Builder // its stdout and stderr, for an error message
	done chan struct{}
	once sync.Once
}

// startProc starts bin with args in a process group of its own.
func startProc(name, bin string, args ...string) (*proc, error) {
	path, err := exec.LookPath(bin)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", bin, ErrNoFront)
	}
	cmd := exec.Command(path, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	p := &proc{name: name, cmd: cmd, out: &strings.Builder{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = &lockedWriter{w: p.out}, &lockedWriter{w: p.out}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() { cmd.Wait(); close(p.done) }()
	return p, nil
}

// Pid is the process's id.
func (p *proc) Pid() int { return p.cmd.Process.Pid }

// stop ends the process's group: SIGTERM, then SIGKILL after 5 s. Safe to call twice.
func (p *proc) stop() {
	p.once.Do(func() {
		syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(5 * time.Second):
			syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
			<-p.done
		}
		syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL) // workers that outlived their master
	})
}

// output is what the process wrote, for an error message.
func (p *proc) output() string {
	return strings.TrimSpace(p.out.String())
}

type lockedWriter struct {
	mu sync.Mutex
	w  *strings.Builder
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// waitHTTP waits until url answers 200, the process exits or 20 s pass.
func waitHTTP(ctx context.Context, p *proc, url string) error {
	deadline := time.Now().Add(20 * time.Second)
	c := &http.Client{Timeout: time.Second}
	for {
		resp, err := c.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-p.done:
			return fmt.Errorf("%s exited: %s", p.name, p.output())
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: %s did not answer 200 within 20 s: %v", p.name, url, err)
		}
	}
}

// freePorts returns n TCP ports of 127.0.0.1 that were free a moment ago.
func freePorts(n int) ([]int, error) {
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// origin is the HTTP origin behind corral, nginx and Varnish: every path answers 200 with
// size bytes, cacheable for an hour. It runs in the driver: it is asked only while caches
// fill, never while a row measures hits.
type origin struct {
	srv  *http.Server
	addr string
}

func startOrigin(size int) (*origin, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	body := payload(size)
	o := &origin{addr: l.Addr().String(), srv: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("Cache-Control", "max-age=3600")
		w.Write(body)
	})}}
	go o.srv.Serve(l)
	return o, nil
}

func (o *origin) stop() { o.srv.Close() }

// buildCorral builds cmd/corral, as `make image` does, into dir.
func buildCorral(ctx context.Context, dir string) (string, error) {
	root, err := filepath.Abs("../..")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "corral")
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", bin, "./cmd/corral")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build corral in %s: %w: %s", root, err, out)
	}
	return bin, nil
}

// corralServe is one `corral serve` process.
type corralServe struct {
	*proc
	name       string
	http, resp string // "127.0.0.1:port"; resp "" = off
	gossip     string
	args       []string // the command line, for RESULTS.md
}

// startCorralServe starts a node of bin called name, filling from o, joined to seed ("" = a
// cluster of its own), with the Redis protocol on when withRESP.
func startCorralServe(ctx context.Context, bin, name string, o *origin, seed string, withRESP bool) (*corralServe, error) {
	ports, err := freePorts(4)
	if err != nil {
		return nil, err
	}
	c := &corralServe{name: name, http: fmt.Sprintf("127.0.0.1:%d", ports[0]), gossip: fmt.Sprintf("127.0.0.1:%d", ports[2])}
	c.args = []string{"serve", "--name", name, "--bind", "127.0.0.1",
		"--http-port", strconv.Itoa(ports[0]), "--gossip-port", strconv.Itoa(ports[2]), "--peer-port", strconv.Itoa(ports[3]),
		"--origin", "http://" + o.addr + "/items/{key}", "--ttl", "1h", "--max-bytes", strconv.Itoa(256 << 20),
		"--log-level", "warn"}
	if withRESP {
		c.resp = fmt.Sprintf("127.0.0.1:%d", ports[1])
		c.args = append(c.args, "--resp-port", strconv.Itoa(ports[1]))
	}
	if seed != "" {
		c.args = append(c.args, "--join", seed)
	}
	if c.proc, err = startProc("corral "+name, bin, c.args...); err != nil {
		return nil, err
	}
	if err := waitHTTP(ctx, c.proc, "http://"+c.http+"/readyz"); err != nil {
		c.stop()
		return nil, err
	}
	return c, nil
}

// nginxCache is nginx 1.22 as a caching proxy of o: proxy_cache with proxy_cache_lock (its
// stampede protection), keep-alive to the origin, as many workers as cores.
type nginxCache struct {
	*proc
	addr string
	conf string
}

func startNginx(ctx context.Context, dir string, o *origin) (*nginxCache, error) {
	ports, err := freePorts(1)
	if err != nil {
		return nil, err
	}
	n := &nginxCache{addr: fmt.Sprintf("127.0.0.1:%d", ports[0])}
	cache := filepath.Join(dir, "nginx-cache")
	if err := os.MkdirAll(cache, 0o777); err != nil {
		return nil, err
	}
	os.Chmod(dir, 0o755)   // nginx's workers run as an unprivileged user when started as root
	os.Chmod(cache, 0o777) // and write the cache
	n.conf = fmt.Sprintf(`worker_processes auto;
daemon off;
pid %[1]s/nginx.pid;
error_log stderr warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path %[1]s/nginx-tmp;
  proxy_temp_path %[1]s/nginx-tmp;
  proxy_cache_path %[2]s levels=1:2 keys_zone=corral_bench:32m max_size=1g inactive=1h use_temp_path=off;
  upstream origin { server %[3]s; keepalive 64; }
  server {
    listen %[4]s;
    location / {
      proxy_pass http://origin;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_cache corral_bench;
      proxy_cache_lock on;
      proxy_cache_valid 200 1h;
    }
  }
}
`, dir, cache, o.addr, n.addr)
	confPath := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(confPath, []byte(n.conf), 0o644); err != nil {
		return nil, err
	}
	if n.proc, err = startProc("nginx", "nginx", "-c", confPath, "-p", dir, "-e", "stderr"); err != nil {
		return nil, err
	}
	if err := waitHTTP(ctx, n.proc, "http://"+n.addr+"/items/ready"); err != nil {
		n.stop()
		return nil, err
	}
	return n, nil
}

// varnishCache is Varnish 7.1 in front of o with its built-in VCL and malloc storage.
type varnishCache struct {
	*proc
	addr string
	args []string
}

func startVarnish(ctx context.Context, dir string, o *origin) (*varnishCache, error) {
	ports, err := freePorts(1)
	if err != nil {
		return nil, err
	}
	v := &varnishCache{addr: fmt.Sprintf("127.0.0.1:%d", ports[0])}
	work := filepath.Join(dir, "varnish")
	v.args = []string{"-F", "-a", v.addr, "-b", o.addr, "-s", "malloc,1g", "-n", work, "-j", "none"}
	if v.proc, err = startProc("varnish", "varnishd", v.args...); err != nil {
		return nil, err
	}
	if err := waitHTTP(ctx, v.proc, "http://"+v.addr+"/items/ready"); err != nil {
		v.stop()
		return nil, err
	}
	return v, nil
}

// cpu is the CPU time the process and every process of its group have used so far (nginx's
// and Varnish's workers are in their master's group).
func (p *proc) cpu() time.Duration {
	pgid := p.Pid()
	var total time.Duration
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		st := string(b)
		f := strings.Fields(st[strings.LastIndexByte(st, ')')+1:])
		if len(f) < 13 {
			continue
		}
		if pg, _ := strconv.Atoi(f[2]); pg == pgid {
			total += processCPU(pid)
		}
	}
	return total
}
