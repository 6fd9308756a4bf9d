package apitoken_test

import (
	"fmt"

	"github.com/corralcache/corral/cmd/corral/internal/apitoken"
)

func ExampleToken_Bearer() {
	tok, err := apitoken.New("s3cret")
	if err != nil {
		panic(err)
	}
	for _, h := range []string{"Bearer s3cret", "bearer  s3cret ", "Basic s3cret", "Bearer s3cret2"} {
		fmt.Printf("%q %v\n", h, tok.Bearer(h))
	}
	// Output:
	// "Bearer s3cret" true
	// "bearer  s3cret " true
	// "Basic s3cret" false
	// "Bearer s3cret2" false
}
