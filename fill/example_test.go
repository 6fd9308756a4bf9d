package fill_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/corralcache/corral/fill"
)

func Example() {
	var loads atomic.Int64
	c, err := fill.New(func(ctx context.Context, key string) (string, error) {
		loads.Add(1)
		time.Sleep(10 * time.Millisecond) // a slow database
		return "value of " + key, nil
	}, fill.Config[string]{TTL: time.Minute})
	if err != nil {
		panic(err)
	}
	defer c.Close(context.Background())

	var wg sync.WaitGroup
	for range 100 {
		wg.Go(func() { c.Get(context.Background(), "hot") })
	}
	wg.Wait()
	v, _ := c.Get(context.Background(), "hot")
	fmt.Println(v)
	fmt.Println("loads:", loads.Load())
	// Output:
	// value of hot
	// loads: 1
}

func ExampleFillError() {
	c, _ := fill.New(func(ctx context.Context, key string) (int, error) {
		return 0, errors.New("db down")
	}, fill.Config[int]{Name: "users"})
	defer c.Close(context.Background())

	_, err := c.Get(context.Background(), "42")
	var fe *fill.FillError
	if errors.As(err, &fe) {
		fmt.Println(fe.Name, fe.Key, fe.Shared, fe.Err)
	}
	// Output: users 42 false db down
}

func ExampleSetExpiry() {
	c, _ := fill.New(func(ctx context.Context, key string) (string, error) {
		fill.SetExpiry(ctx, 5*time.Second, 0) // e.g. from the origin's Cache-Control
		return "v", nil
	}, fill.Config[string]{TTL: time.Hour})
	defer c.Close(context.Background())

	e, _, _ := c.GetEntry(context.Background(), "k")
	fmt.Println(e.FreshFor <= 5*time.Second, e.FreshFor > 4*time.Second)
	// Output: true true
}

func ExampleCache_GetMany() {
	var calls atomic.Int64
	c, _ := fill.New[string](nil, fill.Config[string]{
		TTL: time.Minute,
		// One query for a page's keys: SELECT … WHERE id IN (…).
		BatchLoad: func(ctx context.Context, keys []string) (map[string]string, error) {
			calls.Add(1)
			out := make(map[string]string, len(keys))
			for _, k := range keys {
				if k != "404" {
					out[k] = "row " + k
				}
			}
			return out, nil // a key left out is not found
		},
	})
	defer c.Close(context.Background())

	values, errs := c.GetMany(context.Background(), []string{"1", "2", "3", "404"})
	fmt.Println(len(values), values["2"], errs == nil)
	fmt.Println("loader calls:", calls.Load())
	// Output:
	// 3 row 2 true
	// loader calls: 1
}
