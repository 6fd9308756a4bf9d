// Package k8s holds corral's Kubernetes tests, against a real control plane built from Go
// modules (build.sh): helm lint and helm template over a matrix of values applied with
// server-side apply and strict field validation, the discovery Role checked with
// SubjectAccessReviews, k8s:// discovery between corral containers that the test registers as
// Pods (acting as their kubelet), the chart's PromQL, and manifests/ kept equal to the chart's
// default rendering. Package node (e2e/k8s/node) runs the chart on a real node: kubelet,
// container runtime, CNI, cluster DNS and kube-proxy.
//
// Run with `make e2e-k8s` (part of `make e2e`) from the repository root. Without Docker the tests
// that need containers skip, unless CI is set.
package k8s
