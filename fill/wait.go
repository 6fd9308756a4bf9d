package fill

import (
	"context"
	"sync"
)

// WaitHook is told when a fill waits on another fill, so that a cycle of fills waiting on
// each other is found however it was entered. The fill chain (see InChain) catches a loader
// that asks, through any number of caches and nodes, for a key its own chain is filling;
// it cannot catch a cycle closed by joining a fill that another Get started — a's loader
// asks for b while b's loader, started by another caller, asks for a — because neither
// chain contains the other. A WaitHook keeps the graph of such waits (which fill waits on
// which) and fails the wait that would close a cycle. WaitGraph is the implementation.
//
// Wait may be called by many goroutines at once.
type WaitHook interface {
	// Wait is called before a Get whose ctx is a fill's (a loader's Get: ctx's chain names
	// the waiting fill) waits on the fill of key in the cache named cache: a fill it joined
	// (joined) or one it just started. A non-nil error — ErrFillCycle — makes the Get
	// return it at once instead of waiting. Otherwise done is called when the wait ends.
	Wait(ctx context.Context, cache, key string, joined bool) (done func(), err error)
}

// Waiter returns the cache name and key of the innermost fill of ctx's chain — the fill on
// whose behalf a Get with ctx waits — and false when ctx is no fill's.
func Waiter(ctx context.Context) (cache, key string, ok bool) {
	l := chainOf(ctx)
	if l == nil {
		return "", "", false
	}
	return l.name, l.key, true
}

// WaitTarget is a fill that another fill waits on: the fill of Key in the cache named Cache,
// running here (Where "") or elsewhere (Where names the place, a peer address, say).
type WaitTarget struct {
	Cache, Key string
	Where      string
}

// WaitGraph is the graph of fills waiting on fills, in one process, and the WaitHook that
// keeps it. Share one between every cache whose loaders may call each other. Fills that
// run elsewhere are followed with Resolve, so a cycle through other processes is found
// too.
//
// Why this finds every cycle: a wait is added to the graph before the Get waits, and the
// wait that joins a fill in flight searches the graph from that fill for the fills of its
// own chain. Of the waits that make up a cycle, the one added last sees all the others
// when it searches, because they were added before it and are still waiting (they are
// deadlocked); so that one fails with ErrFillCycle, and the cycle unwinds. A wait that
// starts a new fill needs no search: that fill waits on nothing yet.
type WaitGraph struct {
	resolve func(ctx context.Context, t WaitTarget) ([]WaitTarget, error)

	mu sync.Mutex
	// guards edges
	edges map[waitNode]map[*waitEdge]struct{} // by the waiting fill
}

type waitNode struct{ cache, key string }

type waitEdge struct{ to WaitTarget }

// maxWaitSearch bounds the fills one search visits: cycles are short, and a search must not
// wander through a large graph (or many processes) on behalf of one Get.
const maxWaitSearch = 256

// NewWaitGraph returns an empty graph. resolve lists what the fill of t waits on when
// t.Where is not "" — asking the process that runs it, which answers with its WaitsOf —
// with targets' Where relative to this process ("" for fills that run here); it must not
// wait for a fill. nil = waits on fills elsewhere are not followed.
func NewWaitGraph(resolve func(ctx context.Context, t WaitTarget) ([]WaitTarget, error)) *WaitGraph {
	return &WaitGraph{resolve: resolve, edges: make(map[waitNode]map[*waitEdge]struct{})}
}

// Hook returns the WaitHook for one cache: where says where the fill of a key of that cache
// runs ("" = here; a near cache says its key's owner).
func (w *WaitGraph) Hook(where func(key string) string) WaitHook {
	return &waitHook{w: w, where: where}
}

// WaitsOf lists what the fill of key in cache, running in this process, waits on now.
func (w *WaitGraph) WaitsOf(cache, key string) []WaitTarget {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []WaitTarget
	for e := range w.edges[waitNode{cache, key}] {
		out = append(out, e.to)
	}
	return out
}

type waitHook struct {
	w     *WaitGraph
	where func(key string) string
}

var _ WaitHook = (*waitHook)(nil)

func (h *waitHook) Wait(ctx context.Context, cache, key string, joined bool) (func(), error) {
	from := chainOf(ctx)
	if from == nil {
		return noWait, nil
	}
	to := WaitTarget{Cache: cache, Key: key}
	if h.where != nil {
		to.Where = h.where(key)
	}
	w := h.w
	e := &waitEdge{to: to}
	// A batch waits on behalf of every key it fills: a search from any of them finds it.
	w.mu.Lock()
	from.each(func(key string) {
		n := waitNode{from.name, key}
		if w.edges[n] == nil {
			w.edges[n] = make(map[*waitEdge]struct{})
		}
		w.edges[n][e] = struct{}{}
	})
	w.mu.Unlock()
	done := func() {
		w.mu.Lock()
		from.each(func(key string) {
			n := waitNode{from.name, key}
			delete(w.edges[n], e)
			if len(w.edges[n]) == 0 {
				delete(w.edges, n)
			}
		})
		w.mu.Unlock()
	}
	if joined && w.reaches(ctx, to, from) {
		done()
		return nil, ErrFillCycle
	}
	return done, nil
}

// reaches reports whether the fill of start waits, through any number of waits here and
// elsewhere, on a fill of chain.
func (w *WaitGraph) reaches(ctx context.Context, start WaitTarget, chain *link) bool {
	inChain := func(t WaitTarget) bool {
		for l := chain; l != nil; l = l.parent {
			if l.has(t.Cache, t.Key) {
				return true
			}
		}
		return false
	}
	stack := []WaitTarget{start}
	seen := make(map[WaitTarget]bool)
	for len(stack) > 0 && len(seen) < maxWaitSearch {
		t := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if inChain(t) {
			return true
		}
		if seen[t] {
			continue
		}
		seen[t] = true
		if t.Where == "" {
			stack = append(stack, w.WaitsOf(t.Cache, t.Key)...)
		} else if w.resolve != nil {
			next, err := w.resolve(ctx, t)
			if err == nil {
				stack = append(stack, next...)
			}
		}
	}
	return false
}
