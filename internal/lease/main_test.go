package lease

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corralcache/corral/fill"
	"github.com/corralcache/corral/internal/leakcheck"
	"github.com/corralcache/corral/internal/version"
	"github.com/corralcache/corral/internal/view"
	"github.com/corralcache/corral/ring"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// cacheStore is a group's store as the table sees it, over a real fill cache; it finds no
// copy elsewhere.
type cacheStore struct {
	c     *fill.Replica[string]
	tombs *fill.Tombstones
}

var _ Store[string] = cacheStore{}

func (s cacheStore) Peek(key string) (fill.Entry[string], bool) { return s.c.Peek(key) }
func (s cacheStore) Floor(key string) uint64                    { return s.tombs.Floor(key) }
func (s cacheStore) SetFor(key, v string, fresh, swr time.Duration, floor, version uint64, tags ...string) (bool, error) {
	return s.c.SetFor(key, v, fresh, swr, floor, version, tags...)
}
func (s cacheStore) Take(context.Context, string) bool { return false }

// newTable returns the table of a group on the node n0 of a one-node cluster, whose view is
// in vp.
func newTable(tb testing.TB, vp *atomic.Pointer[view.View]) *Table[string] {
	tb.Helper()
	vp.Store(view.Alone("n0", "127.0.0.1:7947", ring.DefaultConfig()))
	clock := version.New("n0", time.Now)
	tombs := fill.NewTombstones(fill.TombstoneConfig{})
	c, err := fill.NewReplica(func(context.Context, string) (string, *fill.Copy, error) { return "", nil, fill.ErrNotFound }, nil,
		fill.Config[string]{Name: "g"}, fill.ReplicaConfig{NextVersion: clock.Next, Tombstones: tombs})
	if err != nil {
		tb.Fatal(err)
	}
	t := NewTable(Config{Group: "g", View: vp, Clock: clock, PeekWindow: time.Minute, PeekTimeout: 250 * time.Millisecond,
		AskedAt: func() time.Time { return time.Time{} }}, Store[string](cacheStore{c: c, tombs: tombs}))
	tb.Cleanup(func() {
		t.Close()
		c.Close(context.Background())
	})
	return t
}
