package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Worker ops that talk to Redis through go-redis, and the two cache-aside strategies the
// stampede rows compare corral with.

type redisDialArgs struct {
	Name     string // the client's name in this worker
	Addr     string
	PoolSize int // go-redis pool; 0 = its default (10 per GOMAXPROCS)
}

type redisFillArgs struct {
	Name      string
	Keys      []string
	ValueSize int
	TTL       time.Duration // 0 = none
}

func init() {
	ops["redis.dial"] = func(ctx context.Context, w *workerState, raw json.RawMessage) (any, error) {
		var a redisDialArgs
		if err := json.Unmarshal(raw, &a); err != nil {
			return nil, err
		}
		rdb := redis.NewClient(&redis.Options{
			Addr: a.Addr, PoolSize: a.PoolSize, MinIdleConns: min(a.PoolSize, 64),
			DialTimeout: 2 * time.Second, ReadTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second,
			// The pool wait bound: a caller gets an error rather than waiting forever.
			PoolTimeout: 10 * time.Second,
		})
		if err := rdb.Ping(ctx).Err(); err != nil {
			rdb.Close()
			return nil, err
		}
		w.put("redis/"+a.Name, rdb, func() { rdb.Close() })
		return nil, nil
	}
	ops["redis.fill"] = func(ctx context.Context, w *workerState, raw json.RawMessage) (any, error) {
		var a redisFillArgs
		if err := json.Unmarshal(raw, &a); err != nil {
			return nil, err
		}
		rdb, err := state[*redis.Client](w, "redis/"+a.Name)
		if err != nil {
			return nil, err
		}
		value := payload(a.ValueSize)
		for start := 0; start < len(a.Keys); start += 1000 {
			p := rdb.Pipeline()
			for _, k := range a.Keys[start:min(start+1000, len(a.Keys))] {
				p.Set(ctx, k, value, a.TTL)
			}
			if _, err := p.Exec(ctx); err != nil {
				return nil, err
			}
		}
		return nil, nil
	}
	ops["redis.flush"] = func(ctx context.Context, w *workerState, raw json.RawMessage) (any, error) {
		var name string
		if err := json.Unmarshal(raw, &name); err != nil {
			return nil, err
		}
		rdb, err := state[*redis.Client](w, "redis/"+name)
		if err != nil {
			return nil, err
		}
		return nil, rdb.FlushAll(ctx).Err()
	}
	ops["redis.memory"] = func(ctx context.Context, w *workerState, raw json.RawMessage) (any, error) {
		var name string
		if err := json.Unmarshal(raw, &name); err != nil {
			return nil, err
		}
		rdb, err := state[*redis.Client](w, "redis/"+name)
		if err != nil {
			return nil, err
		}
		info, err := rdb.Info(ctx, "memory").Result()
		if err != nil {
			return nil, err
		}
		return infoField(info, "used_memory")
	}
}

// redisAside is the cache-aside strategies on Redis: GET, and on a miss load and SET.
type redisAside struct {
	rdb   *redis.Client
	load  func(ctx context.Context, key string) ([]byte, error)
	ttl   time.Duration
	lock  bool          // take a SET NX lock before loading; the others poll
	poll  time.Duration // how often a caller that lost the lock looks again
	token string
}

// get is the naive strategy (lock off): every caller that misses loads. With lock on, only
// the caller that takes the lock loads; the others poll GET every poll interval.
func (r *redisAside) get(ctx context.Context, key string) ([]byte, error) {
	for {
		v, err := r.rdb.Get(ctx, key).Bytes()
		if err == nil {
			return v, nil
		}
		if !errors.Is(err, redis.Nil) {
			return nil, err
		}
		if !r.lock {
			return r.fill(ctx, key)
		}
		ok, err := r.rdb.SetNX(ctx, "lock:"+key, r.token, 5*time.Second).Result()
		if err != nil {
			return nil, err
		}
		if ok {
			// Look again under the lock: the previous holder may have stored the value and
			// released the lock between our GET and our SET NX. Without this, a waiter that
			// was slow to run would load a second time.
			if v, err := r.rdb.Get(ctx, key).Bytes(); err == nil {
				r.rdb.Del(context.WithoutCancel(ctx), "lock:"+key)
				return v, nil
			}
			v, err := r.fill(ctx, key)
			r.rdb.Del(context.WithoutCancel(ctx), "lock:"+key)
			return v, err
		}
		if err := sleep(ctx, r.poll); err != nil {
			return nil, fmt.Errorf("waiting for the lock holder's fill: %w", err)
		}
	}
}

func (r *redisAside) fill(ctx context.Context, key string) ([]byte, error) {
	v, err := r.load(ctx, key)
	if err != nil {
		return nil, err
	}
	return v, r.rdb.Set(ctx, key, v, r.ttl).Err()
}

// infoField returns the integer field name of an INFO answer ("name:value" lines).
func infoField(info, name string) (int64, error) {
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, fmt.Errorf("INFO has no %s", name)
}
