package origin

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestOriginRetriesAConnectionNotMade loads from an origin address where nothing listens at
// first and a server starts while the load waits to try again: the load succeeds, from one
// request. An origin that never listens fails after dialAttempts tries, and the error says so.
func TestOriginRetriesAConnectionNotMade(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now

	var served atomic.Int64
	started := make(chan struct{})
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		io.WriteString(w, "v:"+r.URL.Path)
	})}
	t.Cleanup(func() { srv.Close() })

	o, err := New(Config{Template: "http://" + addr + "/{key}", FillTimeout: 5 * time.Second, MaxBytes: 1 << 20, Redirects: RedirectsNone})
	if err != nil {
		t.Fatal(err)
	}
	// The first dial is refused: start the server then, before the next try.
	o.client.Transport.(*http.Transport).DialContext = func(ctx context.Context, network, a string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, a)
		if err != nil {
			select {
			case <-started:
			default:
				l, lerr := net.Listen("tcp", addr)
				if lerr != nil {
					t.Errorf("listen again on %s: %v", addr, lerr)
				} else {
					go srv.Serve(l)
				}
				close(started)
			}
		}
		return c, err
	}
	v, err := o.Load("g")(context.Background(), "k")
	if err != nil {
		t.Fatalf("load after one refused dial: %v", err)
	}
	if string(v.Body) != "v:/k" || served.Load() != 1 {
		t.Errorf("got %q from %d origin requests, want %q from 1", v.Body, served.Load(), "v:/k")
	}

	never, err := New(Config{Template: "http://" + freeAddr(t) + "/{key}", FillTimeout: 5 * time.Second, MaxBytes: 1 << 20, Redirects: RedirectsNone})
	if err != nil {
		t.Fatal(err)
	}
	var dials atomic.Int64
	never.client.Transport.(*http.Transport).DialContext = func(ctx context.Context, network, a string) (net.Conn, error) {
		dials.Add(1)
		return (&net.Dialer{}).DialContext(ctx, network, a)
	}
	_, err = never.Load("g")(context.Background(), "k")
	if err == nil || !strings.Contains(err.Error(), "connection refused") || !strings.Contains(err.Error(), "(3 attempts)") {
		t.Errorf("load from an origin that never listens: %v, want connection refused after 3 attempts", err)
	}
	if dials.Load() != dialAttempts {
		t.Errorf("%d dials, want %d", dials.Load(), dialAttempts)
	}
}

// freeAddr returns a loopback address where nothing listens.
func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// The origin is asked for exactly the key: never a dot segment, another path, another
// query parameter or another host.
func TestOriginAsksForExactlyTheKey(t *testing.T) {
	tests := []struct {
		template, group, key string
		want                 string // "" = refused
	}{
		{"http://api/items/{key}", "g", "k1", "http://api/items/k1"},
		{"http://api/items/{key}", "g", "..", ""},
		{"http://api/items/{key}", "g", ".", ""},
		{"http://api/items/{key}", "g", "../admin", ""},
		{"http://api/items/{key}", "g", `..\admin`, ""},
		{"http://api/items/{key}", "g", "a/./b", ""},
		{"http://api/items/{key}", "g", "...", "http://api/items/..."},
		{"http://api/items/{key}", "g", "a/b", "http://api/items/a%2Fb"},
		{"http://api/items/{key}", "g", "a?b#c", "http://api/items/a%3Fb%23c"},
		{"http://api/items/{key}", "..", "k", "http://api/items/k"}, // {group} is not in the template
		{"http://api/{group}/{key}", "..", "k", ""},
		{"http://api/{group}/{key}", ".x", "k", "http://api/.x/k"},
		{"http://api/items?id={key}&g={group}", "g", "1&admin=true", "http://api/items?id=1%26admin%3Dtrue&g=g"},
		{"http://api/items?id={key}", "g", "..", "http://api/items?id=.."}, // a query value is no path
	}
	for _, tt := range tests {
		o, err := New(Config{Template: tt.template, FillTimeout: time.Second, MaxBytes: 1 << 20, Redirects: RedirectsNone})
		if err != nil {
			t.Fatal(err)
		}
		err = o.Check(tt.group, tt.key)
		switch {
		case tt.want == "" && err == nil:
			t.Errorf("%s with %q/%q: asked for %s, want refused", tt.template, tt.group, tt.key, o.url(tt.group, tt.key))
		case tt.want != "" && err != nil:
			t.Errorf("%s with %q/%q: refused: %v", tt.template, tt.group, tt.key, err)
		case tt.want != "" && o.url(tt.group, tt.key) != tt.want:
			t.Errorf("%s with %q/%q: %s, want %s", tt.template, tt.group, tt.key, o.url(tt.group, tt.key), tt.want)
		}
	}
	// The loader itself refuses, whoever calls it.
	var asked atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { asked.Add(1) }))
	defer srv.Close()
	o, _ := New(Config{Template: srv.URL + "/items/{key}", FillTimeout: time.Second, MaxBytes: 1 << 20, Redirects: RedirectsNone})
	if _, err := o.Load("g")(context.Background(), ".."); !errors.Is(err, errName) || asked.Load() != 0 {
		t.Errorf("load of %q: %v, %d requests; want refused, none sent", "..", err, asked.Load())
	}
	for _, tmpl := range []string{"http://{key}.api/x", "http://api:{key}/x", "http://{group}/{key}"} {
		if _, err := New(Config{Template: tmpl, FillTimeout: time.Second, MaxBytes: 1 << 20, Redirects: RedirectsNone}); err == nil {
			t.Errorf("template %s, which lets a key choose the host, was accepted", tmpl)
		}
	}
}

