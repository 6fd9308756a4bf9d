package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/corralcache/corral"
)

// Worker ops that run corral nodes. A worker may run several nodes, each in its own cluster
// (kept apart by Config.Label), named by the driver.

type corralStartArgs struct {
	ID      string   // name of the node within this worker, and its member name
	Label   string   // cluster label
	Seeds   []string // gossip addresses to join
	NearOff bool     // Config.NearBytes = -1: every remote Get crosses the wire
	TLS     *peerTLS // Config.PeerTLS; nil: plaintext
}

type corralStarted struct {
	Gossip, Peer string
}

type corralGroupArgs struct {
	ID        string        // node
	Group     string        // group name, the same on every node
	TTL       time.Duration // WithTTL
	ValueSize int           // bytes the loader returns
	Delay     time.Duration // how long the loader takes
	Tags      []string      // tags the loader gives every value (corral.Tag)
	Batch     bool          // the group has a batch loader (WithBatchLoad) instead of a LoadFunc
	Backups   int           // WithBackups
}

// fillCostArgs: Get N cold keys owned by node ID, one after the other, on ID itself (each a
// fill there, and with backups a Backup call to the key's successor before it returns).
type fillCostArgs struct {
	ID, Group, Prefix string
	N                 int
}

// fillCostResult is each fill's latency and what the group gave its backups meanwhile.
type fillCostResult struct {
	Lat         []time.Duration
	BackupsSent uint64
}

type corralKeysArgs struct {
	ID     string // node whose view routes the keys
	Owner  string // member name the keys must belong to
	Prefix string
	N      int
}

type nodeGroupKey struct {
	ID, Group, Key string
}

