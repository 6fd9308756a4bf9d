// Package debugui serves /debug/corral: a live page for whoever reaches a node through
// `kubectl port-forward` at 3 a.m. It shows the node's view of the cluster — the members and
// their health, the ring drawn as a donut whose arcs are the members' shares, per-group
// counters with per-second rates, and each group's hottest keys — and refreshes every second.
// A seed that turns the node's joins away (another cluster label or gossip key: the reason a
// node sees only itself) is shown in a red banner at the top, with the node's diagnosis.
//
// # Usage
//
//	mux := http.NewServeMux()
//	ui := debugui.Handler("/debug/corral", func() debugui.State {
//		return snapshot(node) // called once per poll, on the request's goroutine
//	})
//	mux.Handle("/debug/corral", ui)  // the page
//	mux.Handle("/debug/corral/", ui) // prefix+"/state" and prefix+"/assets/…"
//
// The caller's duties:
//  1. Mount the handler at prefix and under prefix+"/" without http.StripPrefix: it matches
//     the full request path.
//  2. Make state cheap and safe to call from many goroutines at once: every open page calls
//     it once a second.
//  3. Return Members and Groups sorted by name, and finite shares: a NaN or ±Inf share cannot
//     be encoded, and the poll answers 500 (the page then shows the error and goes stale).
//
// # What is served
//
//	GET prefix              the page (text/html), also at prefix+"/"
//	GET prefix+"/state"     State as JSON (application/json), never cached
//	GET prefix+"/assets/…"  the page's CSS and JS, embedded in the binary with go:embed
//
// Other methods get 405, other paths under prefix 404. Nothing is fetched from elsewhere: no
// CDN, no web fonts, no build step. Every response carries a Content-Security-Policy that
// allows only this origin's scripts and styles, and the script writes every name and key it
// shows with textContent, never as markup, so a key such as "<script>…" is shown, not run.
//
// # The page
//
// The page polls prefix+"/state" once a second, one request at a time, each bounded by a
// timeout. Rates are the counter deltas between two successful polls divided by the time
// between them; a counter that went down (the node restarted) shows no rate until the next
// poll. When a poll fails the page keeps the last data it had and says "stale since" the time
// of the last success, with the error, until a poll succeeds again; the readiness badge then
// reads "was ready".
//
// Keys travel as JSON strings, so bytes that are not UTF-8 arrive as U+FFFD; control
// characters and bidirectional overrides are shown escaped (\x1b, \u{202e}), and a long key
// is cut at 120 characters with the whole of it in the tooltip.
//
// # Working on the page
//
// The page is plain HTML, CSS and JS (page.html and static/), with no build step.
//
//	go run ./cmd/corral/internal/debugui/fakenode -addr 127.0.0.1:8099 -animate
//
// serves it over a three-member fake with moving counters at
// http://127.0.0.1:8099/debug/corral. The browser tests (e2e/debugpage_test.go) drive the same
// program, and a real cluster, in headless chromium, and save screenshots under
// e2e/testdata/debugpage/out/.
package debugui