// A redirect is not followed: the fill fails with the status, and the target is never
// asked. With --origin-redirects=same-host, one to the same host is followed, one to
// another host is not.
func TestOriginRedirects(t *testing.T) {
	var elsewhere atomic.Int64
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhere.Add(1)
		io.WriteString(w, "not the origin's")
	}))
	defer other.Close()
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/items/away":
			http.Redirect(w, r, other.URL+"/x", http.StatusFound)
		case "/items/moved":
			http.Redirect(w, r, "/items/here", http.StatusMovedPermanently)
		case "/items/here":
			io.WriteString(w, "here")
		}
	}))
	defer origin.Close()

	none, _ := New(Config{Template: origin.URL + "/items/{key}", FillTimeout: 5 * time.Second, MaxBytes: 1 << 20, Redirects: RedirectsNone})
	for _, key := range []string{"away", "moved"} {
		if v, err := none.Load("g")(context.Background(), key); err == nil || !strings.Contains(err.Error(), "30") {
			t.Errorf("%s without redirects: %q, %v; want the 3xx as an error", key, v.Body, err)
		}
	}
	same, err := New(Config{Template: origin.URL + "/items/{key}", FillTimeout: 5 * time.Second, MaxBytes: 1 << 20, Redirects: RedirectsSameHost})
	if err != nil {
		t.Fatal(err)
	}
	if v, err := same.Load("g")(context.Background(), "moved"); err != nil || string(v.Body) != "here" {
		t.Errorf("same-host redirect: %q, %v", v.Body, err)
	}
	if v, err := same.Load("g")(context.Background(), "away"); err == nil || !strings.Contains(err.Error(), "another host") {
		t.Errorf("redirect to another host with same-host: %q, %v", v.Body, err)
	}
	if n := elsewhere.Load(); n != 0 {
		t.Errorf("the other host was asked %d times", n)
	}
	if _, err := New(Config{Template: origin.URL + "/{key}", FillTimeout: time.Second, MaxBytes: 1 << 20, Redirects: "all"}); err == nil {
		t.Error("--origin-redirects=all accepted")
	}
}

// hasDotSegment finds a "." or ".." segment as splitting at "/" and "\" finds it, and
// allocates nothing (a Redis protocol GET checks its key with it).
func TestHasDotSegment(t *testing.T) {
	split := func(s string) bool {
		for _, seg := range strings.FieldsFunc(s, func(r rune) bool { return r == '/' || r == '\\' }) {
			if seg == "." || seg == ".." {
				return true
			}
		}
		return false
	}
	for _, s := range []string{"", ".", "..", "...", "a", "a/.", "./a", "a/../b", `a\..\b`, "a//.//b", "a/.b", "..a", "/", "//", `\`, "a/b/c", "key:000000000042"} {
		if got, want := hasDotSegment(s), split(s); got != want {
			t.Errorf("hasDotSegment(%q) = %v, want %v", s, got, want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { hasDotSegment("user/42/profile") }); n != 0 {
		t.Errorf("hasDotSegment allocates %v times", n)
	}
}
