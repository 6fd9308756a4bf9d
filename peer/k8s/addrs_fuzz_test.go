package k8s

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"

	"github.com/corralcache/corral/internal/fuzzcorpus"
	"github.com/corralcache/corral/peer"
)

// FuzzAddrsOf feeds the API server's answer to a List of EndpointSlices — a body and its
// Content-Type, from a real HTTP server on loopback — to the default client (restClient,
// whose decoder takes JSON, YAML and protobuf), then the slices to addrsOf, with a target
// port and an address family as a Discoverer has them (checked by New). The addresses are
// those a deliberately plain reading of the package doc gives: for each slice of the family,
// the target's port number, else the number of the slice's TCP port of the target's name
// (DefaultPortName when it names none, then peer.DefaultPort), skipping a slice without one
// or with a number outside 1-65535; for each endpoint not terminating, its first address
// when it is an IP; distinct and sorted.
func FuzzAddrsOf(f *testing.F) {
	var answer atomic.Pointer[[2]string] // this input's Content-Type and body
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a := answer.Load()
		w.Header().Set("Content-Type", a[0])
		io.WriteString(w, a[1])
	}))
	f.Cleanup(srv.Close)
	// QPS -1: no client-side rate limit (5 requests a second by default).
	cl, err := newRESTClient(&rest.Config{Host: srv.URL, QPS: -1}, "default")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, contentType string, body []byte, port string, family byte) {
		answer.Store(&[2]string{contentType, string(body)})
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		l, err := cl.List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=corral"})
		if ctx.Err() != nil {
			t.Fatalf("List did not answer within 20 s: %v", err)
		}
		if err != nil {
			return
		}
		if (Config{Service: "corral", Port: port}).checkNames() != nil {
			port = "" // New refuses it
		}
		fam := [...]discoveryv1.AddressType{"", discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6}[int(family)%3]
		var eps []*discoveryv1.EndpointSlice
		var want []string
		for i := range l.Items {
			eps = append(eps, &l.Items[i])
			want = append(want, plainAddrsOf(&l.Items[i], port, fam)...)
		}
		slices.Sort(want)
		want = slices.Compact(want)
		if got := addrsOf(eps, port, fam); !slices.Equal(got, want) {
			t.Fatalf("addrsOf(%q as %q, port %q, family %q) = %q, want %q", body, contentType, port, fam, got, want)
		}
	})
}

