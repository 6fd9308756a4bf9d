package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
)

// MGET as Redis users send it — go-redis v9 (RESP2 and RESP3), rueidis, redis-cli and Python's
// redis — and the HTTP batch read, against two corral serve nodes in front of an origin: each
// key's value or the client's nil, in order, a key named twice answered twice, each key fetched
// from the origin once; a key whose fill failed fails the command, and each client reports it
// as the error it reports for any error reply.
func TestMGetClients(t *testing.T) {
	o := newOrigin(t, 0)
	nodes := startLeaseCluster(t, 2, "--origin", o.template(), "--negative-ttl", "1m")
	addr := nodes[0].RESP
	value := func(k string) string { return "value of " + k }

	type mgetFunc func(ctx context.Context, keys ...string) ([]*string, error) // nil: the client's nil
	clients := []struct {
		name string
		mget func(t *testing.T) mgetFunc
	}{
		{"go-redis RESP2", func(t *testing.T) mgetFunc { return goRedisMGet(t, addr, 2) }},
		{"go-redis RESP3", func(t *testing.T) mgetFunc { return goRedisMGet(t, addr, 3) }},
		{"rueidis", func(t *testing.T) mgetFunc { return rueidisMGet(t, addr) }},
	}
	for _, cl := range clients {
		t.Run(cl.name, func(t *testing.T) {
			ctx := withTimeout(t, 60*time.Second)
			mget := cl.mget(t)
			p := strings.ReplaceAll(cl.name, " ", "-") + "-"
			keys := make([]string, 100)
			for i := range keys {
				keys[i] = fmt.Sprint(p, i)
			}
			keys[10] = "missing-" + p
			keys[20] = keys[30] // a key named twice
			got, err := mget(ctx, keys...)
			if err != nil {
				t.Fatalf("MGET of 100 keys: %v", err)
			}
			for i, k := range keys {
				switch {
				case strings.HasPrefix(k, "missing") && got[i] != nil:
					t.Errorf("MGET[%d] (%s) = %q, want the client's nil", i, k, *got[i])
				case !strings.HasPrefix(k, "missing") && (got[i] == nil || *got[i] != value(k)):
					t.Errorf("MGET[%d] (%s) = %v, want %q", i, k, got[i], value(k))
				}
				if n := o.count(k); n != 1 {
					t.Errorf("%s fetched %d times, want once", k, n)
				}
			}
			_, err = mget(ctx, p+"0", "broken-"+p)
			if err == nil || !strings.Contains(err.Error(), "'broken-"+p+"': origin answered 500") {
				t.Errorf("MGET with a failing key: %v; want the error naming it", err)
			}
		})
	}

	t.Run("redis-cli", func(t *testing.T) {
		got := redisCLI(t, nodes[1].RESP, "MGET", "cli-1", "missing-cli", "cli-2", "cli-1")
		if want := "value of cli-1\n\nvalue of cli-2\nvalue of cli-1"; got != want {
			t.Errorf("redis-cli MGET = %q, want %q", got, want)
		}
		if got := redisCLI(t, nodes[1].RESP, "MGET", "cli-1", "broken-cli"); !strings.HasPrefix(got, "ERR MGET: 1 of 2 keys failed") || !strings.Contains(got, "'broken-cli'") {
			t.Errorf("redis-cli MGET with a failing key = %q", got)
		}
	})

	t.Run("python", func(t *testing.T) {
		py := "/usr/bin/python3" // Debian's, where python3-redis installs the package
		if _, err := os.Stat(py); err != nil || exec.Command(py, "-c", "import redis").Run() != nil {
			requireTool(t, "python3-redis (import redis)")
		}
		out, err := exec.Command(py, "testdata/mget_client.py", nodes[0].RESP, nodes[1].RESP).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "mget_client: ok") {
			t.Fatalf("mget_client.py: %v\n%s", err, out)
		}
		for i := range 100 {
			if n := o.count(fmt.Sprint("py-", i)); n != 1 {
				t.Errorf("py-%d fetched %d times, want once", i, n)
			}
		}
	})

	t.Run("HTTP", func(t *testing.T) {
		keys := []string{"http-1", "missing-http", "broken-http", "http-2", "http-1"}
		code, body := nodes[1].do(t, "GET", "/v1/groups/resp/keys?key="+strings.Join(keys, "&key="), "")
		var ans struct {
			Values  map[string]string `json:"values"`
			Missing []string          `json:"missing"`
			Errors  map[string]struct {
				Status int    `json:"status"`
				Error  string `json:"error"`
			} `json:"errors"`
		}
		if err := json.Unmarshal([]byte(body), &ans); code != 200 || err != nil {
			t.Fatalf("GET …/keys?key=…: %d %q %v", code, body, err)
		}
		for _, k := range []string{"http-1", "http-2"} {
			if v, err := base64.StdEncoding.DecodeString(ans.Values[k]); err != nil || string(v) != value(k) {
				t.Errorf("value of %s = %q %v", k, v, err)
			}
		}
		if e := ans.Errors["broken-http"]; len(ans.Values) != 2 || !slices.Equal(ans.Missing, []string{"missing-http"}) || len(ans.Errors) != 1 || e.Status != 502 || !strings.Contains(e.Error, "origin answered 500") {
			t.Errorf("answer %s", body)
		}
		// The same keys in a POST, through the other node: the values are cached now.
		code, post := nodes[0].do(t, "POST", "/v1/groups/resp/keys:batch", `{"keys": ["http-1", "missing-http", "http-2", "http-1"]}`)
		if code != 200 || !strings.Contains(post, `"missing":["missing-http"]`) || o.count("http-1") != 1 || o.count("http-2") != 1 {
			t.Errorf("POST …/keys:batch: %d %s; http-1 fetched %d times", code, post, o.count("http-1"))
		}
	})
}

