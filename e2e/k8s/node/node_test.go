package node

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/template"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/corralcache/corral/e2e/k8s/internal/kubetest"
)

// node is one real Kubernetes node and its control plane, all processes of this test binary:
// etcd, kube-apiserver, kube-controller-manager, kube-scheduler, a containerd of its own (Debian's,
// with its own root, state and socket), CoreDNS, kube-proxy and the kubelet, with the bridge CNI
// plugin (Debian's containernetworking-plugins) on a bridge of its own.
type node struct {
	tools string // build.sh's directory
	state *hostState

	apiPort  int
	caPEM    []byte
	adminTok string
	rest     *rest.Config
	client   kubernetes.Interface

	mu    sync.Mutex
	procs []*proc // guards procs
}

// proc is a process of the node; done is closed once it has exited.
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
}

func (n *node) path(parts ...string) string {
	return filepath.Join(append([]string{workDir}, parts...)...)
}

func (n *node) server() string {
	return "https://" + net.JoinHostPort(bridgeIP, strconv.Itoa(n.apiPort))
}

func (n *node) kubeconfig() string     { return n.path("admin.kubeconfig") }
func (n *node) containerdSock() string { return n.path("containerd", "containerd.sock") }

// startNode brings the node up on a host that undo has cleaned, and returns once the node is
// Ready and cluster DNS answers. Every change to the host is recorded before it is made.
func startNode(ctx context.Context, tools string) (n *node, err error) {
	n = &node{tools: tools}
	if n.state, err = recordHost(tools); err != nil {
		return nil, err
	}
	for _, d := range []string{"logs", "etcd", "kubelet", "containerd", "cni", "cni-state", "pod-logs", "volume-plugins"} {
		if err := os.MkdirAll(n.path(d), 0o755); err != nil {
			return nil, err
		}
	}
	if err := n.writeCredentials(); err != nil {
		return nil, err
	}
	if err := n.setUpNetwork(); err != nil {
		return nil, err
	}
	if err := n.setUpCgroups(); err != nil {
		return nil, err
	}

	ports, err := kubetest.FreePorts("", 8)
	if err != nil {
		return nil, err
	}
	etcdClient, etcdPeer, kubeletPort, kubeletHealthz, proxyHealthz, proxyMetrics, dnsReady := ports[0], ports[1], ports[2], ports[3], ports[4], ports[5], ports[6]
	n.apiPort = ports[7]

	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", etcdClient)
	if err := n.spawn("etcd", filepath.Join(tools, "etcd"),
		"--data-dir", n.path("etcd"),
		"--listen-client-urls", etcdURL, "--advertise-client-urls", etcdURL,
		"--listen-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", etcdPeer),
		"--initial-advertise-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", etcdPeer),
		"--initial-cluster", fmt.Sprintf("default=http://127.0.0.1:%d", etcdPeer),
		"--listen-metrics-urls", "", "--log-level", "warn",
		"--unsafe-no-fsync", // a test's data: durability is not the point, speed on a busy disk is
	); err != nil {
		return nil, err
	}
	// The API server listens on the bridge, where the host and the pods (through the
	// kubernetes Service, which kube-proxy maps here) reach it alike. Its advertised address is
	// not loopback, so the default endpoint reconciler keeps that Service's endpoint.
	if err := n.spawn("kube-apiserver", filepath.Join(tools, "kube-apiserver"),
		"--etcd-servers", etcdURL,
		"--bind-address", bridgeIP, "--advertise-address", bridgeIP, "--secure-port", strconv.Itoa(n.apiPort),
		"--tls-cert-file", n.path("serving.crt"), "--tls-private-key-file", n.path("serving.key"),
		"--cert-dir", n.path("apiserver-certs"),
		"--token-auth-file", n.path("tokens.csv"),
		"--authorization-mode", "Node,RBAC",
		"--kubelet-client-certificate", n.path("kubelet-client.crt"), "--kubelet-client-key", n.path("kubelet-client.key"),
		"--kubelet-preferred-address-types", "InternalIP",
		"--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file", n.path("sa.pub"),
		"--service-account-signing-key-file", n.path("sa.key"),
		"--service-cluster-ip-range", serviceCIDR,
		"--enable-priority-and-fairness=false",
		"--profiling=false",
	); err != nil {
		return nil, err
	}
	n.rest = &rest.Config{Host: n.server(), BearerToken: n.adminTok,
		TLSClientConfig: rest.TLSClientConfig{CAData: n.caPEM}, QPS: 100, Burst: 200}
	if err := kubetest.WaitHTTP(ctx, n.rest, "/readyz", 90*time.Second); err != nil {
		return nil, fmt.Errorf("kube-apiserver: %w\n%s", err, n.logTail("kube-apiserver", 30))
	}
	if err := os.WriteFile(n.kubeconfig(), kubetest.Kubeconfig(n.server(), n.caPEM, n.adminTok, "default"), 0o600); err != nil {
		return nil, err
	}
	if n.client, err = kubernetes.NewForConfig(n.rest); err != nil {
		return nil, err
	}

	// The controllers a Deployment, a drain and a namespace deletion need: nodelifecycle lifts
	// the node's not-ready taint, disruption keeps PodDisruptionBudgets' status (evictions read
	// it), root-ca-cert-publisher makes the kube-root-ca.crt ConfigMap that service account
	// token volumes mount.
	if err := n.spawn("kube-controller-manager", filepath.Join(tools, "kube-controller-manager"),
		"--kubeconfig", n.kubeconfig(),
		"--controllers", "deployment,replicaset,statefulset,endpointslice,serviceaccount,namespace,garbagecollector,disruption,podgc,root-ca-cert-publisher,nodelifecycle",
		"--root-ca-file", n.path("ca.crt"),
		"--leader-elect=false", "--secure-port", "0",
		"--concurrent-service-endpoint-syncs", "5",
		"--endpointslice-updates-batch-period", "0s",
	); err != nil {
		return nil, err
	}
	if err := n.spawn("kube-scheduler", filepath.Join(tools, "kube-scheduler"),
		"--kubeconfig", n.kubeconfig(), "--leader-elect=false",
		"--bind-address", "127.0.0.1", "--secure-port", strconv.Itoa(mustFreePort()),
		"--cert-dir", n.path("scheduler-certs"), // its self-signed serving certificate, else under /var/run
	); err != nil {
		return nil, err
	}

	if err := n.startContainerd(ctx); err != nil {
		return nil, err
	}
	if err := n.startCoreDNS(ctx, dnsReady); err != nil {
		return nil, err
	}
	if err := n.startKubeProxy(proxyHealthz, proxyMetrics); err != nil {
		return nil, err
	}
	if err := n.startKubelet(kubeletPort, kubeletHealthz); err != nil {
		return nil, err
	}
	return n, nil
}

