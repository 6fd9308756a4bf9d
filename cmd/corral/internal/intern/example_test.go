package intern_test

import (
	"fmt"
	"testing"

	"github.com/corralcache/corral/cmd/corral/internal/intern"
)

func Example() {
	var keys intern.Strings
	buf := []byte("user:42")
	key := keys.Of(buf)
	copy(buf, "user:43") // the buffer is reused; key is not
	fmt.Println(key, keys.Of([]byte("user:42")) == key)
	// Output: user:42 true
}

func TestOfAllocatesOnce(t *testing.T) {
	var keys intern.Strings
	b := []byte("key:000000000042")
	keys.Of(b)
	if n := testing.AllocsPerRun(100, func() { keys.Of(b) }); n != 0 {
		t.Errorf("Of of bytes seen allocates %v times, want 0", n)
	}
}
