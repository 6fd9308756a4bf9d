package limithits_test

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/corralcache/corral/cmd/corral/internal/limithits"
)

func ExampleCounter() {
	hits, err := limithits.New(prometheus.NewRegistry())
	if err != nil {
		panic(err)
	}
	hits.Hit(limithits.Body)
	fmt.Println(hits.Count(limithits.Body), hits.Count(limithits.Header))
	// Output: 1 0
}
