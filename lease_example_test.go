package corral_test

import (
	"context"
	"fmt"
	"time"

	"github.com/corralcache/corral"
)

// A filler outside the loader: Lease makes one caller the filler, FillSet stores its value,
// and the callers that waited are answered with it.
func ExampleGroup_Lease() {
	node, err := corral.New(corral.Config{Name: "lease-example", BindAddr: "127.0.0.1"})
	if err != nil {
		panic(err)
	}
	defer node.Close(context.Background())
	// Values come only from FillSet: the loader finds nothing.
	pages, err := corral.NewGroup(node, "pages", func(context.Context, string) (string, error) {
		return "", corral.ErrNotFound
	})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	opts := corral.LeaseOptions{Fill: 5 * time.Second, Wait: 2 * time.Second}

	l, _ := pages.Lease(ctx, "product:42", opts)
	fmt.Println(l.State) // this caller builds the page

	waiter := make(chan corral.Lease[string])
	go func() { w, _ := pages.Lease(ctx, "product:42", opts); waiter <- w }()

	stored, _ := pages.FillSet(ctx, "product:42", "<h1>42</h1>", l.Token, corral.Expiry{TTL: time.Minute, SWR: 30 * time.Second})
	fmt.Println("stored:", stored)
	w := <-waiter
	fmt.Println(w.State, w.Value)

	again, _ := pages.FillSet(ctx, "product:42", "late", l.Token, corral.Expiry{TTL: time.Minute})
	fmt.Println("stored again:", again) // the lease ended with the first FillSet
	// Output:
	// fill
	// stored: true
	// hit <h1>42</h1>
	// stored again: false
}

// SetWithExpiry is Set with the value's own lifetime (Redis's SET … EX), instead of the
// group's TTL; SWR serves it stale for a while after.
func ExampleGroup_SetWithExpiry() {
	node, err := corral.New(corral.Config{Name: "expiry-example", BindAddr: "127.0.0.1"})
	if err != nil {
		panic(err)
	}
	defer node.Close(context.Background())
	sessions, err := corral.NewGroup(node, "sessions", func(context.Context, string) (string, error) {
		return "", corral.ErrNotFound
	}, corral.WithTTL(time.Hour))
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	if err := sessions.SetWithExpiry(ctx, "s1", "alice", corral.Expiry{TTL: 30 * time.Minute}); err != nil {
		panic(err)
	}
	v, err := sessions.Get(ctx, "s1")
	fmt.Println(v, err)
	// Output: alice <nil>
}