func plainAddrsOf(s *discoveryv1.EndpointSlice, port string, family discoveryv1.AddressType) []string {
	if s.AddressType != discoveryv1.AddressTypeIPv4 && s.AddressType != discoveryv1.AddressTypeIPv6 {
		return nil
	}
	if family != "" && s.AddressType != family {
		return nil
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		p = 0
		name, found := port, false
		if name == "" {
			name = DefaultPortName
		}
		for _, sp := range s.Ports {
			tcp := sp.Protocol == nil || *sp.Protocol == corev1.ProtocolTCP
			if sp.Name != nil && *sp.Name == name && sp.Port != nil && tcp {
				p, found = int(*sp.Port), true
				break
			}
		}
		if !found && port == "" {
			p = peer.DefaultPort
		}
	}
	if p < 1 || p > 65535 {
		return nil
	}
	var out []string
	for _, e := range s.Endpoints {
		if len(e.Addresses) == 0 || e.Conditions.Terminating != nil && *e.Conditions.Terminating {
			continue
		}
		ip, err := netip.ParseAddr(e.Addresses[0])
		if err != nil {
			continue
		}
		if a := netip.AddrPortFrom(ip.Unmap(), uint16(p)).String(); !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	slices.Sort(out)
	return out
}

// addrsSeeds are FuzzAddrsOf's seed corpus: lists as the API server serves them, and ones it
// would not.
func addrsSeeds() []fuzzcorpus.Seed {
	const jsonType = "application/json"
	list := func(items ...string) string {
		return `{"kind":"EndpointSliceList","apiVersion":"discovery.k8s.io/v1","metadata":{"resourceVersion":"4711"},"items":[` + strings.Join(items, ",") + `]}`
	}
	seed := func(name, contentType, body, port string, family byte) fuzzcorpus.Seed {
		return fuzzcorpus.Seed{Name: name, Values: []any{contentType, []byte(body), port, family}}
	}
	v4 := `{"metadata":{"name":"corral-abcde","namespace":"default","labels":{"kubernetes.io/service-name":"corral"}},` +
		`"addressType":"IPv4","ports":[{"name":"tcp-gossip","port":7946,"protocol":"TCP"},{"name":"grpc-peer","port":7947,"protocol":"TCP"}],` +
		`"endpoints":[{"addresses":["10.0.0.7"],"conditions":{"ready":true,"serving":true,"terminating":false},"targetRef":{"kind":"Pod","name":"corral-0"}},` +
		`{"addresses":["10.0.0.8"],"conditions":{"ready":false,"serving":true,"terminating":true}},` +
		`{"addresses":["10.0.0.9","10.0.0.10"],"conditions":{"ready":false}}]}`
	v6 := `{"addressType":"IPv6","ports":[{"name":"tcp-gossip","port":7946}],"endpoints":[{"addresses":["fd00::7"]},{"addresses":["::ffff:10.0.0.7"]}]}`
	one := func(slice string) string { return list(slice) }
	pb, err := (&discoveryv1.EndpointSliceList{Items: []discoveryv1.EndpointSlice{{
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: new("tcp-gossip"), Port: new(int32(7946))}},
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.7"}}},
	}}}).Marshal()
	if err != nil {
		panic(err)
	}
	// The protobuf media type's envelope: a magic number and a runtime.Unknown around the list.
	pb, err = (&runtime.Unknown{TypeMeta: runtime.TypeMeta{APIVersion: "discovery.k8s.io/v1", Kind: "EndpointSliceList"}, Raw: pb}).Marshal()
	if err != nil {
		panic(err)
	}
	return []fuzzcorpus.Seed{
		seed("ipv4", jsonType, list(v4), "", 0),
		seed("dual-stack", jsonType, list(v4, v6), "", 0),
		seed("ipv4-named-port", jsonType, list(v4), "grpc-peer", 1),
		seed("ipv4-number", jsonType, list(v4), "7000", 0),
		seed("ipv4-other-family", jsonType, list(v4), "", 2),
		seed("ipv6", jsonType, list(v6), "", 2),
		seed("yaml", "application/yaml", "kind: EndpointSliceList\napiVersion: discovery.k8s.io/v1\nitems:\n- addressType: IPv4\n  endpoints:\n  - addresses: [10.0.0.7]\n", "", 0),
		seed("protobuf", "application/vnd.kubernetes.protobuf", string(append([]byte("k8s\x00"), pb...)), "", 0),
		seed("no-kind", jsonType, `{"items":[`+v6+`]}`, "", 0),
		seed("status", jsonType, `{"kind":"Status","apiVersion":"v1","status":"Failure","code":410,"reason":"Expired"}`, "", 0),
		seed("fqdn", jsonType, one(`{"addressType":"FQDN","endpoints":[{"addresses":["corral-0.example"]}]}`), "", 0),
		seed("no-ports", jsonType, one(`{"addressType":"IPv4","endpoints":[{"addresses":["10.0.0.7"]}]}`), "", 0),
		seed("udp-port", jsonType, one(`{"addressType":"IPv4","ports":[{"name":"tcp-gossip","port":7946,"protocol":"UDP"}],"endpoints":[{"addresses":["10.0.0.7"]}]}`), "", 0),
		seed("port-out-of-range", jsonType, one(`{"addressType":"IPv4","ports":[{"name":"tcp-gossip","port":70000}],"endpoints":[{"addresses":["10.0.0.7"]}]}`), "", 0),
		seed("port-negative", jsonType, one(`{"addressType":"IPv4","ports":[{"name":"tcp-gossip","port":-1}],"endpoints":[{"addresses":["10.0.0.7"]}]}`), "", 0),
		seed("port-null", jsonType, one(`{"addressType":"IPv4","ports":[{"name":"tcp-gossip","port":null}],"endpoints":[{"addresses":["10.0.0.7"]}]}`), "", 0),
		seed("bad-addresses", jsonType, one(`{"addressType":"IPv4","endpoints":[{"addresses":[]},{"addresses":["10.0.0.300"]},{"addresses":["fe80::1%eth0"]},{}]}`), "", 0),
		seed("not-an-object", jsonType, `[1,2,3]`, "", 0),
		seed("html", "text/html", `<html>502 Bad Gateway</html>`, "", 0),
	}
}
