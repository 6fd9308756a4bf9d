package k8s

import (
	"context"
	"fmt"
	"os"
	"testing"

	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The chart's service account may get, list and watch endpointslices in its own namespace, and
// nothing else: SubjectAccessReviews against the API server's RBAC authorizer, in both modes.
func TestDiscoveryRBAC(t *testing.T) {
	for _, mode := range []string{"server", "library"} {
		t.Run(mode, func(t *testing.T) {
			ns := createNamespace(t, "rbac-"+mode)
			other := createNamespace(t, "rbac-"+mode+"-other")
			applyStrict(t, render(t, "shop", ns, writeValues(t, fmt.Sprintf(
				"mode: %s\nlibrary: {selector: {app: shop}}\ndiscovery: {mode: k8s}\n", mode))))
			user := "system:serviceaccount:" + ns + ":shop-corral"
			tests := []struct {
				attr  authzv1.ResourceAttributes
				allow bool
			}{
				{authzv1.ResourceAttributes{Namespace: ns, Verb: "get", Group: "discovery.k8s.io", Resource: "endpointslices"}, true},
				{authzv1.ResourceAttributes{Namespace: ns, Verb: "list", Group: "discovery.k8s.io", Resource: "endpointslices"}, true},
				{authzv1.ResourceAttributes{Namespace: ns, Verb: "watch", Group: "discovery.k8s.io", Resource: "endpointslices"}, true},
				{authzv1.ResourceAttributes{Namespace: ns, Verb: "create", Group: "discovery.k8s.io", Resource: "endpointslices"}, false},
				{authzv1.ResourceAttributes{Namespace: ns, Verb: "delete", Group: "discovery.k8s.io", Resource: "endpointslices"}, false},
				{authzv1.ResourceAttributes{Namespace: other, Verb: "list", Group: "discovery.k8s.io", Resource: "endpointslices"}, false},
				{authzv1.ResourceAttributes{Namespace: "", Verb: "list", Group: "discovery.k8s.io", Resource: "endpointslices"}, false},
				{authzv1.ResourceAttributes{Namespace: ns, Verb: "list", Resource: "endpoints"}, false},
				{authzv1.ResourceAttributes{Namespace: ns, Verb: "list", Resource: "pods"}, false},
				{authzv1.ResourceAttributes{Namespace: ns, Verb: "get", Resource: "pods"}, false},
				{authzv1.ResourceAttributes{Namespace: ns, Verb: "get", Resource: "secrets"}, false},
				{authzv1.ResourceAttributes{Namespace: ns, Verb: "list", Resource: "services"}, false},
				{authzv1.ResourceAttributes{Namespace: ns, Verb: "list", Resource: "configmaps"}, false},
			}
			for _, tt := range tests {
				attr := tt.attr
				sar := &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
					User: user, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
					ResourceAttributes: &attr}}
				got, err := cp.client.AuthorizationV1().SubjectAccessReviews().Create(context.Background(), sar, metav1.CreateOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if got.Status.Allowed != tt.allow {
					t.Errorf("%s %s %s/%s in %q: allowed %v, want %v (%s)", user, attr.Verb, attr.Group, attr.Resource, attr.Namespace,
						got.Status.Allowed, tt.allow, got.Status.Reason)
				}
			}
		})
	}
}

// writeValues writes a values file for the test and returns its path.
func writeValues(t testing.TB, yaml string) string {
	t.Helper()
	p := t.TempDir() + "/values.yaml"
	if err := os.WriteFile(p, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