func init() {
	ops["corral.start"] = func(_ context.Context, w *workerState, raw json.RawMessage) (any, error) {
		var a corralStartArgs
		if err := json.Unmarshal(raw, &a); err != nil {
			return nil, err
		}
		cfg := corral.Config{
			Name:     a.ID,
			BindAddr: "127.0.0.1",
			Label:    a.Label,
			Join:     a.Seeds,
			// Fast enough failure detection for the crash row's aftermath; the crash itself
			// is routed around at once (a refused connection), not by detection.
			ProbeInterval:  200 * time.Millisecond,
			ProbeTimeout:   100 * time.Millisecond,
			GossipInterval: 50 * time.Millisecond,
			DrainTimeout:   -1,
		}
		if a.NearOff {
			cfg.NearBytes = -1
		}
		if a.TLS != nil {
			var err error
			if cfg.PeerTLS, err = a.TLS.config(); err != nil {
				return nil, err
			}
		}
		n, err := corral.New(cfg)
		if err != nil {
			return nil, err
		}
		w.put("corral/"+a.ID, n, func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			n.Close(ctx)
		})
		return corralStarted{Gossip: n.GossipAddr(), Peer: n.PeerAddr()}, nil
	}
	ops["corral.members"] = func(_ context.Context, w *workerState, raw json.RawMessage) (any, error) {
		n, err := corralNode(w, raw)
		if err != nil {
			return nil, err
		}
		return len(n.Members()), nil
	}
	ops["corral.group"] = func(_ context.Context, w *workerState, raw json.RawMessage) (any, error) {
		var a corralGroupArgs
		if err := json.Unmarshal(raw, &a); err != nil {
			return nil, err
		}
		n, err := state[*corral.Node](w, "corral/"+a.ID)
		if err != nil {
			return nil, err
		}
		// Loader calls, and the keys they loaded.
		calls, loaded := w.counter(a.ID+"/"+a.Group), w.counter(a.ID+"/"+a.Group+"/keys")
		value := payload(a.ValueSize)
		load := func(ctx context.Context, key string) ([]byte, error) {
			calls.Add(1)
			loaded.Add(1)
			if err := sleep(ctx, a.Delay); err != nil {
				return nil, err
			}
			corral.Tag(ctx, a.Tags...)
			return value, nil
		}
		opts := []corral.GroupOption{corral.WithTTL(a.TTL), corral.WithMaxBytes(256 << 20), corral.WithBackups(a.Backups)}
		if a.Batch {
			load = nil
			opts = append(opts, corral.WithBatchLoad(func(ctx context.Context, keys []string) (map[string][]byte, error) {
				calls.Add(1)
				loaded.Add(int64(len(keys)))
				if err := sleep(ctx, a.Delay); err != nil {
					return nil, err
				}
				out := make(map[string][]byte, len(keys))
				for _, k := range keys {
					out[k] = value
				}
				return out, nil
			}))
		}
		g, err := corral.NewGroup(n, a.Group, load, opts...)
		if err == nil && len(a.Tags) > 0 {
			// A purge of another tag is remembered: a tagged hit checks its tags' purges.
			err = n.RemoveByTag(context.Background(), "bench:other")
		}
		if err != nil {
			return nil, err
		}
		w.put("corral/"+a.ID+"/"+a.Group, g, nil)
		return nil, nil
	}
	ops["corral.keys"] = func(_ context.Context, w *workerState, raw json.RawMessage) (any, error) {
		var a corralKeysArgs
		if err := json.Unmarshal(raw, &a); err != nil {
			return nil, err
		}
		n, err := state[*corral.Node](w, "corral/"+a.ID)
		if err != nil {
			return nil, err
		}
		var keys []string
		for i := 0; len(keys) < a.N && i < 100*a.N+1000; i++ {
			k := fmt.Sprintf("%s%07d", a.Prefix, i)
			if n.Owner(k).Name == a.Owner {
				keys = append(keys, k)
			}
		}
		if len(keys) < a.N {
			return nil, fmt.Errorf("found %d keys owned by %s, want %d", len(keys), a.Owner, a.N)
		}
		return keys, nil
	}
	ops["corral.get"] = func(ctx context.Context, w *workerState, raw json.RawMessage) (any, error) {
		var a nodeGroupKey
		if err := json.Unmarshal(raw, &a); err != nil {
			return nil, err
		}
		g, err := state[*corral.Group[[]byte]](w, "corral/"+a.ID+"/"+a.Group)
		if err != nil {
			return nil, err
		}
		v, err := g.Get(ctx, a.Key)
		return len(v), err
	}
	ops["corral.owner"] = func(_ context.Context, w *workerState, raw json.RawMessage) (any, error) {
		var a nodeGroupKey
		if err := json.Unmarshal(raw, &a); err != nil {
			return nil, err
		}
		n, err := state[*corral.Node](w, "corral/"+a.ID)
		if err != nil {
			return nil, err
		}
		return n.Owner(a.Key).Name, nil
	}
	ops["corral.fillcost"] = func(ctx context.Context, w *workerState, raw json.RawMessage) (any, error) {
		var a fillCostArgs
		if err := json.Unmarshal(raw, &a); err != nil {
			return nil, err
		}
		n, err := state[*corral.Node](w, "corral/"+a.ID)
		if err != nil {
			return nil, err
		}
		g, err := state[*corral.Group[[]byte]](w, "corral/"+a.ID+"/"+a.Group)
		if err != nil {
			return nil, err
		}
		var keys []string
		for i := 0; len(keys) < a.N && i < 100*a.N+1000; i++ {
			if k := fmt.Sprintf("%s%07d", a.Prefix, i); n.Owner(k).Name == a.ID {
				keys = append(keys, k)
			}
		}
		sent := g.Stats().BackupsSent
		res := fillCostResult{Lat: make([]time.Duration, 0, len(keys))}
		for _, k := range keys {
			start := time.Now()
			if _, err := g.Get(ctx, k); err != nil {
				return nil, err
			}
			res.Lat = append(res.Lat, time.Since(start))
		}
		res.BackupsSent = g.Stats().BackupsSent - sent
		return res, nil
	}
	ops["corral.stats"] = func(_ context.Context, w *workerState, raw json.RawMessage) (any, error) {
		var a nodeGroupKey
		if err := json.Unmarshal(raw, &a); err != nil {
			return nil, err
		}
		g, err := state[*corral.Group[[]byte]](w, "corral/"+a.ID+"/"+a.Group)
		if err != nil {
			return nil, err
		}
		return g.Stats(), nil
	}
}

func corralNode(w *workerState, raw json.RawMessage) (*corral.Node, error) {
	var id string
	if err := json.Unmarshal(raw, &id); err != nil {
		return nil, err
	}
	return state[*corral.Node](w, "corral/"+id)
}

// payload returns n bytes of a recognisable value.
func payload(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = 'a' + byte(i%26)
	}
	return b
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
