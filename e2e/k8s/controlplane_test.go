package k8s

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/corralcache/corral/e2e/k8s/internal/kubetest"
)

// controlPlane is etcd, kube-apiserver and kube-controller-manager (the endpointslice and
// serviceaccount controllers only) running as processes of this test binary. No kubelet and no
// scheduler: the tests write Pod status themselves.
type controlPlane struct {
	dir      string // certificates, tokens, kubeconfig, etcd's data, logs
	host     string // the address the API server binds: a Docker network's gateway, or 127.0.0.1
	port     int
	caPEM    []byte
	adminTok string

	rest   *rest.Config // as admin (system:masters)
	client kubernetes.Interface
	dyn    dynamic.Interface

	mu    sync.Mutex
	procs []*proc // guards procs
}

// proc is a process of the control plane; done is closed once it has exited.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{}
}

// kubeconfigPath is the admin kubeconfig, for helm and the controller-manager.
func (cp *controlPlane) kubeconfigPath() string { return filepath.Join(cp.dir, "admin.kubeconfig") }

// server is the API server's URL.
func (cp *controlPlane) server() string {
	return "https://" + net.JoinHostPort(cp.host, strconv.Itoa(cp.port))
}

// startControlPlane starts the three processes from the binaries in bin, the API server bound
// to host. It returns once the API server answers /readyz and the controllers have made the
// default service account.
func startControlPlane(ctx context.Context, bin, host string) (cp *controlPlane, err error) {
	dir, err := os.MkdirTemp("", "corral-k8s-")
	if err != nil {
		return nil, err
	}
	cp = &controlPlane{dir: dir, host: host}
	defer func() {
		if err != nil {
			cp.stop()
		}
	}()

	// A CA, and a serving certificate for the addresses clients use: host (the containers reach
	// the API server at their network's gateway), loopback and the kubernetes Service's IP.
	caKey, caCert, caPEM, err := kubetest.NewCA("corral-e2e-ca")
	if err != nil {
		return nil, err
	}
	cp.caPEM = caPEM
	if err := kubetest.WriteCert(filepath.Join(dir, "serving"), caKey, caCert, "kube-apiserver", x509.ExtKeyUsageServerAuth,
		[]net.IP{net.ParseIP(host), net.ParseIP("127.0.0.1"), net.ParseIP("10.0.0.1")},
		[]string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"}); err != nil {
		return nil, err
	}
	// The service account token signing key (TokenRequest).
	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	saPub, _ := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err := kubetest.WritePEM(filepath.Join(dir, "sa.key"), "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(saKey)); err != nil {
		return nil, err
	}
	if err := kubetest.WritePEM(filepath.Join(dir, "sa.pub"), "PUBLIC KEY", saPub); err != nil {
		return nil, err
	}
	cp.adminTok = kubetest.RandomToken()
	if err := os.WriteFile(filepath.Join(dir, "tokens.csv"),
		[]byte(cp.adminTok+",admin,admin-uid,system:masters\n"), 0o600); err != nil {
		return nil, err
	}

	ports, err := kubetest.FreePorts("127.0.0.1", 3)
	if err != nil {
		return nil, err
	}
	etcdClient, etcdPeer := ports[0], ports[1]
	cp.port = ports[2]
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", etcdClient)
	if err := cp.spawn(filepath.Join(bin, "etcd"), "etcd",
		"--data-dir", filepath.Join(dir, "etcd"),
		"--listen-client-urls", etcdURL, "--advertise-client-urls", etcdURL,
		"--listen-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", etcdPeer),
		"--initial-advertise-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", etcdPeer),
		"--initial-cluster", fmt.Sprintf("default=http://127.0.0.1:%d", etcdPeer),
		"--listen-metrics-urls", "", "--log-level", "warn",
		"--unsafe-no-fsync", // a test's data: durability is not the point, speed on a busy disk is
	); err != nil {
		return nil, err
	}
	if err := cp.spawn(filepath.Join(bin, "kube-apiserver"), "kube-apiserver",
		"--etcd-servers", etcdURL,
		"--bind-address", host, "--advertise-address", host, "--secure-port", strconv.Itoa(cp.port),
		"--tls-cert-file", filepath.Join(dir, "serving.crt"), "--tls-private-key-file", filepath.Join(dir, "serving.key"),
		"--cert-dir", filepath.Join(dir, "certs"),
		"--token-auth-file", filepath.Join(dir, "tokens.csv"),
		"--authorization-mode", "RBAC",
		"--service-account-issuer", "https://kubernetes.default.svc",
		"--service-account-key-file", filepath.Join(dir, "sa.pub"),
		"--service-account-signing-key-file", filepath.Join(dir, "sa.key"),
		"--service-cluster-ip-range", "10.0.0.0/24",
		"--enable-priority-and-fairness=false",
		"--profiling=false",
	); err != nil {
		return nil, err
	}
	cp.rest = &rest.Config{Host: cp.server(), BearerToken: cp.adminTok,
		TLSClientConfig: rest.TLSClientConfig{CAData: caPEM}, QPS: 100, Burst: 200}
	if err := kubetest.WaitHTTP(ctx, cp.rest, "/readyz", 60*time.Second); err != nil {
		return nil, fmt.Errorf("kube-apiserver: %w\n%s", err, cp.logTail("kube-apiserver"))
	}
	if err := os.WriteFile(cp.kubeconfigPath(), kubetest.Kubeconfig(cp.server(), caPEM, cp.adminTok, "default"), 0o600); err != nil {
		return nil, err
	}
	if err := cp.spawn(filepath.Join(bin, "kube-controller-manager"), "kube-controller-manager",
		"--kubeconfig", cp.kubeconfigPath(),
		"--controllers", "endpointslice,serviceaccount",
		"--leader-elect=false", "--secure-port", "0",
		"--concurrent-service-endpoint-syncs", "5",
		"--endpointslice-updates-batch-period", "0s",
	); err != nil {
		return nil, err
	}
	if cp.client, err = kubernetes.NewForConfig(cp.rest); err != nil {
		return nil, err
	}
	if cp.dyn, err = dynamic.NewForConfig(cp.rest); err != nil {
		return nil, err
	}
	// The serviceaccount controller makes "default" in every namespace; that it did says the
	// controller-manager is up.
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, err := cp.client.CoreV1().ServiceAccounts("default").Get(ctx, "default", getOpts); err == nil {
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("kube-controller-manager made no default service account in 60s\n%s", cp.logTail("kube-controller-manager"))
		}
		time.Sleep(100 * time.Millisecond)
	}
	return cp, nil
}

// spawn starts a process whose output goes to dir/name.log. It dies with the test binary
// (Pdeathsig), so a crashed test leaves nothing running.
func (cp *controlPlane) spawn(path, name string, args ...string) error {
	logf, err := os.Create(filepath.Join(cp.dir, name+".log"))
	if err != nil {
		return err
	}
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	cp.mu.Lock()
	cp.procs = append(cp.procs, p)
	cp.mu.Unlock()
	go func() { cmd.Wait(); logf.Close(); close(p.done) }()
	return nil
}

// logTail is the end of a process's log, for failure messages.
func (cp *controlPlane) logTail(name string) string {
	b, _ := os.ReadFile(filepath.Join(cp.dir, name+".log"))
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// stop ends the processes, newest first, and removes dir.
func (cp *controlPlane) stop() {
	cp.mu.Lock()
	procs := cp.procs
	cp.procs = nil
	cp.mu.Unlock()
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
	os.RemoveAll(cp.dir)
}
