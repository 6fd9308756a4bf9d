package k8s_test

import (
	"context"
	"fmt"
	"log/slog"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/corralcache/corral/peer/k8s"
)

// An application imports the package for its side effect and uses k8s:// seeds:
//
//	import _ "github.com/corralcache/corral/peer/k8s"
//
//	corral.New(corral.Config{Join: []string{"k8s://shop/shop-corral-headless"}})
//
// New builds the Discoverer itself; here one reads a fake API server's EndpointSlices.
func ExampleNew() {
	name, port, ready := "tcp-gossip", int32(7946), false
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "shop-corral-headless-x1", Namespace: "shop", Labels: map[string]string{discoveryv1.LabelServiceName: "shop-corral-headless"}},
		AddressType: discoveryv1.AddressTypeIPv6,
		Ports:       []discoveryv1.EndpointPort{{Name: &name, Port: &port}},
		Endpoints: []discoveryv1.Endpoint{
			{Addresses: []string{"fd00::2"}},
			{Addresses: []string{"fd00::1"}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}, // joined all the same
		},
	}
	cs := fake.NewClientset(slice)
	d, err := k8s.New(k8s.Config{Namespace: "shop", Service: "shop-corral-headless", Client: fakeSlices{cs}})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	d.Run(ctx, slog.New(slog.DiscardHandler), func(addrs []string) {
		fmt.Println(d, addrs)
		cancel() // Run returns once its informer has stopped
	})
	// Output: k8s://shop/shop-corral-headless [[fd00::1]:7946 [fd00::2]:7946]
}

// fakeSlices reads the fake clientset's EndpointSlices of namespace shop; its embedded
// clientset tells the informer that it cannot stream lists.
type fakeSlices struct{ *fake.Clientset }

func (c fakeSlices) List(ctx context.Context, o metav1.ListOptions) (*discoveryv1.EndpointSliceList, error) {
	return c.DiscoveryV1().EndpointSlices("shop").List(ctx, o)
}

func (c fakeSlices) Watch(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	return c.DiscoveryV1().EndpointSlices("shop").Watch(ctx, o)
}
