package batch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/corralcache/corral"
	"github.com/corralcache/corral/cmd/corral/internal/objects"
	"github.com/corralcache/corral/cmd/corral/internal/origin"
	"github.com/corralcache/corral/cmd/corral/internal/servetest"
	"github.com/corralcache/corral/fill"
	"github.com/corralcache/corral/internal/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// source is a loader of objects that counts its calls by key: a key "missing:…" is not
// found, a key "bad:…" fails, any other is "v(key)".
type source struct {
	mu    sync.Mutex
	calls map[string]int
}

func (s *source) load(_ context.Context, key string) (objects.Object, error) {
	s.mu.Lock()
	s.calls[key]++
	s.mu.Unlock()
	switch {
	case strings.HasPrefix(key, "missing:"):
		return objects.Object{}, corral.ErrNotFound
	case strings.HasPrefix(key, "bad:"):
		return objects.Object{}, errors.New("the database is down")
	}
	return objects.Object{Body: []byte("v(" + key + ")")}, nil
}

func (s *source) total() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.calls {
		n += c
	}
	return n
}

// testGroup is the group "g" of a one-node corral, made as corral serve makes groups, with
// load as its loader.
func testGroup(tb testing.TB, load corral.LoadFunc[objects.Object]) *corral.Group[objects.Object] {
	tb.Helper()
	n := servetest.Node(tb, prometheus.NewRegistry(), 1<<20)
	gs, err := objects.NewGroups(objects.GroupsConfig{MaxGroups: 1,
		Load: func(string) corral.LoadFunc[objects.Object] { return load }})
	if err != nil {
		tb.Fatal(err)
	}
	g, err := gs.Group(n, "g")
	if err != nil {
		tb.Fatal(err)
	}
	return g
}

// Each key asked for is in one of the answer's parts: values found, keys not found and keys
// that failed (with the loader's error, as a Get would have it), each listed once in the order
// first asked however often it was asked; each key is loaded once.
func TestReadSortsEveryKey(t *testing.T) {
	src := &source{calls: map[string]int{}}
	g := testGroup(t, src.load)
	keys := []string{"a", "missing:1", "bad:1", "b", "a", "missing:2", "bad:1", "missing:1", "c"}
	a, err := Read(t.Context(), g, nil, keys)
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for k, v := range a.Values {
		if string(v.Body) != "v("+k+")" {
			t.Errorf("value of %q = %q", k, v.Body)
		}
		found = append(found, k)
	}
	slices.Sort(found)
	if want := []string{"a", "b", "c"}; !slices.Equal(found, want) {
		t.Errorf("found %q, want %q", found, want)
	}
	if want := []string{"missing:1", "missing:2"}; !slices.Equal(a.Missing, want) {
		t.Errorf("missing %q, want %q", a.Missing, want)
	}
	if len(a.Failed) != 1 || a.Failed[0].Key != "bad:1" || !strings.Contains(a.Failed[0].Err.Error(), "the database is down") {
		t.Fatalf("failed %v, want bad:1 with the loader's error", a.Failed)
	}
	var fe *corral.FillError
	if !errors.As(a.Failed[0].Err, &fe) || fe.Key != "bad:1" {
		t.Errorf("the failure is %v, want the *corral.FillError a Get has", a.Failed[0].Err)
	}
	for _, k := range []string{"a", "b", "c", "missing:1", "missing:2", "bad:1"} {
		if src.calls[k] != 1 {
			t.Errorf("%q loaded %d times, want once", k, src.calls[k])
		}
	}
}

// A batch of every key found lists nothing; an empty batch is an empty answer.
func TestReadAllFoundAndEmpty(t *testing.T) {
	g := testGroup(t, (&source{calls: map[string]int{}}).load)
	a, err := Read(t.Context(), g, nil, []string{"x", "y"})
	if err != nil || len(a.Values) != 2 || a.Missing != nil || a.Failed != nil {
		t.Fatalf("Read x y = %+v, %v", a, err)
	}
	a, err = Read(t.Context(), g, nil, nil)
	if err != nil || len(a.Values) != 0 || a.Missing != nil || a.Failed != nil {
		t.Fatalf("Read of no keys = %+v, %v", a, err)
	}
}

// A batch over a bound is refused whole, naming the bound and the key at fault, and nothing is
// read: not even its good keys.
func TestReadRefuses(t *testing.T) {
	o, err := origin.New(origin.Config{Template: "http://127.0.0.1:1/items/{key}", FillTimeout: time.Second, MaxBytes: 1 << 10})
	if err != nil {
		t.Fatal(err)
	}
	tooMany := make([]string, MaxKeys+1)
	for i := range tooMany {
		tooMany[i] = fmt.Sprint("k", i)
	}
	tests := []struct {
		name   string
		keys   []string
		origin *origin.Origin
		want   string
	}{
		{"too many keys", tooMany, nil, "10001 keys in one batch read exceed the limit of 10000 keys"},
		{"an empty key", []string{"a", ""}, nil, "key 2 of 2: empty key"},
		{"a long key", []string{strings.Repeat("k", fill.MaxKeyBytes+1)}, nil, `key 1 of 1 ("` + strings.Repeat("k", 64) + `…"): key of 4097 bytes exceeds the key limit of 4096 bytes`},
		{"a dot segment with an origin", []string{"a", "b", ".."}, o, `key 3 of 3: key ".." cannot be sent to the origin`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := &source{calls: map[string]int{}}
			g := testGroup(t, src.load)
			a, err := Read(t.Context(), g, tt.origin, tt.keys)
			if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Read = %v, want a refusal saying %q", err, tt.want)
			}
			if a.Values != nil || src.total() != 0 {
				t.Fatalf("a refused batch read %d values and loaded %d keys", len(a.Values), src.total())
			}
			if tt.name == "too many keys" && !errors.Is(err, corral.ErrTooManyKeys) {
				t.Fatalf("%v does not wrap corral.ErrTooManyKeys", err)
			}
		})
	}
	// At the bound, and at the longest key, the batch is read.
	src := &source{calls: map[string]int{}}
	g := testGroup(t, src.load)
	atBound := append(tooMany[:MaxKeys-1:MaxKeys-1], strings.Repeat("k", fill.MaxKeyBytes))
	if a, err := Read(t.Context(), g, o, atBound); err != nil || len(a.Values) != MaxKeys {
		t.Fatalf("Read of %d keys = %d values, %v", MaxKeys, len(a.Values), err)
	}
}

// A caller whose context ends gets ctx.Err() at once, the batch going on for the store.
func TestReadCallerLeaves(t *testing.T) {
	release := make(chan struct{})
	var loading sync.WaitGroup
	loading.Add(1)
	g := testGroup(t, func(ctx context.Context, key string) (objects.Object, error) {
		if key == "slow" {
			loading.Done()
			<-release
		}
		return objects.Object{Body: []byte(key)}, nil
	})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := Read(ctx, g, nil, []string{"fast", "slow"})
		done <- err
	}()
	loading.Wait()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Read after its caller left = %v, want context.Canceled", err)
	}
	close(release)
	a, err := Read(t.Context(), g, nil, []string{"slow"})
	if err != nil || string(a.Values["slow"].Body) != "slow" {
		t.Fatalf("Read after the fill = %+v, %v", a, err)
	}
}
