package node

// The debug page through kubectl port-forward, in Debian's chromium (headless, driven by
// chromedp), as a person would open it.

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// browserStep bounds every wait on the browser.
const browserStep = 30 * time.Second

// openDebugPage opens url in chromium, waits until the page lists members members, and saves a
// screenshot as testdata/out/<shot> (kept by CI as an artifact).
func openDebugPage(t *testing.T, url string, members int, shot string) {
	t.Helper()
	exe, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("chromium is not installed; CI must install it (apt-get install chromium)")
		}
		t.Log("chromium is not installed: the debug page is not opened in a browser")
		return
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe),
		chromedp.NoSandbox, // the tests run as root, where chromium's sandbox refuses to start
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.WindowSize(1280, 1000),
		chromedp.WSURLReadTimeout(browserStep),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	ctx, cancelTab := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	defer cancelTab()
	defer chromedp.Cancel(ctx)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	step := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		sctx, cancel := context.WithTimeout(ctx, browserStep)
		defer cancel()
		if err := chromedp.Do(sctx, actions...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	step("set the viewport", chromedp.EmulateViewport(1280, 1000))
	step("open "+url, chromedp.Navigate(url))
	sctx, cancel := context.WithTimeout(ctx, browserStep)
	defer cancel()
	pred := `document.querySelectorAll('#members tbody tr').length === ` + itoa(members)
	if _, err := chromedp.Run(sctx, chromedp.Poll[chromedp.Void](pred,
		chromedp.WithPollingInterval(200*time.Millisecond), chromedp.WithPollingTimeout(browserStep))); err != nil {
		text, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
		t.Fatalf("the debug page never listed %d members: %v\npage says: %s", members, err, text)
	}
	png, err := chromedp.Run(sctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	dir := filepath.Join("testdata", "out")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, shot)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("the debug page through kubectl port-forward: %s", path)
}
