package e2e

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
)

// What a Redis user types first, through the two Go clients they would reach for — go-redis
// v9 in RESP2 and RESP3, and rueidis — against --resp-port of a two-node cluster (so that
// some keys are owned by the other node): PING, SET with EX, GET (a missing key as the
// client's nil), MGET, EXISTS, TTL and PTTL, DEL, and a pipeline of 100 commands.
func TestRedisClients(t *testing.T) {
	nodes := startLeaseCluster(t, 2, "--ttl", "0") // a SET without EX never expires
	addr := nodes[0].RESP

	clients := []struct {
		name string
		open func(t *testing.T) redisUser
	}{
		{"go-redis RESP2", func(t *testing.T) redisUser { return goRedisUser(t, addr, 2) }},
		{"go-redis RESP3", func(t *testing.T) redisUser { return goRedisUser(t, addr, 3) }},
		{"rueidis", func(t *testing.T) redisUser { return rueidisUser(t, addr, false) }},
		{"rueidis RESP2", func(t *testing.T) redisUser { return rueidisUser(t, addr, true) }},
	}
	for _, cl := range clients {
		t.Run(cl.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			u := cl.open(t)
			p := strings.ReplaceAll(cl.name, " ", "-") + ":" // the keys of this client

			if got, err := u.ping(ctx); err != nil || got != "PONG" {
				t.Fatalf("PING = %q, %v", got, err)
			}
			if err := u.setEX(ctx, p+"k", "v", 60); err != nil {
				t.Fatalf("SET EX: %v", err)
			}
			if err := u.set(ctx, p+"forever", "v"); err != nil {
				t.Fatalf("SET: %v", err)
			}
			if got, ok, err := u.get(ctx, p+"k"); err != nil || !ok || got != "v" {
				t.Errorf("GET = %q, %v, %v", got, ok, err)
			}
			if got, ok, err := u.get(ctx, p+"missing"); err != nil || ok {
				t.Errorf("GET of a missing key = %q, found %v, %v; want the client's nil", got, ok, err)
			}
			got, err := u.mget(ctx, p+"k", p+"missing", p+"forever", p+"k")
			if err != nil || len(got) != 4 || got[0] == nil || *got[0] != "v" || got[1] != nil || got[2] == nil || *got[2] != "v" || got[3] == nil || *got[3] != "v" {
				t.Errorf("MGET k missing forever k = %v, %v; want v, the client's nil, v, v", got, err)
			}
			if n, err := u.exists(ctx, p+"k", p+"k", p+"missing", p+"forever"); err != nil || n != 3 {
				t.Errorf("EXISTS k k missing forever = %d, %v; want 3", n, err)
			}
			if s, err := u.ttl(ctx, p+"k"); err != nil || s < 59 || s > 60 {
				t.Errorf("TTL after EX 60 = %d, %v", s, err)
			}
			if ms, err := u.pttl(ctx, p+"k"); err != nil || ms <= 50_000 || ms > 60_000 {
				t.Errorf("PTTL after EX 60 = %d, %v", ms, err)
			}
			if s, err := u.ttl(ctx, p+"forever"); err != nil || s != -1 {
				t.Errorf("TTL of a value that never expires = %d, %v; want -1", s, err)
			}
			if s, err := u.ttl(ctx, p+"missing"); err != nil || s != -2 {
				t.Errorf("TTL of a missing key = %d, %v; want -2", s, err)
			}
			if ms, err := u.pttl(ctx, p+"missing"); err != nil || ms != -2 {
				t.Errorf("PTTL of a missing key = %d, %v; want -2", ms, err)
			}
			if n, err := u.del(ctx, p+"k"); err != nil || n != 1 {
				t.Errorf("DEL = %d, %v", n, err)
			}
			if _, ok, err := u.get(ctx, p+"k"); err != nil || ok {
				t.Errorf("GET after DEL: found %v, %v", ok, err)
			}
			if n, err := u.exists(ctx, p+"k"); err != nil || n != 0 {
				t.Errorf("EXISTS after DEL = %d, %v", n, err)
			}

			// 100 commands in one pipeline: 50 SETs with EX, then a GET of each.
			piped, err := u.pipeline(ctx, p, 50)
			if err != nil {
				t.Fatalf("pipeline: %v", err)
			}
			for i, v := range piped {
				if want := fmt.Sprint("v", i); v != want {
					t.Errorf("pipelined GET %d = %q, want %q", i, v, want)
				}
			}
		})
	}

	// rueidis as a user first writes it, with its client-side cache on, cannot connect: it
	// asks for CLIENT TRACKING, and is told what to set.
	_, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}})
	if err == nil || !strings.Contains(err.Error(), "CLIENT TRACKING is not supported") || !strings.Contains(err.Error(), "DisableCache") {
		t.Errorf("rueidis with its cache on: %v; want an error naming CLIENT TRACKING and DisableCache", err)
	}
}

// redisUser is what TestRedisClients does with a client.
type redisUser struct {
	ping     func(ctx context.Context) (string, error)
	set      func(ctx context.Context, k, v string) error
	setEX    func(ctx context.Context, k, v string, seconds int64) error
	get      func(ctx context.Context, k string) (string, bool, error)    // false: the client's nil
	mget     func(ctx context.Context, keys ...string) ([]*string, error) // nil: the client's nil
	exists   func(ctx context.Context, keys ...string) (int64, error)
	ttl      func(ctx context.Context, k string) (int64, error) // seconds; -1, -2 as Redis says
	pttl     func(ctx context.Context, k string) (int64, error)
	del      func(ctx context.Context, keys ...string) (int64, error)
	pipeline func(ctx context.Context, prefix string, n int) ([]string, error)
}

