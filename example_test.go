package corral_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/corralcache/corral"
)

func Example() {
	node, err := corral.New(corral.Config{Name: "example", BindAddr: "127.0.0.1"})
	if err != nil {
		panic(err)
	}
	defer node.Close(context.Background())

	var loads atomic.Int64
	users, err := corral.NewGroup(node, "users", func(ctx context.Context, id string) (string, error) {
		loads.Add(1)
		time.Sleep(10 * time.Millisecond) // a slow database
		return "user " + id, nil
	}, corral.WithTTL(time.Minute))
	if err != nil {
		panic(err)
	}

	var wg sync.WaitGroup
	for range 100 {
		wg.Go(func() { users.Get(context.Background(), "42") })
	}
	wg.Wait()
	u, _ := users.Get(context.Background(), "42")
	fmt.Println(u, "- loads:", loads.Load())
	// Output: user 42 - loads: 1
}

func ExampleNew_cluster() {
	cfg := func(name string, join ...string) corral.Config {
		return corral.Config{Name: name, BindAddr: "127.0.0.1", Join: join, DrainTimeout: -1}
	}
	a, err := corral.New(cfg("a"))
	if err != nil {
		panic(err)
	}
	defer a.Close(context.Background())
	b, err := corral.New(cfg("b", a.GossipAddr()))
	if err != nil {
		panic(err)
	}
	defer b.Close(context.Background())

	for len(a.Members()) < 2 {
		time.Sleep(10 * time.Millisecond)
	}
	fmt.Println(len(b.Members()), "members; both route a key to the same owner:",
		a.Owner("user:42") == b.Owner("user:42"))
	// Output: 2 members; both route a key to the same owner: true
}

func ExampleFillError() {
	node, _ := corral.New(corral.Config{Name: "example", BindAddr: "127.0.0.1"})
	defer node.Close(context.Background())
	g, _ := corral.NewGroup(node, "orders", func(ctx context.Context, id string) (string, error) {
		return "", errors.New("db down")
	})

	_, err := g.Get(context.Background(), "7")
	var fe *corral.FillError
	if errors.As(err, &fe) {
		fmt.Println(fe.Group, fe.Key, "shared:", fe.Shared, "remote:", fe.Remote, "-", fe.Err)
	}
	// Output: orders 7 shared: false remote: false - db down
}

func ExampleGroup_Remove() {
	node, _ := corral.New(corral.Config{Name: "example", BindAddr: "127.0.0.1"})
	defer node.Close(context.Background())
	version := 0
	g, _ := corral.NewGroup(node, "config", func(ctx context.Context, key string) (string, error) {
		version++
		return fmt.Sprint(key, " v", version), nil
	}, corral.WithTTL(time.Hour))

	ctx := context.Background()
	v1, _ := g.Get(ctx, "flags")
	g.Remove(ctx, "flags")
	v2, _ := g.Get(ctx, "flags")
	fmt.Println(v1, "→", v2)
	// Output: flags v1 → flags v2
}
