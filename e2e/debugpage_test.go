package e2e

// The debug page in a real browser: Debian's chromium, headless, driven by chromedp.
//
// TestDebugPageFake runs the page over a scripted state (the fakenode program beside the
// debugui package: that package is internal to cmd/corral, so this module cannot import it
// and runs it as a process instead). TestDebugPageLive opens the page of a real three-node
// `corral serve` cluster and watches its counters move under traffic.
//
// Screenshots land in testdata/debugpage/out/ (ignored by git) for a person to look at.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
)

// debugStepTimeout bounds every single wait on the browser or a process.
const debugStepTimeout = 30 * time.Second

// chromiumPath finds Debian's chromium. Without it the browser tests skip, except in CI
// (CI set), which installs it: there a missing browser is a failure, not a silent pass.
func chromiumPath(tb testing.TB) string {
	tb.Helper()
	for _, p := range []string{"/usr/bin/chromium", "chromium", "chromium-browser"} {
		if path, err := exec.LookPath(p); err == nil {
			return path
		}
	}
	const msg = "chromium is not installed (apt-get install -y chromium)"
	if os.Getenv("CI") != "" {
		tb.Fatal(msg + "; CI must install it")
	}
	tb.Skip(msg + "; skipping the browser test")
	return ""
}

// debugBrowser is one headless chromium tab, closed at cleanup.
type debugBrowser struct {
	tb  testing.TB
	ctx context.Context // the tab; each step derives its own timeout from it
	out *syncBuffer     // chromium's own output, logged if the test fails
}

func newDebugBrowser(tb testing.TB) *debugBrowser {
	tb.Helper()
	exe := chromiumPath(tb)
	b := &debugBrowser{tb: tb, out: &syncBuffer{}}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe),
		chromedp.NoSandbox, // the tests run as root, where chromium's sandbox refuses to start
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.WindowSize(1280, 1000),
		chromedp.WSURLReadTimeout(debugStepTimeout), // bounds the browser's start
		chromedp.CombinedOutput(b.out),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx, chromedp.WithLogf(tb.Logf))
	tb.Cleanup(func() {
		chromedp.Cancel(ctx) // closes the browser and waits for it
		cancelTab()
		cancelAlloc()
		if tb.Failed() {
			tb.Logf("chromium output (without its D-Bus complaints):\n%s", chromiumNoise(b.out.String()))
		}
	})
	// The first Run starts the browser and binds its life to ctx, so it takes no timeout of
	// its own (WSURLReadTimeout bounds it); every later step does.
	if err := chromedp.Do(ctx); err != nil {
		tb.Fatalf("starting chromium: %v", err)
	}
	b.ctx = ctx
	b.do("set the viewport", chromedp.EmulateViewport(1280, 1000))
	return b
}

// chromiumNoise drops the lines chromium prints on every start in a container (no D-Bus, and
// Debian's wrapper script tripping over its own memory check), which would bury the rest.
func chromiumNoise(out string) string {
	var keep []string
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "dbus/") || strings.Contains(l, "unexpected operator") {
			continue
		}
		keep = append(keep, l)
	}
	return strings.Join(keep, "\n")
}

func (b *debugBrowser) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.tb.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, debugStepTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.tb.Fatalf("%s: %v", what, err)
	}
}

// debugEval returns the value of a JavaScript expression in the page.
func debugEval[T any](b *debugBrowser, expr string) T {
	b.tb.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, debugStepTimeout)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		b.tb.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// waitUntil polls a JavaScript predicate in the page until it is true, for at most within.
func (b *debugBrowser) waitUntil(what string, within time.Duration, pred string) {
	b.tb.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, within)
	defer cancel()
	_, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](pred,
		chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(within)))
	if err != nil {
		b.tb.Fatalf("waiting %v for %s (%s): %v\npage says: %s", within, what, pred, err, b.bodyText())
	}
}

// bodyText is what the page shows, for failure messages; "" if the page cannot say.
func (b *debugBrowser) bodyText() string {
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	s, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
	return s
}

