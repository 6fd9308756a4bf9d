package clientlease_test

import (
	"fmt"

	"github.com/corralcache/corral/cmd/corral/internal/clientlease"
)

func ExampleClientOf() {
	fmt.Println(clientlease.ClientOf("10.0.0.7:51234"))
	fmt.Println(clientlease.ClientOf("[fd00::7]:51234"))
	fmt.Println(clientlease.ClientOf("@")) // a Unix socket's peer: the address as it is
	// Output:
	// 10.0.0.7
	// fd00::7
	// @
}

func ExampleLimits_Validate() {
	fmt.Println(clientlease.DefaultLimits().Validate())
	fmt.Println(clientlease.Limits{}.Validate())
	// Output:
	// <nil>
	// --max-lease 0s: want [1ms, 1h0m0s]
}
