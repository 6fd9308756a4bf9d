package k8s

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
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
	caKey, caCert, caPEM, err := newCA()
	if err != nil {
		return nil, err
	}
	cp.caPEM = caPEM
	if err := writeServingCert(dir, caKey, caCert, host); err != nil {
		return nil, err
	}
	// The service account token signing key (TokenRequest).
	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	saPub, _ := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err := writePEM(filepath.Join(dir, "sa.key"), "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(saKey)); err != nil {
		return nil, err
	}
	if err := writePEM(filepath.Join(dir, "sa.pub"), "PUBLIC KEY", saPub); err != nil {
		return nil, err
	}
	cp.adminTok = randomToken()
	if err := os.WriteFile(filepath.Join(dir, "tokens.csv"),
		[]byte(cp.adminTok+",admin,admin-uid,system:masters\n"), 0o600); err != nil {
		return nil, err
	}

	ports, err := freePorts(3)
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
	if err := waitHTTP(ctx, cp.rest, "/readyz", 60*time.Second); err != nil {
		return nil, fmt.Errorf("kube-apiserver: %w\n%s", err, cp.logTail("kube-apiserver"))
	}
	if err := os.WriteFile(cp.kubeconfigPath(), kubeconfig(cp.server(), caPEM, cp.adminTok, "default"), 0o600); err != nil {
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

// kubeconfig is a kubeconfig file for server with token, namespace as its default.
func kubeconfig(server string, caPEM []byte, token, namespace string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, `apiVersion: v1
kind: Config
clusters:
- name: e2e
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: e2e
  user:
    token: %s
contexts:
- name: e2e
  context: {cluster: e2e, user: e2e, namespace: %s}
current-context: e2e
`, server, b64(caPEM), token, namespace)
	return b.Bytes()
}

// waitHTTP polls path on the API server until it answers 200 or timeout passes.
func waitHTTP(ctx context.Context, rc *rest.Config, path string, timeout time.Duration) error {
	tr, err := rest.TransportFor(rc)
	if err != nil {
		return err
	}
	c := &http.Client{Transport: tr, Timeout: 2 * time.Second}
	defer c.CloseIdleConnections()
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		req, _ := http.NewRequestWithContext(ctx, "GET", rc.Host+path, nil)
		resp, err := c.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
			err = fmt.Errorf("%s: %s", path, resp.Status)
		}
		last = err
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("not ready in %v: %v", timeout, last)
}

func newCA() (*ecdsa.PrivateKey, *x509.Certificate, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "corral-e2e-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, nil, err
	}
	cert, _ := x509.ParseCertificate(der)
	return key, cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}

func writeServingCert(dir string, caKey *ecdsa.PrivateKey, ca *x509.Certificate, host string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "kube-apiserver"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.ParseIP(host), net.ParseIP("127.0.0.1"), net.ParseIP("10.0.0.1")},
		DNSNames:    []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return err
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	if err := writePEM(filepath.Join(dir, "serving.crt"), "CERTIFICATE", der); err != nil {
		return err
	}
	return writePEM(filepath.Join(dir, "serving.key"), "EC PRIVATE KEY", kder)
}

func writePEM(path, typ string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
}

func randomToken() string {
	b := make([]byte, 24)
	rand.Read(b)
	return fmt.Sprintf("%x", b)
}

// freePorts returns n distinct free TCP ports of 127.0.0.1 (and, for the API server, of its
// host: a port free on one is free on both here, nothing else binds the gateway).
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
