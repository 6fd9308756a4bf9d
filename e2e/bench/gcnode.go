package main

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/golang/groupcache"
	"github.com/golang/groupcache/consistenthash"
)

// Worker ops that run one groupcache node. groupcache keeps global state — its group registry
// and one peer picker per process — so a worker runs at most one node, and groups are never
// registered twice.

type gcGroupArgs struct {
	Group      string
	CacheBytes int64 // groupcache's cacheBytes: main cache and hot cache together
	ValueSize  int
	Delay      time.Duration
}

type gcGetArgs struct {
	Group, Key string
}

// gcReplicas and a nil hash are HTTPPool's defaults: the driver computes owners with them.
const gcReplicas = 50

func gcOwner(peers []string, key string) string {
	m := consistenthash.New(gcReplicas, nil)
	m.Add(peers...)
	return m.Get(key)
}

func init() {
	ops["gc.listen"] = func(_ context.Context, w *workerState, _ json.RawMessage) (any, error) {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		self := "http://" + lis.Addr().String()
		// Keep-alive connections for as many concurrent callers as the benchmark has: with
		// http.DefaultTransport (2 idle connections per host) groupcache would dial a new
		// connection for most requests beyond 2 concurrent ones, and measure that instead.
		tr := &http.Transport{
			DialContext:         (&net.Dialer{Timeout: 2 * time.Second}).DialContext,
			MaxIdleConns:        1024,
			MaxIdleConnsPerHost: 512,
			IdleConnTimeout:     90 * time.Second,
		}
		pool := groupcache.NewHTTPPoolOpts(self, nil)                          // 50 replicas, crc32: see gcOwner
		pool.Transport = func(context.Context) http.RoundTripper { return tr } // read by Set
		srv := &http.Server{Handler: pool, ReadHeaderTimeout: 10 * time.Second}
		go func() {
			if err := srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
				panic(err)
			}
		}()
		w.put("gc.pool", pool, func() { srv.Close(); tr.CloseIdleConnections() })
		return self, nil
	}
	ops["gc.peers"] = func(_ context.Context, w *workerState, raw json.RawMessage) (any, error) {
		var peers []string
		if err := json.Unmarshal(raw, &peers); err != nil {
			return nil, err
		}
		pool, err := state[*groupcache.HTTPPool](w, "gc.pool")
		if err != nil {
			return nil, err
		}
		pool.Set(peers...)
		return nil, nil
	}
	ops["gc.group"] = func(_ context.Context, w *workerState, raw json.RawMessage) (any, error) {
		var a gcGroupArgs
		if err := json.Unmarshal(raw, &a); err != nil {
			return nil, err
		}
		if groupcache.GetGroup(a.Group) != nil {
			return nil, errors.New("groupcache group " + a.Group + " exists already")
		}
		calls := w.counter("gc/" + a.Group)
		value := payload(a.ValueSize)
		groupcache.NewGroup(a.Group, a.CacheBytes, groupcache.GetterFunc(func(ctx context.Context, key string, dest groupcache.Sink) error {
			calls.Add(1)
			if err := sleep(ctx, a.Delay); err != nil {
				return err
			}
			return dest.SetBytes(value)
		}))
		return nil, nil
	}
	ops["gc.get"] = func(ctx context.Context, w *workerState, raw json.RawMessage) (any, error) {
		var a gcGetArgs
		if err := json.Unmarshal(raw, &a); err != nil {
			return nil, err
		}
		g := groupcache.GetGroup(a.Group)
		if g == nil {
			return nil, errors.New("no groupcache group " + a.Group)
		}
		var v groupcache.ByteView
		err := g.Get(ctx, a.Key, groupcache.ByteViewSink(&v))
		return v.Len(), err
	}
	ops["gc.stats"] = func(_ context.Context, w *workerState, raw json.RawMessage) (any, error) {
		var group string
		if err := json.Unmarshal(raw, &group); err != nil {
			return nil, err
		}
		g := groupcache.GetGroup(group)
		if g == nil {
			return nil, errors.New("no groupcache group " + group)
		}
		return gcStats{
			Gets: g.Stats.Gets.Get(), CacheHits: g.Stats.CacheHits.Get(), PeerLoads: g.Stats.PeerLoads.Get(),
			PeerErrors: g.Stats.PeerErrors.Get(), LocalLoads: g.Stats.LocalLoads.Get(),
			HotHits: g.CacheStats(groupcache.HotCache).Hits, MainHits: g.CacheStats(groupcache.MainCache).Hits,
		}, nil
	}
}

type gcStats struct {
	Gets, CacheHits, PeerLoads, PeerErrors, LocalLoads, HotHits, MainHits int64
}