// screenshot saves the whole page as a PNG under testdata/debugpage/out/.
func (b *debugBrowser) screenshot(name string) string {
	b.tb.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, debugStepTimeout)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // 100 = PNG
	if err != nil {
		b.tb.Fatalf("screenshot %s: %v", name, err)
	}
	dir := filepath.Join("testdata", "debugpage", "out")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.tb.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.tb.Fatal(err)
	}
	b.tb.Logf("screenshot: %s", path)
	return path
}

// Selectors and expressions on the page's structure (see debugui/page.html and debug.js).
const (
	jsMemberRows = `document.querySelectorAll('#members tbody tr').length`
	jsRingArcs   = `document.querySelectorAll('#ring path.arc').length`
)

// jsCounter is the total shown for one counter of one group, as a number (NaN if absent).
func jsCounter(group, field string) string {
	return fmt.Sprintf(`(() => {
		const rows = [...document.querySelectorAll('#groups tbody tr')].filter((r) => r.dataset.group === %q);
		const t = rows.length ? rows[0].querySelector('td.%s .total') : null;
		return t ? Number(t.textContent.replaceAll(',', '')) : NaN;
	})()`, group, field)
}

// jsRate is the rate text shown under one counter of one group.
func jsRate(group, field string) string {
	return fmt.Sprintf(`(() => {
		const rows = [...document.querySelectorAll('#groups tbody tr')].filter((r) => r.dataset.group === %q);
		const t = rows.length ? rows[0].querySelector('td.%s .rate') : null;
		return t ? t.textContent : '';
	})()`, group, field)
}

// The JSON of debugui.State, written out again here because this module cannot import it.
type (
	fakeState struct {
		Self      string        `json:"self"`
		Epoch     uint64        `json:"epoch"`
		Ready     bool          `json:"ready"`
		StartedAt time.Time     `json:"started_at"`
		Members   []fakeMember  `json:"members"`
		Groups    []fakeGroup   `json:"groups"`
		Refusals  []fakeRefusal `json:"join_refusals,omitempty"`
	}
	fakeRefusal struct {
		Seed      string    `json:"seed"`
		Reason    string    `json:"reason"`
		Diagnosis string    `json:"diagnosis"`
		At        time.Time `json:"at"`
	}
	fakeMember struct {
		Name       string  `json:"name"`
		GossipAddr string  `json:"gossip_addr"`
		PeerAddr   string  `json:"peer_addr"`
		Share      float64 `json:"share"`
		Self       bool    `json:"self"`
		Status     string  `json:"status"`
	}
	fakeGroup struct {
		Name        string   `json:"name"`
		Gets        uint64   `json:"gets"`
		Fills       uint64   `json:"fills"`
		Coalesced   uint64   `json:"coalesced"`
		StaleServed uint64   `json:"stale_served"`
		NearHits    uint64   `json:"near_hits"`
		FillErrors  uint64   `json:"fill_errors"`
		Entries     int      `json:"entries"`
		Bytes       uint64   `json:"bytes"`
		HotKeys     []string `json:"hot_keys"`
	}
)

// fakeDebugNode is a running fakenode.
type fakeDebugNode struct {
	url  string // "http://127.0.0.1:port"
	cmd  *exec.Cmd
	done chan struct{}
}

