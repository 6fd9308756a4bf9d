// Command coredns is CoreDNS with only the plugins the Kubernetes tests' cluster DNS needs:
// the kubernetes plugin answers for Services and their endpoints (the dns+ seed of corral's
// chart resolves the headless Service through it), bind, errors, log, cache and ready around
// it. No forward plugin: the test node's pods resolve cluster names only. Its own module, so
// CoreDNS's dependencies never move the versions the control plane is built with.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/ready"
)

// The plugins in the order CoreDNS runs them (core/dnsserver/zdirectives.go's order).
func init() {
	dnsserver.Directives = []string{"bind", "ready", "errors", "log", "cache", "kubernetes"}
}

func main() { coremain.Run() }