// writeCredentials makes the CA, the API server's serving certificate, its client certificate
// for the kubelet, the service account signing key and the token file: the admin (for the
// tests, helm, kubectl and the controllers) and the kubelet's node identity (so the Node
// authorizer applies to it as on a real cluster).
func (n *node) writeCredentials() error {
	caKey, ca, caPEM, err := kubetest.NewCA("corral-e2e-node-ca")
	if err != nil {
		return err
	}
	n.caPEM = caPEM
	if err := os.WriteFile(n.path("ca.crt"), caPEM, 0o644); err != nil {
		return err
	}
	if err := kubetest.WriteCert(n.path("serving"), caKey, ca, "kube-apiserver", x509.ExtKeyUsageServerAuth,
		[]net.IP{net.ParseIP(bridgeIP), net.ParseIP("127.0.0.1"), net.ParseIP(kubeSvcIP)},
		[]string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"}); err != nil {
		return err
	}
	if err := kubetest.WriteCert(n.path("kubelet-client"), caKey, ca, "kube-apiserver-kubelet-client", x509.ExtKeyUsageClientAuth, nil, nil); err != nil {
		return err
	}
	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	saPub, _ := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err := kubetest.WritePEM(n.path("sa.key"), "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(saKey)); err != nil {
		return err
	}
	if err := kubetest.WritePEM(n.path("sa.pub"), "PUBLIC KEY", saPub); err != nil {
		return err
	}
	n.adminTok = kubetest.RandomToken()
	kubeletTok := kubetest.RandomToken()
	tokens := fmt.Sprintf("%s,admin,admin-uid,system:masters\n%s,system:node:%s,node-uid,system:nodes\n", n.adminTok, kubeletTok, nodeName)
	if err := os.WriteFile(n.path("tokens.csv"), []byte(tokens), 0o600); err != nil {
		return err
	}
	return os.WriteFile(n.path("kubelet.kubeconfig"), kubetest.Kubeconfig("https://"+net.JoinHostPort(bridgeIP, "PORT"), caPEM, kubeletTok, "default"), 0o600)
}