// startFakeDebugNode builds and starts fakenode (with -race, like the corral binary) and
// waits for its address.
func startFakeDebugNode(tb testing.TB) *fakeDebugNode {
	tb.Helper()
	bin := filepath.Join(tb.TempDir(), "fakenode")
	// A build is bounded more loosely than a browser step: on a cold cache it compiles the
	// standard library with -race.
	bctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	build := exec.CommandContext(bctx, "go", "build", "-race", "-o", bin, "./cmd/corral/internal/debugui/fakenode")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		tb.Fatalf("building fakenode: %v\n%s", err, out)
	}

	n := &fakeDebugNode{cmd: exec.Command(bin, "-addr", "127.0.0.1:0"), done: make(chan struct{})}
	stdout, err := n.cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	stderr := &syncBuffer{}
	n.cmd.Stderr = stderr
	n.cmd.Env = append(os.Environ(), "GORACE=halt_on_error=1")
	if err := n.cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	first := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			first <- sc.Text()
		}
		close(first)
		for sc.Scan() { // drain, so the process never blocks on a full pipe
		}
		n.cmd.Wait()
		close(n.done)
	}()
	tb.Cleanup(func() {
		n.cmd.Process.Kill()
		<-n.done
		if tb.Failed() {
			tb.Logf("fakenode stderr:\n%s", stderr.String())
		}
	})
	select {
	case line := <-first:
		u, ok := strings.CutPrefix(line, "listening on ")
		if !ok {
			tb.Fatalf("fakenode said %q, want \"listening on …\"; stderr:\n%s", line, stderr.String())
		}
		n.url = u
	case <-time.After(debugStepTimeout):
		tb.Fatalf("fakenode did not say where it listens within %v", debugStepTimeout)
	}
	return n
}

// set makes st what every poll returns from now on.
func (n *fakeDebugNode) set(tb testing.TB, st fakeState) {
	tb.Helper()
	body, err := json.Marshal(st)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), debugStepTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "PUT", n.url+"/fake/state", bytes.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatalf("PUT /fake/state: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		tb.Fatalf("PUT /fake/state: %s", resp.Status)
	}
}

// kill makes the node unreachable, as a dead port-forward would.
func (n *fakeDebugNode) kill(tb testing.TB) {
	tb.Helper()
	n.cmd.Process.Kill()
	select {
	case <-n.done:
	case <-time.After(debugStepTimeout):
		tb.Fatal("fakenode did not exit after SIGKILL")
	}
}

// Hostile keys: each would run script, or hide what it is, if the page wrote it as markup.
var hostileKeys = []string{
	`<script>window.__corralPwned = 'script'</script>`,
	`<img src=x onerror="window.__corralPwned = 'img'">`,
	"ctl\x01\x1b[31mred\u202eevil",
}

