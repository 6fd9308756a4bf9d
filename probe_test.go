package corral_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/corralcache/corral"
)

// A request that waits on a peer probes it (its silence watch); a probe is answered as what
// it is — not counted as a request naming a bad group on the peer, nor as a failed Get on
// the prober. A Lease held a second on a remote owner probes it several times.
func TestProbesAreNotCountedAsFailures(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		regs := map[string]*prometheus.Registry{}
		ec := newECluster(t, eclusterConfig{nodes: 2, notFound: true, node: func(name string) corral.Config {
			regs[name] = prometheus.NewRegistry()
			return corral.Config{Registerer: regs[name], SilentPeerTimeout: 100 * time.Millisecond}
		}})
		var key string
		for i := 0; key == ""; i++ {
			if k := string(rune('a' + i)); ec.Node("n0").Owner(k).Name == "n1" {
				key = k
			}
		}
		ctx := context.Background()
		held, err := ec.g("n1").Lease(ctx, key, corral.LeaseOptions{Fill: time.Minute})
		if err != nil || held.State != corral.LeaseFill {
			t.Fatalf("Lease = %+v, %v", held, err)
		}
		l, err := ec.g("n0").Lease(ctx, key, corral.LeaseOptions{Fill: time.Minute, Wait: time.Second})
		if err != nil || l.State != corral.LeaseBusy {
			t.Fatalf("a Lease held for a second = %+v, %v; want busy", l, err)
		}
		if v := counter(t, regs["n1"], "corral_limit_hits_total", map[string]string{"limit": "group_name"}); v != 0 {
			t.Errorf("the owner counted %v requests naming a bad group: the probes", v)
		}
		for _, code := range []string{"FailedPrecondition", "InvalidArgument"} {
			if v := counter(t, regs["n0"], "corral_peer_requests_total", map[string]string{"method": "Get", "code": code}); v != 0 {
				t.Errorf("the prober counted %v Gets answered %s: the probes", v, code)
			}
		}
		if v := counter(t, regs["n0"], "corral_peer_requests_total", map[string]string{"method": "Get", "code": "OK"}); v == 0 {
			t.Error("no probe was sent: the test did not wait on a peer")
		}
	})
}

// counter returns the value of the counter called name with labels in reg, 0 when it has none.
func counter(tb testing.TB, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	tb.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		tb.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metrics:
		for _, m := range mf.GetMetric() {
			got := map[string]string{}
			for _, lp := range m.GetLabel() {
				got[lp.GetName()] = lp.GetValue()
			}
			for k, v := range labels {
				if got[k] != v {
					continue metrics
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}
