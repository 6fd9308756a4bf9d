package faults

import (
	"fmt"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// rounds reads on one side of a fault: every 250 ms, a GET of a watched key (warm before the
// fault) and a GET of a key nobody has read yet — whose owner may be on either side, so that
// its first read needs a fill that no copy can spare — through the side's nodes in turn. It
// keeps its own latencies and failures, so that each side of a fault is judged on its own.
type rounds struct {
	d     *driver
	name  string
	on    []*node
	watch string

	mu sync.Mutex
	// guards reads
	reads []roundRead

	stop, done chan struct{}
}

type roundRead struct {
	key, node, source string
	took              time.Duration
	err               string // "" for a 200 with the key's value
}

// startRounds starts reading watch and new keys through on, for at most 400 rounds (100 s)
// or until halt. name names the side, and the new keys.
func startRounds(d *driver, name string, on []*node, watch string) *rounds {
	r := &rounds{d: d, name: name, on: on, watch: watch, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(r.done)
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for i := range 400 {
			select {
			case <-r.stop:
				return
			case <-t.C:
			}
			n := on[i%len(on)]
			r.get(n, watch)
			r.get(n, fmt.Sprintf("r-%s-%s-%d", d.c.id, name, i))
		}
	}()
	return r
}

func (r *rounds) get(n *node, key string) {
	start := time.Now()
	code, body, src, err := do(r.d.c.addrOf(n), "GET", "/v1/groups/g/keys/"+key, "", r.d.deadline)
	rd := roundRead{key: key, node: n.name, source: src, took: time.Since(start)}
	if _, ok := genOf(key, body); err != nil || code != 200 || !ok {
		rd.err = fmt.Sprintf("%d %v %q", code, err, strings.TrimSpace(body))
	}
	r.mu.Lock()
	r.reads = append(r.reads, rd)
	r.mu.Unlock()
}

// roundStats is what a side's reads came to.
type roundStats struct {
	reads, failed int
	p99, max      time.Duration
	notes         []string // the failures, and the slowest reads
}

// halt stops the reads and returns what they came to.
func (r *rounds) halt() roundStats {
	close(r.stop)
	<-r.done
	r.mu.Lock()
	defer r.mu.Unlock()
	s := roundStats{reads: len(r.reads)}
	reads := slices.Clone(r.reads)
	slices.SortFunc(reads, func(a, b roundRead) int { return int(a.took - b.took) })
	n := len(reads)
	for i, rd := range reads {
		if rd.err != "" {
			s.failed++
			s.notes = append(s.notes, fmt.Sprintf("failed: GET %s on %s after %v: %s", rd.key, rd.node, rd.took.Round(time.Millisecond), rd.err))
		} else if i >= n-3 {
			s.notes = append(s.notes, fmt.Sprintf("slow: GET %s on %s took %v (%s)", rd.key, rd.node, rd.took.Round(time.Millisecond), rd.source))
		}
	}
	if n > 0 {
		s.p99, s.max = reads[min(n-1, n*99/100)].took, reads[n-1].took // as the driver's (take)
	}
	return s
}

// silentPeerTimeout returns corral serve's default --silent-peer-timeout, as the image's
// binary says it.
func silentPeerTimeout(tb testing.TB) time.Duration {
	tb.Helper()
	out, _ := exec.Command("docker", "run", "--rm", image, "serve", "-h").CombinedOutput()
	m := regexp.MustCompile(`(?m)^  -silent-peer-timeout .*\n.*\(default ([^)]+)\)$`).FindSubmatch(out)
	if m == nil {
		tb.Fatalf("no default for --silent-peer-timeout in corral serve -h:\n%s", out)
	}
	d, err := time.ParseDuration(string(m[1]))
	if err != nil {
		tb.Fatal(err)
	}
	return d
}
