// Package k8s finds corral's members through the Kubernetes API: a seed
// "k8s://namespace/service" names the members behind a Service, read from the Service's
// EndpointSlices (discovery.k8s.io/v1) with a client-go informer. Importing the package
// registers the scheme with package peer, as a database/sql driver registers itself; a program
// that does not import it links no client-go.
//
// # Usage
//
//	import _ "github.com/corralcache/corral/peer/k8s"
//
//	cfg := corral.DefaultConfig()       // fixed ports: the EndpointSlices name every member at one
//	cfg.Join = []string{"k8s://corral"} // the Service "corral" in this pod's namespace
//	node, err := corral.New(cfg)
//
// The caller must:
//
//  1. Run where the API server can be reached: in a pod (in-cluster config, from the pod's service
//     account), or with KUBECONFIG naming a kubeconfig file, which wins when it is set.
//  2. Grant the pod's service account get, list and watch on endpointslices in the Service's
//     namespace: a Role and a RoleBinding, never a ClusterRole (the chart charts/corral makes
//     them when discovery.mode is k8s). Endpoints, Pods and other namespaces are never read.
//  3. Publish the members' not-ready addresses: a Service with publishNotReadyAddresses: true,
//     because a member must join before it is ready (readiness waits for the cluster).
//  4. Set POD_NAMESPACE from the Downward API (fieldRef metadata.namespace) for the short form
//     "k8s://service"; in a pod without it, the service account's namespace file is read.
//
// # Definitions
//
// Target: "namespace/service", or "service" for this pod's namespace, optionally followed by
// ":port" where port is a number or the name of a port of the Service. Without it, the port named
// "tcp-gossip" (the chart's name) is taken from each EndpointSlice, and 7946 (peer.DefaultPort)
// when a slice has no port of that name.
//
// Addresses: every endpoint of every EndpointSlice labelled kubernetes.io/service-name=service in
// the namespace, of the IP family of POD_IP when it is set and of both otherwise (a dual-stack
// Service has a slice per family; FQDN slices are skipped), each endpoint's first
// address (the only one the endpointslice controller writes), deduplicated across slices (an
// endpoint may sit in two slices for a moment while the controller rebalances), sorted, IPv6 as
// "[ip]:port". Ready and not-ready endpoints are joined alike; endpoints marked terminating (a
// pod being deleted) are not, since that member is leaving.
//
// Changes: the informer lists once and then watches; after a broken watch or an expired resource
// version it lists again, and every change of the address set is reported to package peer,
// which joins new addresses at once (see peer's "Discovery schemes"). List and watch failures are
// logged at Warn (a refused list names the RBAC the pod lacks) and retried with client-go's
// backoff, up to about 30s apart.
package k8s
