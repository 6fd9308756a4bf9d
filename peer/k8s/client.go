package k8s

import (
	"context"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
)

// restClient is the default Client: a REST client that knows discovery.k8s.io/v1 alone. client-go's
// typed clients decode with a scheme of every built-in API group (k8s.io/client-go/kubernetes/
// scheme), which adds about 16 MB to a stripped corral binary, for one type.
type restClient struct {
	rest      *rest.RESTClient
	namespace string
	params    runtime.ParameterCodec
}

var _ Client = (*restClient)(nil)

func newRESTClient(rc *rest.Config, namespace string) (*restClient, error) {
	scheme := runtime.NewScheme()
	if err := discoveryv1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	// ListOptions as query parameters, and the Status and WatchEvent of errors and watches.
	metav1.AddToGroupVersion(scheme, discoveryv1.SchemeGroupVersion)

	rc = rest.CopyConfig(rc)
	rc.APIPath = "/apis"
	rc.GroupVersion = &discoveryv1.SchemeGroupVersion
	rc.NegotiatedSerializer = serializer.NewCodecFactory(scheme).WithoutConversion()
	rc.UserAgent = "corral (k8s:// discovery)"
	c, err := rest.RESTClientFor(rc)
	if err != nil {
		return nil, err
	}
	return &restClient{rest: c, namespace: namespace, params: runtime.NewParameterCodec(scheme)}, nil
}

func (c *restClient) List(ctx context.Context, opts metav1.ListOptions) (*discoveryv1.EndpointSliceList, error) {
	l := &discoveryv1.EndpointSliceList{}
	err := c.rest.Get().Namespace(c.namespace).Resource("endpointslices").
		VersionedParams(&opts, c.params).Do(ctx).Into(l)
	return l, err
}

func (c *restClient) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	return c.rest.Get().Namespace(c.namespace).Resource("endpointslices").
		VersionedParams(&opts, c.params).Watch(ctx)
}