func goRedisMGet(tb testing.TB, addr string, protocol int) func(ctx context.Context, keys ...string) ([]*string, error) {
	c := redis.NewClient(&redis.Options{Addr: addr, Protocol: protocol})
	tb.Cleanup(func() { c.Close() })
	return goRedisMGetOf(c)
}

// goRedisMGetOf is MGET through c: each value, or nil for go-redis's nil.
func goRedisMGetOf(c *redis.Client) func(ctx context.Context, keys ...string) ([]*string, error) {
	return func(ctx context.Context, keys ...string) ([]*string, error) {
		vals, err := c.MGet(ctx, keys...).Result()
		if err != nil {
			return nil, err
		}
		out := make([]*string, len(vals))
		for i, v := range vals {
			switch v := v.(type) {
			case nil:
			case string:
				out[i] = &v
			default:
				return nil, fmt.Errorf("MGET[%d] is a %T", i, v)
			}
		}
		return out, nil
	}
}

func rueidisMGet(tb testing.TB, addr string) func(ctx context.Context, keys ...string) ([]*string, error) {
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
	if err != nil {
		tb.Fatalf("rueidis: %v", err)
	}
	tb.Cleanup(c.Close)
	return rueidisMGetOf(c)
}

// rueidisMGetOf is MGET through c: each value, or nil for rueidis's nil.
func rueidisMGetOf(c rueidis.Client) func(ctx context.Context, keys ...string) ([]*string, error) {
	return func(ctx context.Context, keys ...string) ([]*string, error) {
		msgs, err := c.Do(ctx, c.B().Mget().Key(keys...).Build()).ToArray()
		if err != nil {
			return nil, err
		}
		out := make([]*string, len(msgs))
		for i, m := range msgs {
			s, err := m.ToString()
			switch {
			case rueidis.IsRedisNil(err):
			case err != nil:
				return nil, fmt.Errorf("MGET[%d]: %w", i, err)
			default:
				out[i] = &s
			}
		}
		return out, nil
	}
}
