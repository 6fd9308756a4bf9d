package k8s

import (
	"strings"
	"testing"

	"github.com/corralcache/corral/internal/fuzzcorpus"
)

// FuzzParseTarget feeds the target of a k8s:// seed, as --join gives it, to parseTarget. A
// target that parses names a Service and, when it names them, a namespace and a port as the
// API server would take them, and written back as "namespace/service:port" it parses to
// the same Config.
func FuzzParseTarget(f *testing.F) {
	f.Fuzz(func(t *testing.T, target string) {
		c, err := parseTarget(target)
		if err != nil {
			return
		}
		if c.Service == "" || c.checkNames() != nil {
			t.Fatalf("parseTarget(%q) = %+v, which the API server would refuse", target, c)
		}
		back := c.Service
		if c.Namespace != "" {
			back = c.Namespace + "/" + back
		}
		if c.Port != "" {
			back += ":" + c.Port
		}
		if again, err := parseTarget(back); err != nil || again != c {
			t.Fatalf("parseTarget(%q) = %+v, written back as %q: %+v, %v", target, c, back, again, err)
		}
		if strings.ContainsAny(c.Namespace+c.Service+c.Port, "/: ") {
			t.Fatalf("parseTarget(%q) = %+v: a separator inside a name", target, c)
		}
	})
}

// targetSeeds are FuzzParseTarget's seed corpus.
func targetSeeds() []fuzzcorpus.Seed {
	var seeds []fuzzcorpus.Seed
	for name, target := range map[string]string{
		"service":             "corral",
		"namespaced":          "default/corral",
		"port-number":         "team-a/corral-headless:7946",
		"port-name":           "corral:tcp-gossip",
		"empty":               "",
		"empty-namespace":     "/corral",
		"empty-service":       "default/",
		"empty-port":          "corral:",
		"uppercase":           "Default/Corral",
		"three-parts":         "a/b/c",
		"port-zero":           "corral:0",
		"port-too-large":      "corral:70000",
		"port-signed":         "corral:+7946",
		"port-name-bad":       "corral:not_a_port",
		"two-colons":          "corral:7946:7946",
		"ipv6-like":           "[fd00::1]:7946",
		"long-label":          strings.Repeat("a", 64),
		"unicode":             "défault/corral",
		"service-leading-dig": "default/7corral",
	} {
		seeds = append(seeds, fuzzcorpus.Seed{Name: name, Values: []any{target}})
	}
	return seeds
}
