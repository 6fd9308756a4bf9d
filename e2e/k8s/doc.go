// Package k8s holds corral's Kubernetes tests, against a real control plane built from Go
// modules (build.sh): helm lint and helm template over a matrix of values applied with
// server-side apply and strict field validation, the discovery Role checked with
// SubjectAccessReviews, k8s:// discovery between corral containers that the test registers as
// Pods (acting as their kubelet), the chart's PromQL, and manifests/ kept equal to the chart's
// default rendering, and the Go lines of the README, of go doc corral and of the chart's
// library-mode notes built and run as three replicas that must form one cluster (as root:
// each runs in a mount namespace of its own). Package node (e2e/k8s/node) runs the chart on a real node: kubelet,
// container runtime, CNI, cluster DNS and kube-proxy.
//
// Run with `make e2e-k8s` (part of `make e2e`) from the repository root. Without Docker the tests
// that need containers skip, and so does the snippets' test without root, unless CI is set.
package k8s
