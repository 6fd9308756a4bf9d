// Package node runs corral's chart on a real Kubernetes node, started and torn down by the
// tests themselves, and tries it as a platform engineer would: helm install --wait, kubectl
// port-forward to /metrics and to the debug page in a browser, kubectl rollout restart, a helm
// upgrade that changes the configuration, kubectl scale, kubectl drain against the chart's
// PodDisruptionBudget and crashed pods — all under a steady load of hot-key reads from a pod in
// the cluster, counting failed requests and the origin's calls — in server mode with both
// discovery modes, and in library mode with the catalog example (examples/catalog).
//
// Run it with `make e2e-k8s` from the repository root (part of `make e2e` and of CI). It needs
// root, Docker (to build the images) and Debian's containerd, runc and containernetworking-plugins;
// without them the tests skip, and with CI set they fail. One test alone starts and tears down the
// node too: `cd e2e/k8s && go test -race -count=1 -v -run TestServerBackups ./node` (the chart
// with server.backups=1, whose crashes must cost no origin call: about a minute warm).
//
// # The node
//
// One node, all of it processes of the test binary, every part real and built here:
//
//	part                        from
//	etcd, kube-apiserver,       k8s.io/kubernetes and etcd as Go modules (../tools), built by
//	kube-controller-manager,    ../build.sh and cached by version under $HOME/.cache/corral-e2e
//	kube-scheduler, kubelet,
//	kube-proxy, kubectl, helm
//	CoreDNS                     github.com/coredns/coredns, with only its bind, ready, errors,
//	                            cache and kubernetes plugins (../tools/coredns)
//	container runtime           Debian's containerd (a second instance: own root, state and
//	                            socket under the work directory; Docker's is never touched) and runc
//	CNI                         Debian's containernetworking-plugins: bridge, host-local, loopback
//	images                      static Go binaries FROM scratch: docker build, docker save,
//	                            ctr images import; the pause image too (images/pause); nothing
//	                            is pulled (imagePullPolicy: Never)
//
// The API server, the kubelet and CoreDNS listen on the node's IP, 10.244.77.1, the address of a
// bridge of the tests' own (corral-e2e0, pods in 10.244.77.0/24). kube-proxy maps Service IPs
// (10.96.77.0/24, routed to the bridge so that nothing leaves the host) with iptables, so pods
// reach the API server through the kubernetes Service as on any cluster: k8s:// discovery runs
// from real pods with their service account token. The kubelet authenticates as
// system:node:corral-e2e, under the Node authorizer.
//
// Why one node: a second kubelet on the same host would share the host paths the kubelet uses
// whatever its configuration, and one node already runs rollouts, scaling, PodDisruptionBudgets
// and drains of a 3-replica workload. A drain of one node cannot complete while the evicted
// pods' replacements have nowhere to go: the test lets the PodDisruptionBudget refuse the
// second eviction, checks that it did, then uncordons the node, as a cluster with room
// elsewhere would place the replacements, and the drain finishes.
//
// Cold builds, measured once (2 cores shared with other engineers' builds and -race suites, load
// 6 to 35; build.sh runs at nice 10, so these are upper bounds), each binary in the order built
// with an empty Go build cache: etcd 3 min, helm 6.5 min, kube-controller-manager 32 min (with
// kubelet and CoreDNS building beside it), kube-apiserver 1.6 min, kube-scheduler 1 min,
// kubectl 2.8 min, kube-proxy 0.8 min (these four reuse kube-controller-manager's packages),
// kubelet 8 min, CoreDNS 11 min: 47 minutes of wall time for all. On a fresh machine beside
// the other suites (load 3 to 9), 48.5 minutes, 25 of them kube-controller-manager's; the
// kubelet, kube-proxy, scheduler, apiserver and kubectl take a minute or less each after it.
// Warm: under a second. A warm run of the node's tests takes 4 to 8 minutes, most of it the
// scenarios themselves.
//
// # Strict mode
//
// Failed requests are held to 0 in every graceful scenario. Origin calls for hot keys are held
// to corral's contract (0 for a graceful scenario; for a crash, one per key the crashed pod
// owned) with CORRAL_E2E_STRICT=1; without it at most 2 more, none twice for one key — a
// CPU-starved node has been seen to cost 1 or 2 where the contract says 0 (see
// docs/testing.md), while a hand-off or join that did not work costs most hot keys.
//
// # What the node changes on the host, and how it is undone
//
// The kubelet sets vm.overcommit_memory, kernel.panic, kernel.panic_on_oops and kernel.keys.*;
// the node adds a bridge, a route, an iptables FORWARD rule (Docker's FORWARD policy drops
// bridged traffic here) and kube-proxy's chains; cgroups under corral-e2e in every hierarchy;
// mounts under the work directory ($TMPDIR/corral-e2e-node); and host paths the kubelet and
// containerd use whatever their configuration (/var/lib/kubelet/device-plugins,
// /var/log/containers, /var/lib/cni, /run/containerd/s). Before any change, the writable
// sysctls and which of those paths exist are recorded in the work directory; undo kills the
// processes (newest first, then the runtime's shims, then whatever is left in the pods'
// cgroups), unmounts deepest first, removes the cgroups, runs kube-proxy --cleanup, deletes the
// rule and the bridge, writes back every sysctl that changed and removes the paths that did
// not exist. It runs when the tests end; when the test binary dies any other way (a panic,
// SIGINT or SIGTERM, its -timeout, SIGKILL) a reaper process started with it — in a process
// group of its own, ignoring those signals — sees it go and runs undo; and a run that finds the
// work directory of a run that left none of them undoes it first. One node at a time per host:
// a second run waits for the first (an flock, which the kernel drops with its last holder).
//
// # Reading a failure
//
// A failed test logs its namespace's pods, events (oldest first) and the pods' logs (the
// previous container's too when one restarted), and the last lines of the kubelet's log; the
// logs of every process of the node are kept in testdata/out/logs. Screenshots of the debug
// page and the figures of the run (testdata/out/results.md) are there too.
package node