func goRedisUser(tb testing.TB, addr string, protocol int) redisUser {
	tb.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, Protocol: protocol})
	tb.Cleanup(func() { c.Close() })
	// go-redis reads TTL's -1 and -2 as those durations, others as seconds (milliseconds for
	// PTTL).
	dur := func(d time.Duration, err error, unit time.Duration) (int64, error) {
		if d < 0 {
			return int64(d), err
		}
		return int64(d / unit), err
	}
	return redisUser{
		ping: func(ctx context.Context) (string, error) { return c.Ping(ctx).Result() },
		set:  func(ctx context.Context, k, v string) error { return c.Set(ctx, k, v, 0).Err() },
		setEX: func(ctx context.Context, k, v string, s int64) error {
			return c.Set(ctx, k, v, time.Duration(s)*time.Second).Err()
		},
		get: func(ctx context.Context, k string) (string, bool, error) {
			v, err := c.Get(ctx, k).Result()
			if errors.Is(err, redis.Nil) {
				return "", false, nil
			}
			return v, err == nil, err
		},
		mget:   goRedisMGetOf(c),
		exists: func(ctx context.Context, keys ...string) (int64, error) { return c.Exists(ctx, keys...).Result() },
		ttl: func(ctx context.Context, k string) (int64, error) {
			d, err := c.TTL(ctx, k).Result()
			return dur(d, err, time.Second)
		},
		pttl: func(ctx context.Context, k string) (int64, error) {
			d, err := c.PTTL(ctx, k).Result()
			return dur(d, err, time.Millisecond)
		},
		del: func(ctx context.Context, keys ...string) (int64, error) { return c.Del(ctx, keys...).Result() },
		pipeline: func(ctx context.Context, prefix string, n int) ([]string, error) {
			pipe := c.Pipeline()
			gets := make([]*redis.StringCmd, n)
			for i := range n {
				pipe.Set(ctx, fmt.Sprint(prefix, "p", i), fmt.Sprint("v", i), time.Minute)
			}
			for i := range n {
				gets[i] = pipe.Get(ctx, fmt.Sprint(prefix, "p", i))
			}
			if _, err := pipe.Exec(ctx); err != nil {
				return nil, err
			}
			out := make([]string, n)
			for i, g := range gets {
				out[i] = g.Val()
			}
			return out, nil
		},
	}
}

func rueidisUser(tb testing.TB, addr string, resp2 bool) redisUser {
	tb.Helper()
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true, AlwaysRESP2: resp2})
	if err != nil {
		tb.Fatalf("rueidis: %v", err)
	}
	tb.Cleanup(c.Close)
	integer := func(ctx context.Context, cmd rueidis.Completed) (int64, error) { return c.Do(ctx, cmd).AsInt64() }
	return redisUser{
		ping: func(ctx context.Context) (string, error) { return c.Do(ctx, c.B().Ping().Build()).ToString() },
		set: func(ctx context.Context, k, v string) error {
			return c.Do(ctx, c.B().Set().Key(k).Value(v).Build()).Error()
		},
		setEX: func(ctx context.Context, k, v string, s int64) error {
			return c.Do(ctx, c.B().Set().Key(k).Value(v).ExSeconds(s).Build()).Error()
		},
		get: func(ctx context.Context, k string) (string, bool, error) {
			v, err := c.Do(ctx, c.B().Get().Key(k).Build()).ToString()
			if rueidis.IsRedisNil(err) {
				return "", false, nil
			}
			return v, err == nil, err
		},
		mget: rueidisMGetOf(c),
		exists: func(ctx context.Context, keys ...string) (int64, error) {
			return integer(ctx, c.B().Exists().Key(keys...).Build())
		},
		ttl:  func(ctx context.Context, k string) (int64, error) { return integer(ctx, c.B().Ttl().Key(k).Build()) },
		pttl: func(ctx context.Context, k string) (int64, error) { return integer(ctx, c.B().Pttl().Key(k).Build()) },
		del: func(ctx context.Context, keys ...string) (int64, error) {
			return integer(ctx, c.B().Del().Key(keys...).Build())
		},
		pipeline: func(ctx context.Context, prefix string, n int) ([]string, error) {
			cmds := make(rueidis.Commands, 0, 2*n)
			for i := range n {
				cmds = append(cmds, c.B().Set().Key(fmt.Sprint(prefix, "p", i)).Value(fmt.Sprint("v", i)).ExSeconds(60).Build())
			}
			for i := range n {
				cmds = append(cmds, c.B().Get().Key(fmt.Sprint(prefix, "p", i)).Build())
			}
			res := c.DoMulti(ctx, cmds...)
			out := make([]string, n)
			for i, r := range res {
				if err := r.Error(); err != nil {
					return nil, fmt.Errorf("command %d: %w", i, err)
				}
				if i >= n {
					out[i-n], _ = r.ToString()
				}
			}
			return out, nil
		},
	}
}