// setUpNetwork makes the bridge the pods' veths join (the CNI bridge plugin would make it too,
// but the API server listens on its address before any pod exists), routes the Service range
// to it, so that a packet to a cluster IP kube-proxy has not mapped stays on the bridge instead
// of leaving the host by its default route, and lets bridged traffic through Docker's FORWARD
// policy.
func (n *node) setUpNetwork() error {
	for _, args := range [][]string{
		{"link", "add", bridgeName, "type", "bridge"},
		{"addr", "add", bridgeIP + "/24", "dev", bridgeName},
		{"link", "set", bridgeName, "up"},
		{"route", "add", serviceCIDR, "dev", bridgeName},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	n.state.Forward = true
	if err := n.state.save(); err != nil {
		return err
	}
	if out, err := exec.Command("iptables", forwardRule("-I")...).CombinedOutput(); err != nil {
		return fmt.Errorf("iptables %s: %v: %s", strings.Join(forwardRule("-I"), " "), err, out)
	}
	// A pod's view of its own network: the bridge plugin (hairpin on, so a pod reaches itself
	// through a Service), host-local addresses from podCIDR, the node's IP as the gateway. No
	// masquerading: pods talk to the node and to each other only.
	conf := fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": "corral-e2e",
  "plugins": [
    {"type": "bridge", "bridge": %q, "isGateway": true, "ipMasq": false, "hairpinMode": true,
     "ipam": {"type": "host-local", "dataDir": %q, "ranges": [[{"subnet": %q, "gateway": %q}]],
              "routes": [{"dst": "0.0.0.0/0"}]}},
    {"type": "loopback"}
  ]
}
`, bridgeName, n.path("cni-state"), podCIDR, bridgeIP)
	return os.WriteFile(n.path("cni", "10-corral-e2e.conflist"), []byte(conf), 0o644)
}

// setUpCgroups makes the kubelet's cgroupRoot in every cgroup v1 hierarchy; cpuset's needs the
// CPUs and memory nodes of its parent before anything can join it.
func (n *node) setUpCgroups() error {
	hier, _ := filepath.Glob("/sys/fs/cgroup/*")
	for _, h := range hier {
		if fi, err := os.Stat(filepath.Join(h, "cgroup.procs")); err != nil || fi.IsDir() {
			continue
		}
		d := filepath.Join(h, cgroupRoot)
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
		if filepath.Base(h) == "cpuset" {
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				b, err := os.ReadFile(filepath.Join(h, f))
				if err != nil {
					return err
				}
				if err := os.WriteFile(filepath.Join(d, f), b, 0o644); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

var containerdConfig = template.Must(template.New("").Parse(`version = 2
root = "{{.Dir}}/root"
state = "{{.Dir}}/state"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = "{{.Sock}}"
[ttrpc]
  address = "{{.Sock}}.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = "{{.Dir}}/opt"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{{.Pause}}"
  # No CAP_SYS_RESOURCE here: containers may not lower their OOM score below the runtime's.
  restrict_oom_score_adj = true
  disable_apparmor = true
  netns_mounts_under_state_dir = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "{{.Dir}}/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "{{.CNI}}"
    max_conf_num = 1
`))

// startContainerd starts the node's own containerd: Debian's binary, every directory and socket
// under workDir, Docker's containerd untouched.
func (n *node) startContainerd(ctx context.Context) error {
	dir := n.path("containerd")
	var b bytes.Buffer
	containerdConfig.Execute(&b, map[string]string{"Dir": dir, "Sock": n.containerdSock(), "Pause": pauseImage, "CNI": n.path("cni")})
	if err := os.WriteFile(filepath.Join(dir, "config.toml"), b.Bytes(), 0o644); err != nil {
		return err
	}
	n.state.Socket = n.containerdSock()
	if err := n.spawn("containerd", "/usr/bin/containerd", "--config", filepath.Join(dir, "config.toml"), "--log-level", "warn"); err != nil {
		return err
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		if err := exec.CommandContext(ctx, "ctr", "--address", n.containerdSock(), "version").Run(); err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("containerd did not answer in 60s\n%s", n.logTail("containerd", 30))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// ctr runs containerd's own client against the node's containerd, in the kubelet's namespace.
func (n *node) ctr(args ...string) ([]byte, error) {
	return exec.Command("ctr", append([]string{"--address", n.containerdSock(), "--namespace", "k8s.io"}, args...)...).CombinedOutput()
}

// startCoreDNS runs cluster DNS on the node's IP, port 53: the kubelet gives pods that address
// as their nameserver. It answers cluster.local (and reverse lookups) from the API; other names
// are refused, since nothing here may resolve or reach the outside.
func (n *node) startCoreDNS(ctx context.Context, readyPort int) error {
	corefile := fmt.Sprintf(`cluster.local:53 in-addr.arpa:53 ip6.arpa:53 {
    bind %s
    ready 127.0.0.1:%d
    errors
    cache 5
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig %s
        pods insecure
        ttl 5
    }
}
`, bridgeIP, readyPort, n.kubeconfig())
	if err := os.WriteFile(n.path("Corefile"), []byte(corefile), 0o644); err != nil {
		return err
	}
	if err := n.spawn("coredns", filepath.Join(n.tools, "coredns"), "-conf", n.path("Corefile")); err != nil {
		return err
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		if resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/ready", readyPort)); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("CoreDNS not ready in 60s\n%s", n.logTail("coredns", 30))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// startKubeProxy maps Service IPs to pods with iptables. Its conntrack and localhost-NodePort
// settings are the ones that leave the host's sysctls alone.
func (n *node) startKubeProxy(healthz, metrics int) error {
	conf := fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: %s
hostnameOverride: %s
mode: iptables
clusterCIDR: %s
healthzBindAddress: 127.0.0.1:%d
metricsBindAddress: 127.0.0.1:%d
nodePortAddresses: ["%s/32"]
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
  udpTimeout: 0s
  udpStreamTimeout: 0s
iptables:
  localhostNodePorts: false
  minSyncPeriod: 0s
  syncPeriod: 30s
`, n.kubeconfig(), nodeName, podCIDR, healthz, metrics, bridgeIP)
	if err := os.WriteFile(n.path("kube-proxy.yaml"), []byte(conf), 0o644); err != nil {
		return err
	}
	return n.spawn("kube-proxy", filepath.Join(n.tools, "kube-proxy"), "--config", n.path("kube-proxy.yaml"))
}

