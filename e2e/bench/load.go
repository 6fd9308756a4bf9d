package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/golang/groupcache"
	"github.com/redis/go-redis/v9"

	"github.com/corralcache/corral"
	"github.com/corralcache/corral/transport/peerpb"
)

// target names what a load or a stampede calls.
type target struct {
	System string // "corral", "groupcache", "redis", "redis-naive", "redis-lock", "echo", "stream", "tcp"; pages: see batch.go
	Node   string // corral: the node within the worker; redis: the client's name
	Group  string // corral and groupcache group; the echo request's group; redis: loader counter
	// Redis cache-aside only: the loader's delay, the value's size and TTL, the poll interval.
	Delay     time.Duration
	ValueSize int
	TTL       time.Duration
	Poll      time.Duration
	// Pages (batch.go): the keys of the pages, PageSize a page; a call's key is its page's
	// number (PageSize 0: one page of them all, whatever the key). (Not "Keys": loadArgs,
	// which embeds target, has a field of that name.)
	PageKeys []string `json:",omitempty"`
	PageSize int      `json:",omitempty"`
}

// loadArgs is a closed-loop load: Callers goroutines, each calling its own key cycle
// Keys[i % len(Keys)] back to back, until MaxOps calls in all or Duration, whichever first.
type loadArgs struct {
	target
	Keys     [][]string
	Callers  int
	MaxOps   int
	Duration time.Duration
	WantLen  int // value length every call must return; 0 = not checked
}

type loadResult struct {
	Ops, Errors int64
	FirstErr    string
	Elapsed     time.Duration
	Lat         *hist
}

// getFunc calls the target for one key and returns the value's length.
type getFunc func(ctx context.Context, key string) (int, error)

func (w *workerState) getter(t target) (getFunc, error) {
	switch t.System {
	case "corral-many", "corral-gets", "gc-gets", "redis-mget", "redis-mget-fill", "tcp-page":
		return w.pager(t)
	case "corral":
		g, err := state[*corral.Group[[]byte]](w, "corral/"+t.Node+"/"+t.Group)
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context, key string) (int, error) {
			v, err := g.Get(ctx, key)
			return len(v), err
		}, nil
	case "groupcache":
		g := groupcache.GetGroup(t.Group)
		if g == nil {
			return nil, errors.New("no groupcache group " + t.Group)
		}
		return func(ctx context.Context, key string) (int, error) {
			var v groupcache.ByteView
			err := g.Get(ctx, key, groupcache.ByteViewSink(&v))
			return v.Len(), err
		}, nil
	case "redis":
		rdb, err := state[*redis.Client](w, "redis/"+t.Node)
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context, key string) (int, error) {
			v, err := rdb.Get(ctx, key).Bytes()
			return len(v), err
		}, nil
	case "redis-naive", "redis-lock":
		rdb, err := state[*redis.Client](w, "redis/"+t.Node)
		if err != nil {
			return nil, err
		}
		calls := w.counter("redis/" + t.Group)
		value := payload(t.ValueSize)
		r := &redisAside{rdb: rdb, ttl: t.TTL, lock: t.System == "redis-lock", poll: t.Poll,
			token: fmt.Sprint(time.Now().UnixNano()),
			load: func(ctx context.Context, key string) ([]byte, error) {
				calls.Add(1)
				return value, sleep(ctx, t.Delay)
			}}
		return func(ctx context.Context, key string) (int, error) {
			v, err := r.get(ctx, key)
			return len(v), err
		}, nil
	case "tcp":
		t, err := state[*tcpClient](w, "tcp.client")
		if err != nil {
			return nil, err
		}
		return t.get, nil
	case "stream":
		sc, err := state[*streamClient](w, "stream.client")
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context, key string) (int, error) {
			resp, err := sc.c.Get(ctx, sc.addr, echoRequest(t.Group, key))
			return len(resp.GetEntry().GetValue()), err
		}, nil
	case "echo":
		cli, err := state[peerpb.PeerClient](w, "echo.client")
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context, key string) (int, error) {
			resp, err := cli.Get(ctx, echoRequest(t.Group, key))
			return len(resp.GetEntry().GetValue()), err
		}, nil
	}
	return nil, fmt.Errorf("unknown system %q", t.System)
}