func TestDebugPageFake(t *testing.T) {
	b := newDebugBrowser(t)
	node := startFakeDebugNode(t)

	st := fakeState{
		Self: "corral-0", Epoch: 14553754507815359871, Ready: true, StartedAt: time.Now().Add(-3*time.Hour - 17*time.Minute),
		Members: []fakeMember{
			{Name: "corral-0", GossipAddr: "10.1.0.4:7946", PeerAddr: "10.1.0.4:7947", Share: 0.40, Self: true, Status: "alive"},
			{Name: "corral-1", GossipAddr: "10.1.0.5:7946", PeerAddr: "10.1.0.5:7947", Share: 0.35, Status: "alive"},
			{Name: "corral-2<b>", GossipAddr: "10.1.0.6:7946", PeerAddr: "10.1.0.6:7947", Share: 0.25, Status: "suspect"},
		},
		Groups: []fakeGroup{
			{Name: "demo", Gets: 48210, Fills: 310, Coalesced: 2212, StaleServed: 14, NearHits: 9120,
				FillErrors: 2, Entries: 1840, Bytes: 3 << 20,
				HotKeys: append([]string{"k1", "k7"}, append(hostileKeys, "k12", strings.Repeat("long/", 60))...)},
			{Name: "users", Gets: 1200, Fills: 40, Coalesced: 12, Entries: 40, Bytes: 81920,
				HotKeys: []string{"user:42", "user:7"}},
		},
	}
	node.set(t, st)

	b.do("open the page", chromedp.Navigate(node.url+"/debug/corral"))
	b.waitUntil("3 members in the table", 10*time.Second, jsMemberRows+` === 3`)
	if n := debugEval[int](b, jsRingArcs); n != 3 {
		t.Errorf("the ring has %d arcs, want one per member (3)", n)
	}
	// An epoch past 2^53 is shown to the last digit, not rounded as a JS number would be.
	if got := debugEval[string](b, `document.getElementById('epoch').textContent`); got != "14553754507815359871" {
		t.Errorf("epoch shows %q, want 14553754507815359871", got)
	}
	// The arcs' angles are the shares: 40% of the circle for corral-0.
	if names := debugEval[[]string](b, `[...document.querySelectorAll('#ring path.arc')].map((p) => p.dataset.member)`); strings.Join(names, ",") != "corral-0,corral-1,corral-2<b>" {
		t.Errorf("ring arcs are for %q", names)
	}
	if got := debugEval[string](b, `document.querySelector('#members tbody tr:nth-child(3) .status').textContent`); got != "suspect" {
		t.Errorf("corral-2's status shows %q, want suspect", got)
	}
	if got := debugEval[float64](b, jsCounter("demo", "gets")); got != 48210 {
		t.Fatalf("demo gets shows %v, want 48210", got)
	}

	// Every hostile name and key is shown as the text it is, and none of them ran or made an
	// element.
	for _, k := range hostileKeys {
		js, _ := json.Marshal(k)
		shown := debugEval[bool](b, fmt.Sprintf(`[...document.querySelectorAll('#hotkeys li')].some((li) => li.title === %s)`, js))
		if !shown {
			t.Errorf("hot key %q is not in the list", k)
		}
	}
	if got := debugEval[string](b, `document.querySelector('#hotkeys li:nth-child(3)').textContent`); got != hostileKeys[0] {
		t.Errorf("the <script> key shows as %q, want its text", got)
	}
	if got := debugEval[string](b, `document.querySelector('#hotkeys li:nth-child(5)').textContent`); got != `ctl\x01\x1b[31mred\u{202e}evil` {
		t.Errorf("control characters show as %q, want them escaped", got)
	}
	if pwned := debugEval[string](b, `String(window.__corralPwned)`); pwned != "undefined" {
		t.Errorf("a key ran as script: window.__corralPwned = %q", pwned)
	}
	if n := debugEval[int](b, `document.querySelectorAll('#hotkeys img, #hotkeys script, #members b, #ring b').length`); n != 0 {
		t.Errorf("keys or names became %d elements", n)
	}

	// Counters move: the page shows the new totals and a per-second rate within a poll or two.
	for i := 1; i <= 2; i++ {
		st.Groups[0].Gets += 250
		st.Groups[0].Fills += 3
		st.Groups[0].FillErrors++
		node.set(t, st)
		b.waitUntil("demo gets to follow the state", 5*time.Second,
			fmt.Sprintf(`%s === %d`, jsCounter("demo", "gets"), st.Groups[0].Gets))
	}
	if rate := debugEval[string](b, jsRate("demo", "gets")); !strings.HasPrefix(rate, "+") || !strings.HasSuffix(rate, "/s") {
		t.Errorf("demo gets rate shows %q, want a positive rate per second", rate)
	}
	if got := debugEval[string](b, `document.querySelector('tr[data-group="demo"] td.gets .total').textContent`); got != "48,710" {
		t.Errorf("demo gets shows %q, want 48,710", got)
	}
	b.screenshot("fake.png")

	// The same page at night: the dark scheme, as most SREs' browsers will ask for.
	b.do("prefer dark", chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}},
		})
		return err
	}))
	b.screenshot("fake-dark.png")

	// A seed turns the node's joins away: a banner names it and says why, as text, and goes
	// once the seed stops refusing.
	st.Refusals = []fakeRefusal{{Seed: "10.1.0.9:7946", Reason: "label", At: time.Now(),
		Diagnosis: `likely another cluster label (this member's is "<b>shop</b>"): the seed closed the connection without answering`}}
	node.set(t, st)
	b.waitUntil("the refusal banner", 10*time.Second, `!document.getElementById('refused').hidden`)
	if got := debugEval[string](b, `document.getElementById('refused').textContent`); !strings.Contains(got, "join refused by seed 10.1.0.9:7946 (label)") ||
		!strings.Contains(got, `(this member's is "<b>shop</b>")`) {
		t.Errorf("the refusal banner says %q", got)
	}
	if n := debugEval[int](b, `document.querySelectorAll('#refused b').length`); n != 0 {
		t.Errorf("the diagnosis became %d elements", n)
	}
	b.screenshot("fake-refused.png")
	st.Refusals = nil
	node.set(t, st)
	b.waitUntil("the refusal banner to go", 10*time.Second, `document.getElementById('refused').hidden`)

	// The node goes away: the page says since when its data is stale and keeps showing it.
	node.kill(t)
	b.waitUntil("the stale banner", 10*time.Second, `!document.getElementById('stale').hidden`)
	banner := debugEval[string](b, `document.getElementById('stale').textContent`)
	if !strings.Contains(banner, "stale since ") {
		t.Errorf("banner says %q, want \"stale since …\"", banner)
	}
	if n := debugEval[int](b, jsMemberRows); n != 3 {
		t.Errorf("after the node went away the page shows %d members, want the last 3", n)
	}
	if got := debugEval[float64](b, jsCounter("demo", "gets")); got != float64(st.Groups[0].Gets) {
		t.Errorf("after the node went away demo gets shows %v, want the last %d", got, st.Groups[0].Gets)
	}
	if got := debugEval[string](b, `document.getElementById('ready').textContent`); got != "was ready" {
		t.Errorf("after the node went away the readiness badge says %q, want \"was ready\"", got)
	}
	b.screenshot("fake-stale.png")
}