// startKubelet starts the kubelet and waits for its node to be Ready. The settings each fix
// what this kind of host lacks: cgroup v1 (failCgroupV1 false, the cgroupfs driver with
// containerd 1.6), swap is not off, no systemd; eviction thresholds are low so that a busy
// disk does not evict the tests' pods.
func (n *node) startKubelet(port, healthz int) error {
	kc, err := os.ReadFile(n.path("kubelet.kubeconfig"))
	if err != nil {
		return err
	}
	kc = bytes.Replace(kc, []byte(":PORT"), []byte(":"+strconv.Itoa(n.apiPort)), 1)
	if err := os.WriteFile(n.path("kubelet.kubeconfig"), kc, 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(n.path("resolv.conf"), nil, 0o644); err != nil {
		return err
	}
	conf := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %[1]s
port: %[2]d
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: %[3]d
containerRuntimeEndpoint: unix://%[4]s
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: /%[5]s
failSwapOn: false
makeIPTablesUtilChains: false
protectKernelDefaults: false
podLogsDir: %[6]s
volumePluginDir: %[7]s
clusterDNS: [%[1]s]
clusterDomain: cluster.local
resolvConf: %[8]s
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: %[9]s}
authorization:
  mode: AlwaysAllow
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%%
  nodefs.inodesFree: 1%%
  imagefs.available: 1%%
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
rotateCertificates: false
shutdownGracePeriod: 0s
containerLogMaxSize: 10Mi
`, bridgeIP, port, healthz, n.containerdSock(), cgroupRoot, n.path("pod-logs"), n.path("volume-plugins"),
		n.path("resolv.conf"), n.path("ca.crt"))
	if err := os.WriteFile(n.path("kubelet.yaml"), []byte(conf), 0o644); err != nil {
		return err
	}
	return n.spawn("kubelet", filepath.Join(n.tools, "kubelet"),
		"--config", n.path("kubelet.yaml"),
		"--kubeconfig", n.path("kubelet.kubeconfig"),
		"--root-dir", n.path("kubelet"),
		"--cert-dir", n.path("kubelet", "pki"),
		"--hostname-override", nodeName,
		"--node-ip", bridgeIP,
		"--v", "2",
	)
}

// spawn starts a process whose output goes to workDir/logs/name.log, and records it before
// anything else can happen. It dies with the test binary (Pdeathsig); the reaper cleans up
// after it.
func (n *node) spawn(name, path string, args ...string) error {
	out, err := os.Create(n.path("logs", name+".log"))
	if err != nil {
		return err
	}
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		out.Close()
		return fmt.Errorf("start %s: %w", name, err)
	}
	exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", cmd.Process.Pid))
	n.state.Procs = append(n.state.Procs, procRecord{Name: name, Pid: cmd.Process.Pid, Exe: exe})
	if err := n.state.save(); err != nil {
		return err
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{})}
	n.mu.Lock()
	n.procs = append(n.procs, p)
	n.mu.Unlock()
	go func() { cmd.Wait(); out.Close(); close(p.done) }()
	return nil
}

// logTail is the last lines of a process's log.
func (n *node) logTail(name string, lines int) string {
	b, _ := os.ReadFile(n.path("logs", name+".log"))
	return lastLines(string(b), lines)
}

// exited names the node's processes that have ended: a node whose kubelet died cannot pass a
// test, and the failure should say so first.
func (n *node) exited() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []string
	for _, p := range n.procs {
		select {
		case <-p.done:
			out = append(out, p.name)
		default:
		}
	}
	return out
}

// stop ends the processes gracefully, newest first (the kubelet before the runtime), and then
// undoes the node.
func (n *node) stop() {
	n.mu.Lock()
	procs := n.procs
	n.procs = nil
	n.mu.Unlock()
	for i := len(procs) - 1; i >= 0; i-- {
		p := procs[i]
		p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			p.cmd.Process.Kill()
			<-p.done
		}
	}
	undo()
}

func mustFreePort() int {
	p, err := kubetest.FreePorts("", 1)
	if err != nil {
		panic(err)
	}
	return p[0]
}