// runLoad runs a closed-loop load in this process.
func runLoad(ctx context.Context, get getFunc, a loadArgs) loadResult {
	if a.Callers < 1 || len(a.Keys) == 0 {
		return loadResult{FirstErr: "no callers or no keys", Errors: 1, Lat: newHist()}
	}
	// The context bounds calls that hang; the loop below bounds the rest.
	ctx, cancel := context.WithTimeout(ctx, a.Duration+10*time.Second)
	defer cancel()
	type callerResult struct {
		ops, errs int64
		err       error
		lat       *hist
	}
	results := make([]callerResult, a.Callers)
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(a.Duration)
	for c := range a.Callers {
		quota := a.MaxOps / a.Callers
		if c < a.MaxOps%a.Callers {
			quota++
		}
		keys := a.Keys[c%len(a.Keys)]
		wg.Go(func() {
			r := callerResult{lat: newHist()}
			for i := 0; i < quota; i++ {
				t0 := time.Now()
				if t0.After(deadline) {
					break
				}
				n, err := get(ctx, keys[i%len(keys)])
				r.lat.record(time.Since(t0))
				r.ops++
				if err == nil && a.WantLen > 0 && n != a.WantLen {
					err = fmt.Errorf("value of %d bytes, want %d", n, a.WantLen)
				}
				if err != nil {
					r.errs++
					if r.err == nil {
						r.err = err
					}
				}
			}
			results[c] = r
		})
	}
	wg.Wait()
	res := loadResult{Elapsed: time.Since(start), Lat: newHist()}
	for _, r := range results {
		res.Ops += r.ops
		res.Errors += r.errs
		res.Lat.merge(r.lat)
		if r.err != nil && res.FirstErr == "" {
			res.FirstErr = r.err.Error()
		}
	}
	return res
}

// stampedeArgs fires Callers concurrent Gets of one key at the instant At (Unix nanoseconds,
// the same clock in every process of this machine), each bounded by Timeout.
type stampedeArgs struct {
	target
	Key     string
	Callers int
	At      int64
	Timeout time.Duration
}

type stampedeResult struct {
	Lat      []time.Duration // one per caller, in no order
	Errors   int
	FirstErr string
}

func runStampede(ctx context.Context, get getFunc, a stampedeArgs) stampedeResult {
	res := stampedeResult{Lat: make([]time.Duration, a.Callers)}
	errs := make([]error, a.Callers)
	var ready, wg sync.WaitGroup
	fire := make(chan struct{})
	ready.Add(a.Callers)
	for i := range a.Callers {
		wg.Go(func() {
			ready.Done()
			<-fire
			ctx, cancel := context.WithTimeout(ctx, a.Timeout)
			defer cancel()
			t0 := time.Now()
			_, errs[i] = get(ctx, a.Key)
			res.Lat[i] = time.Since(t0)
		})
	}
	ready.Wait()
	sleep(ctx, time.Until(time.Unix(0, a.At)))
	close(fire)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			res.Errors++
			if res.FirstErr == "" {
				res.FirstErr = err.Error()
			}
		}
	}
	return res
}

func init() {
	ops["load"] = func(ctx context.Context, w *workerState, raw json.RawMessage) (any, error) {
		var a loadArgs
		if err := json.Unmarshal(raw, &a); err != nil {
			return nil, err
		}
		get, err := w.getter(a.target)
		if err != nil {
			return nil, err
		}
		return runLoad(ctx, get, a), nil
	}
	ops["stampede"] = func(ctx context.Context, w *workerState, raw json.RawMessage) (any, error) {
		var a stampedeArgs
		if err := json.Unmarshal(raw, &a); err != nil {
			return nil, err
		}
		get, err := w.getter(a.target)
		if err != nil {
			return nil, err
		}
		return runStampede(ctx, get, a), nil
	}
}
