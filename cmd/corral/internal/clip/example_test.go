package clip_test

import (
	"errors"
	"fmt"
	"strings"

	"github.com/corralcache/corral/cmd/corral/internal/clip"
)

func ExampleString() {
	fmt.Println(clip.String("FLUSHALL", 5))
	fmt.Println(clip.String("GET", 5))
	// Output:
	// FLUSH…
	// GET
}

func ExampleReason() {
	err := errors.New("origin: " + strings.Repeat("x", 300))
	fmt.Println(len(clip.Reason(err)))
	// Output: 203
}