func TestDebugPageLive(t *testing.T) {
	chromiumPath(t) // skip before starting a cluster for nothing
	origin := newOrigin(t, 0)
	nodes := startCluster(t, 3, "--origin", origin.template(), "--ttl", "1h")

	// Said plainly before a browser times out on a 404.
	if code := nodes[0].status("/debug/corral"); code != http.StatusOK {
		t.Fatalf("GET /debug/corral on node-0 = %d: corral serve must mount debugui.Handler there", code)
	}
	if code := nodes[0].status("/debug/corral/state"); code != http.StatusOK {
		t.Fatalf("GET /debug/corral/state on node-0 = %d", code)
	}
	b := newDebugBrowser(t)
	b.do("open node-0's page", chromedp.Navigate(nodes[0].url("/debug/corral")))
	b.waitUntil("3 members in the table", 10*time.Second, jsMemberRows+` === 3`)
	if n := debugEval[int](b, jsRingArcs); n != 3 {
		t.Errorf("the ring has %d arcs, want one per member (3)", n)
	}
	if self := debugEval[string](b, `document.getElementById('self').textContent`); self != nodes[0].Name {
		t.Errorf("the page says it is %q, want %q", self, nodes[0].Name)
	}
	// The page's epoch is the one /v1/cluster reports, to the last digit.
	epoch := nodes[0].cluster(t, "").Epoch
	b.waitUntil("the epoch of /v1/cluster", 5*time.Second,
		fmt.Sprintf(`document.getElementById('epoch').textContent === %q`, strconv.FormatUint(epoch, 10)))

	// Traffic on every node; the page of node-0 counts the Gets sent to node-0.
	gets := func(round int) (toNode0 int) {
		for i := 1; i <= 20; i++ {
			n := nodes[i%len(nodes)]
			if code, _, body := n.get(t, "/v1/groups/demo/keys/k"+strconv.Itoa(i)); code != 200 {
				t.Fatalf("round %d: GET k%d on %s = %d %q", round, i, n.Name, code, body)
			}
			if n == nodes[0] {
				toNode0++
			}
		}
		return toNode0
	}
	sent := gets(1)
	b.waitUntil("node-0's demo gets to count the first round", 5*time.Second,
		fmt.Sprintf(`%s >= %d`, jsCounter("demo", "gets"), sent))
	before := debugEval[float64](b, jsCounter("demo", "gets"))
	sent = gets(2)
	b.waitUntil("node-0's demo gets to move with the second round", 5*time.Second,
		fmt.Sprintf(`%s >= %v`, jsCounter("demo", "gets"), before+float64(sent)))
	if rate := debugEval[string](b, jsRate("demo", "gets")); !strings.HasSuffix(rate, "/s") {
		t.Errorf("demo gets rate shows %q, want a rate per second", rate)
	}
	b.screenshot("live.png")
}
