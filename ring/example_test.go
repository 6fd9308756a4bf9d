package ring_test

import (
	"errors"
	"fmt"

	"github.com/corralcache/corral/ring"
)

func ExampleNew() {
	r, err := ring.New([]string{"pod-c", "pod-a", "pod-b"}, ring.DefaultConfig())
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(r.Members(), r.Len())
	for _, key := range []string{"user:1", "user:2", "user:3"} {
		fmt.Println(key, "→", r.Owner(key))
	}

	_, err = ring.New([]string{"pod-a", "pod-a"}, ring.DefaultConfig())
	fmt.Println(err, errors.Is(err, ring.ErrInvalidMember))
	// Output:
	// [pod-a pod-b pod-c] 3
	// user:1 → pod-a
	// user:2 → pod-c
	// user:3 → pod-c
	// ring: invalid member: duplicate name "pod-a" true
}

func ExampleRing_Successor() {
	r, _ := ring.New([]string{"pod-a", "pod-b", "pod-c"}, ring.DefaultConfig())
	owner := r.Owner("user:1")
	next := r.Successor("user:1", owner)
	fmt.Println("owner", owner, "unreachable; ask", next)
	// The successor is the owner once the failed member has left.
	fmt.Println(next == r.Without(owner).Owner("user:1"))
	// With every member failed, there is no one left to ask.
	fmt.Printf("%q\n", r.Successor("user:1", r.Members()...))
	// Output:
	// owner pod-a unreachable; ask pod-c
	// true
	// ""
}

func ExampleRing_Epoch() {
	a, _ := ring.New([]string{"pod-a", "pod-b", "pod-c"}, ring.DefaultConfig())
	b, _ := ring.New([]string{"pod-c", "pod-b", "pod-a"}, ring.DefaultConfig())
	c, _ := ring.New([]string{"pod-a", "pod-b"}, ring.DefaultConfig())
	fmt.Println(a.Epoch() == b.Epoch(), a.Epoch() == c.Epoch())
	// Output:
	// true false
}

func ExampleRing_Moved() {
	before, _ := ring.New([]string{"pod-a", "pod-b", "pod-c"}, ring.DefaultConfig())
	after, _ := ring.New([]string{"pod-a", "pod-b", "pod-c", "pod-d"}, ring.DefaultConfig())
	fmt.Printf("adding pod-d moved %.0f%% of keys; pod-d owns %.0f%%\n",
		100*before.Moved(after), 100*after.Shares()["pod-d"])
	// Output:
	// adding pod-d moved 27% of keys; pod-d owns 27%
}
