package k8s

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"
)

// render runs helm template for release in namespace with the values files, and decodes the
// objects.
func render(t testing.TB, release, namespace string, values ...string) []*unstructured.Unstructured {
	t.Helper()
	args := []string{"template", release, chartDir, "--namespace", namespace}
	for _, v := range values {
		args = append(args, "--values", v)
	}
	return decodeObjects(t, helm(t, args...))
}

func decodeObjects(t testing.TB, manifest string) []*unstructured.Unstructured {
	t.Helper()
	var objs []*unstructured.Unstructured
	d := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(manifest), 4096)
	for {
		var m map[string]any
		if err := d.Decode(&m); errors.Is(err, io.EOF) {
			return objs
		} else if err != nil {
			t.Fatalf("decode the rendering: %v", err)
		}
		if m != nil {
			objs = append(objs, &unstructured.Unstructured{Object: m})
		}
	}
}

// applyStrict sends every object with server-side apply and strict field validation, so an
// unknown or duplicate field is an error, not a silent drop.
func applyStrict(t testing.TB, objs []*unstructured.Unstructured) {
	t.Helper()
	ctx := context.Background()
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(cp.client.Discovery()))
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			t.Fatalf("%s %s: %v", gvk.Kind, o.GetName(), err)
		}
		body, err := json.Marshal(o.Object)
		if err != nil {
			t.Fatal(err)
		}
		force := true
		opts := metav1.PatchOptions{FieldManager: "corral-e2e", Force: &force, FieldValidation: "Strict"}
		var ri interface {
			Patch(context.Context, string, types.PatchType, []byte, metav1.PatchOptions, ...string) (*unstructured.Unstructured, error)
		} = cp.dyn.Resource(m.Resource)
		if m.Scope.Name() == "namespace" {
			ri = cp.dyn.Resource(m.Resource).Namespace(o.GetNamespace())
		}
		if _, err := ri.Patch(ctx, o.GetName(), types.ApplyPatchType, body, opts); err != nil {
			t.Errorf("apply %s %s/%s: %v", gvk.Kind, o.GetNamespace(), o.GetName(), err)
		}
	}
}

// namespaces counts the namespaces made of each base name: with -count above 1 a test runs
// again against the same control plane, where a namespace cannot be deleted (no namespace
// controller runs), so each run gets a fresh one.
var namespaces = map[string]int{}

// createNamespace creates a namespace named base (base-2, base-3, … on later runs of the test)
// and returns its name.
func createNamespace(t testing.TB, base string) string {
	t.Helper()
	name := base
	if namespaces[base]++; namespaces[base] > 1 {
		name = fmt.Sprintf("%s-%d", base, namespaces[base])
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := cp.client.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
	return name
}

// installCRDs installs the Prometheus Operator's CRDs (testdata's cut-down copies) and waits
// until the API serves them. Applying them again changes nothing.
func installCRDs(t testing.TB) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "crds", "monitoring.coreos.com.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	applyStrict(t, decodeObjects(t, string(b)))
	for _, name := range []string{"servicemonitors", "prometheusrules"} {
		waitFor(t, "CRD "+name+" served", 30*time.Second, func() bool {
			l, err := cp.client.Discovery().ServerResourcesForGroupVersion("monitoring.coreos.com/v1")
			return err == nil && slices.ContainsFunc(l.APIResources, func(r metav1.APIResource) bool { return r.Name == name })
		})
	}
}

func TestHelmLint(t *testing.T) {
	helm(t, "lint", "--strict", chartDir)
	for _, f := range valuesFiles(t) {
		helm(t, "lint", "--strict", chartDir, "--values", f)
	}
}

func valuesFiles(t testing.TB) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "values", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no values files: %v", err)
	}
	return files
}

// Every values file of the matrix renders objects that the API server accepts under strict
// field validation, and that carry what the chart promises.
func TestChartMatrixApplies(t *testing.T) {
	installCRDs(t)
	for _, f := range valuesFiles(t) {
		name := strings.TrimSuffix(filepath.Base(f), ".yaml")
		t.Run(name, func(t *testing.T) {
			ns := createNamespace(t, "m-"+name)
			if name == "server-existing-secret" {
				s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "corral-key", Namespace: ns},
					Data: map[string][]byte{"gossip.key": []byte("0123456789abcdef")}}
				if _, err := cp.client.CoreV1().Secrets(ns).Create(context.Background(), s, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			objs := render(t, "shop", ns, f)
			checkObjects(t, name, ns, objs)
			applyStrict(t, objs)
		})
	}
}

// checkObjects asserts what every rendering must hold.
func checkObjects(t *testing.T, name, ns string, objs []*unstructured.Unstructured) {
	t.Helper()
	library := strings.HasPrefix(name, "library")
	k8sDiscovery := strings.Contains(name, "-k8s")
	byKind := map[string][]*unstructured.Unstructured{}
	for _, o := range objs {
		byKind[o.GetKind()] = append(byKind[o.GetKind()], o)
		if o.GetNamespace() != ns {
			t.Errorf("%s %s in namespace %q, want %q", o.GetKind(), o.GetName(), o.GetNamespace(), ns)
		}
	}
	for _, k := range []string{"ClusterRole", "ClusterRoleBinding"} {
		if len(byKind[k]) > 0 {
			t.Errorf("a %s: the chart must never need cluster-wide rights", k)
		}
	}

	// The headless Service members gossip through.
	var headless *corev1.Service
	for _, o := range byKind["Service"] {
		var s corev1.Service
		fromUnstructured(t, o, &s)
		if s.Spec.ClusterIP == corev1.ClusterIPNone {
			headless = &s
		}
	}
	if headless == nil {
		t.Fatal("no headless Service")
	}
	if !headless.Spec.PublishNotReadyAddresses {
		t.Error("headless Service does not publish not-ready addresses: pods could not join before they are ready")
	}
	httpName := "http"
	if library {
		httpName = "http-metrics"
	}
	wantPorts := map[string]corev1.Protocol{"tcp-gossip": "TCP", "udp-gossip": "UDP", "grpc-peer": "TCP", httpName: "TCP"}
	for _, p := range headless.Spec.Ports {
		proto, ok := wantPorts[p.Name]
		if !ok || proto != p.Protocol {
			t.Errorf("headless Service port %s/%s unexpected", p.Name, p.Protocol)
		}
		delete(wantPorts, p.Name)
		if p.Protocol == "TCP" && (p.AppProtocol == nil || *p.AppProtocol == "") {
			t.Errorf("headless Service port %s has no appProtocol", p.Name)
		}
	}
	if len(wantPorts) > 0 {
		t.Errorf("headless Service lacks ports %v", wantPorts)
	}

	// RBAC: a Role for k8s:// discovery only, and only get/list/watch on endpointslices.
	roles := byKind["Role"]
	if k8sDiscovery != (len(roles) == 1) || len(byKind["RoleBinding"]) != len(roles) {
		t.Errorf("%d Roles and %d RoleBindings with k8s discovery %v", len(roles), len(byKind["RoleBinding"]), k8sDiscovery)
	}
	for _, o := range roles {
		var r rbacv1.Role
		fromUnstructured(t, o, &r)
		want := []rbacv1.PolicyRule{{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"get", "list", "watch"}}}
		if got, _ := json.Marshal(r.Rules); string(got) != mustJSON(want) {
			t.Errorf("Role rules %s, want %s", got, mustJSON(want))
		}
	}

	if !strings.Contains(name, "plaintext") {
		if len(byKind["PodDisruptionBudget"]) != 1 {
			t.Fatalf("%d PodDisruptionBudgets", len(byKind["PodDisruptionBudget"]))
		}
		var pdb policyv1.PodDisruptionBudget
		fromUnstructured(t, byKind["PodDisruptionBudget"][0], &pdb)
		if pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 {
			t.Errorf("PodDisruptionBudget maxUnavailable %v, want 1", pdb.Spec.MaxUnavailable)
		}
	}
	wantOptional := strings.HasSuffix(name, "-all")
	for _, k := range []string{"ServiceMonitor", "PrometheusRule", "NetworkPolicy"} {
		if got := len(byKind[k]) == 1; got != wantOptional {
			t.Errorf("%s rendered: %v, want %v", k, got, wantOptional)
		}
	}
	dashboards := 0
	for _, o := range byKind["ConfigMap"] {
		if _, ok := o.GetLabels()["grafana_dashboard"]; ok {
			dashboards++
			if !json.Valid([]byte(o.Object["data"].(map[string]any)["corral.json"].(string))) {
				t.Error("the dashboard is not valid JSON")
			}
		}
	}
	if (dashboards == 1) != wantOptional {
		t.Errorf("%d dashboards", dashboards)
	}

	// Generated Secrets: the gossip key unless encryption is off or the key is the operator's;
	// the API token when it is on and not the operator's.
	wantSecrets := map[string]int{} // name → bytes of its one value
	if !strings.Contains(name, "plaintext") && !strings.Contains(name, "existing") {
		wantSecrets["shop-corral-gossip"] = 32
	}
	if strings.Contains(name, "-token") && !strings.Contains(name, "own-token") {
		wantSecrets["shop-corral-api-token"] = 48
	}
	for _, o := range byKind["Secret"] {
		size, ok := wantSecrets[o.GetName()]
		if !ok {
			t.Errorf("Secret %s rendered", o.GetName())
			continue
		}
		delete(wantSecrets, o.GetName())
		for k, v := range o.Object["data"].(map[string]any) {
			b, _ := base64.StdEncoding.DecodeString(v.(string))
			if len(b) != size {
				t.Errorf("Secret %s: %s is %d bytes, want %d", o.GetName(), k, len(b), size)
			}
		}
	}
	if len(wantSecrets) > 0 {
		t.Errorf("Secrets not rendered: %v", wantSecrets)
	}
	if !library {
		checkServer(t, name, ns, byKind, k8sDiscovery)
	} else if len(byKind["Deployment"])+len(byKind["StatefulSet"]) > 0 {
		t.Error("library mode rendered a workload")
	}
}

func checkServer(t *testing.T, name, ns string, byKind map[string][]*unstructured.Unstructured, k8sDiscovery bool) {
	t.Helper()
	var pod corev1.PodTemplateSpec
	switch {
	case len(byKind["StatefulSet"]) == 1:
		var s appsv1.StatefulSet
		fromUnstructured(t, byKind["StatefulSet"][0], &s)
		if s.Spec.PodManagementPolicy != appsv1.ParallelPodManagement {
			t.Errorf("StatefulSet podManagementPolicy %q, want Parallel", s.Spec.PodManagementPolicy)
		}
		pod = s.Spec.Template
	case len(byKind["Deployment"]) == 1:
		var d appsv1.Deployment
		fromUnstructured(t, byKind["Deployment"][0], &d)
		pod = d.Spec.Template
	default:
		t.Fatal("server mode rendered no Deployment or StatefulSet")
	}
	if len(byKind["ConfigMap"]) == 0 {
		t.Fatal("no ConfigMap")
	}
	var cm corev1.ConfigMap
	for _, o := range byKind["ConfigMap"] {
		if _, ok := o.GetLabels()["grafana_dashboard"]; !ok {
			fromUnstructured(t, o, &cm)
		}
	}
	if pod.Annotations["checksum/config"] == "" {
		t.Error("no checksum/config annotation: a config change would not roll the pods")
	}
	spec := pod.Spec
	if sc := spec.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot ||
		sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod securityContext %+v: want runAsNonRoot and seccomp RuntimeDefault", sc)
	}
	if len(spec.TopologySpreadConstraints) == 0 {
		t.Error("no topology spread constraints")
	}
	if got := spec.AutomountServiceAccountToken != nil && *spec.AutomountServiceAccountToken; got != k8sDiscovery {
		t.Errorf("automountServiceAccountToken %v with k8s discovery %v", got, k8sDiscovery)
	}
	if len(spec.Containers) != 1 {
		t.Fatalf("%d containers", len(spec.Containers))
	}
	c := spec.Containers[0]
	if len(c.Args) == 0 || c.Args[0] != "serve" {
		t.Errorf("container args %v, want corral serve", c.Args)
	}
	if sc := c.SecurityContext; sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.Capabilities == nil ||
		!slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("container securityContext %+v", sc)
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Error("no cpu request or memory limit")
	}
	probe := func(p *corev1.Probe, path string) {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != path {
			t.Errorf("probe %+v, want GET %s", p, path)
		}
	}
	probe(c.StartupProbe, "/healthz")
	probe(c.LivenessProbe, "/healthz") // never depends on peers
	probe(c.ReadinessProbe, "/readyz")
	env := map[string]string{}
	for _, e := range c.Env {
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			env[e.Name] = e.ValueFrom.FieldRef.FieldPath
		}
	}
	for k, v := range map[string]string{"POD_NAME": "metadata.name", "POD_IP": "status.podIP", "POD_NAMESPACE": "metadata.namespace"} {
		if env[k] != v {
			t.Errorf("env %s from %q, want the Downward API's %s", k, env[k], v)
		}
	}

	// The kubelet's grace is above the whole graceful stop: shutdown delay, leave, hand-off,
	// drain, all bounded by --shutdown-timeout.
	secs := func(k string) int64 {
		d, err := time.ParseDuration(cm.Data[k])
		if err != nil {
			t.Fatalf("%s=%q: %v", k, cm.Data[k], err)
		}
		return int64(d / time.Second)
	}
	delay, drain, timeout := secs("CORRAL_SHUTDOWN_DELAY"), secs("CORRAL_DRAIN"), secs("CORRAL_SHUTDOWN_TIMEOUT")
	if spec.TerminationGracePeriodSeconds == nil || *spec.TerminationGracePeriodSeconds <= timeout || timeout < delay+drain+5 {
		t.Errorf("terminationGracePeriodSeconds %v, shutdown timeout %ds, delay %ds, drain %ds: want grace > timeout >= delay + drain + 5",
			spec.TerminationGracePeriodSeconds, timeout, delay, drain)
	}

	checkSecurity(t, name, cm, c, spec)

	wantJoin := "dns+shop-corral-headless." + ns + ".svc.cluster.local:7946"
	if k8sDiscovery {
		wantJoin = "k8s://" + ns + "/shop-corral-headless"
	}
	if cm.Data["CORRAL_JOIN"] != wantJoin {
		t.Errorf("CORRAL_JOIN %q, want %q", cm.Data["CORRAL_JOIN"], wantJoin)
	}
	wantLabel := "shop." + ns
	if strings.Contains(name, "existing") {
		wantLabel = "shop-cache"
	}
	if cm.Data["CORRAL_LABEL"] != wantLabel {
		t.Errorf("CORRAL_LABEL %q, want %q", cm.Data["CORRAL_LABEL"], wantLabel)
	}
}

// checkSecurity checks that every secret corral serve is told to read is a file of a volume
// mounted whole from the right Secret or ConfigMap (never by subPath: the kubelet updates only
// whole mounts, and corral serve reads rotated keys and certificates from them), and the
// gossip verify switches.
func checkSecurity(t *testing.T, name string, cm corev1.ConfigMap, c corev1.Container, spec corev1.PodSpec) {
	t.Helper()
	volumes := map[string]corev1.Volume{}
	for _, v := range spec.Volumes {
		volumes[v.Name] = v
	}
	// source returns "secret/<name>/<key>" or "configmap/<name>/<key>" for a file path.
	source := func(path string) string {
		for _, m := range c.VolumeMounts {
			if m.SubPath != "" {
				t.Errorf("volume %s is mounted by subPath: a rotation would never reach the pod", m.Name)
			}
			if !strings.HasPrefix(path, m.MountPath+"/") {
				continue
			}
			if !m.ReadOnly {
				t.Errorf("volume %s is mounted writable", m.Name)
			}
			file := strings.TrimPrefix(path, m.MountPath+"/")
			v := volumes[m.Name]
			switch {
			case v.Secret != nil:
				for _, it := range v.Secret.Items {
					if it.Path == file {
						return "secret/" + v.Secret.SecretName + "/" + it.Key
					}
				}
			case v.ConfigMap != nil:
				for _, it := range v.ConfigMap.Items {
					if it.Path == file {
						return "configmap/" + v.ConfigMap.Name + "/" + it.Key
					}
				}
			}
		}
		return ""
	}
	want := map[string]string{}
	if !strings.Contains(name, "plaintext") {
		want["CORRAL_SECRET_KEY_FILE"] = "secret/shop-corral-gossip/key"
		if strings.Contains(name, "existing") {
			want["CORRAL_SECRET_KEY_FILE"] = "secret/corral-key/gossip.key"
		}
	}
	if strings.Contains(name, "-tls") {
		want["CORRAL_TLS_CERT"] = "secret/corral-peer-tls/tls.crt"
		want["CORRAL_TLS_KEY"] = "secret/corral-peer-tls/tls.key"
		want["CORRAL_TLS_CA"] = "secret/corral-peer-tls/ca.crt"
		if strings.Contains(name, "-bundle") {
			want["CORRAL_TLS_CA"] = "configmap/corral-ca-bundle/bundle.pem"
		}
	}
	switch {
	case strings.Contains(name, "own-token"):
		want["CORRAL_API_TOKEN_FILE"] = "secret/shop-api/api.token"
	case strings.Contains(name, "-token"):
		want["CORRAL_API_TOKEN_FILE"] = "secret/shop-corral-api-token/token"
	}
	for _, env := range []string{"CORRAL_SECRET_KEY_FILE", "CORRAL_TLS_CERT", "CORRAL_TLS_KEY", "CORRAL_TLS_CA", "CORRAL_API_TOKEN_FILE"} {
		path, set := cm.Data[env]
		if !set {
			if want[env] != "" {
				t.Errorf("%s not set, want the file of %s", env, want[env])
			}
			continue
		}
		if got := source(path); got != want[env] {
			t.Errorf("%s=%s is the file of %q, want %q", env, path, got, want[env])
		}
	}
	wantReads := map[string]string{"server-tls-token": "true", "server-statefulset-tls-bundle-own-token": "false"}[name]
	if got := cm.Data["CORRAL_API_TOKEN_READS"]; got != wantReads {
		t.Errorf("CORRAL_API_TOKEN_READS %q, want %q", got, wantReads)
	}
	// The verify switches are set only when off, as each step of turning encryption on sets them.
	wantIn, wantOut := "", ""
	switch name {
	case "server-tls-token":
		wantIn, wantOut = "false", "false"
	case "server-statefulset-tls-bundle-own-token":
		wantIn = "false"
	}
	if got := cm.Data["CORRAL_GOSSIP_VERIFY_INCOMING"]; got != wantIn {
		t.Errorf("CORRAL_GOSSIP_VERIFY_INCOMING %q, want %q", got, wantIn)
	}
	if got := cm.Data["CORRAL_GOSSIP_VERIFY_OUTGOING"]; got != wantOut {
		t.Errorf("CORRAL_GOSSIP_VERIFY_OUTGOING %q, want %q", got, wantOut)
	}
	// server.otlpEndpoint: traces go where it says, and only when it is set.
	wantOTLP := ""
	if name == "server-k8s-statefulset-all" {
		wantOTLP = "otel-collector.observability.svc:4317"
	}
	if got, set := cm.Data["CORRAL_OTLP_ENDPOINT"]; got != wantOTLP || set != (wantOTLP != "") {
		t.Errorf("CORRAL_OTLP_ENDPOINT %q (set %v), want %q", got, set, wantOTLP)
	}
}

func fromUnstructured(t testing.TB, o *unstructured.Unstructured, into any) {
	t.Helper()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(o.Object, into, true); err != nil {
		t.Fatalf("%s %s: %v", o.GetKind(), o.GetName(), err)
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// The schema rejects typos and wrong types, and the templates refuse values that cannot work.
func TestChartRejectsBadValues(t *testing.T) {
	tests := []struct{ file, want string }{
		{"typo.yaml", "additional properties 'replcas' not allowed"},
		{"top-level-typo.yaml", "additional properties 'serviceMonitr' not allowed"},
		{"wrong-type.yaml", "replicas"},
		{"unknown-discovery.yaml", "/discovery/mode"},
		{"bad-duration.yaml", "ttl"},
		{"library-no-selector.yaml", "selector"},
		{"short-shutdown.yaml", "shutdownTimeoutSeconds"},
		{"tls-without-secret.yaml", "tls.enabled needs tls.existingSecret"},
		{"verify-outgoing-alone.yaml", "gossip.verifyOutgoing false needs gossip.verifyIncoming false"},
		{"verify-without-encryption.yaml", "need gossip.encryption"},
	}
	for _, tt := range tests {
		out, err := helmErr("template", "r", chartDir, "--values", filepath.Join("testdata", "invalid", tt.file))
		if err == nil {
			t.Errorf("%s rendered:\n%.300s", tt.file, out)
			continue
		}
		if !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v; want it to mention %q", tt.file, err, tt.want)
		}
	}
}

// A real install and upgrades: the generated gossip key survives upgrades (lookup), a config
// change rolls the pods (the checksum annotation changes) while an upgrade without one does not,
// and the notes say how to reach /metrics and /debug/corral.
func TestChartInstallUpgrade(t *testing.T) {
	ns := createNamespace(t, "upgrade")
	notes := helm(t, "install", "shop", chartDir, "--namespace", ns)
	for _, want := range []string{"kubectl -n " + ns + " port-forward svc/shop-corral 8080:8080", "/metrics", "/debug/corral"} {
		if !strings.Contains(notes, want) {
			t.Errorf("install notes lack %q:\n%s", want, notes)
		}
	}
	ctx := context.Background()
	state := func() (key []byte, checksum string) {
		s, err := cp.client.CoreV1().Secrets(ns).Get(ctx, "shop-corral-gossip", getOpts)
		if err != nil {
			t.Fatal(err)
		}
		d, err := cp.client.AppsV1().Deployments(ns).Get(ctx, "shop-corral", getOpts)
		if err != nil {
			t.Fatal(err)
		}
		return s.Data["key"], d.Spec.Template.Annotations["checksum/config"]
	}
	key0, sum0 := state()
	helm(t, "upgrade", "shop", chartDir, "--namespace", ns)
	key1, sum1 := state()
	helm(t, "upgrade", "shop", chartDir, "--namespace", ns, "--set", "server.ttl=5m")
	key2, sum2 := state()
	if len(key0) != 32 || !bytes.Equal(key0, key1) || !bytes.Equal(key0, key2) {
		t.Errorf("gossip key changed across upgrades: %q, %q, %q", key0, key1, key2)
	}
	if sum0 != sum1 {
		t.Errorf("an upgrade without changes rolled the pods: checksum %s -> %s", sum0, sum1)
	}
	if sum2 == sum1 {
		t.Error("changing server.ttl did not change the checksum: the pods would keep the old config")
	}

	// The generated API token survives upgrades too.
	helm(t, "install", "tok", chartDir, "--namespace", ns, "--set", "apiToken.enabled=true")
	token := func() []byte {
		s, err := cp.client.CoreV1().Secrets(ns).Get(ctx, "tok-corral-api-token", getOpts)
		if err != nil {
			t.Fatal(err)
		}
		return s.Data["token"]
	}
	tok0 := token()
	helm(t, "upgrade", "tok", chartDir, "--namespace", ns, "--set", "apiToken.enabled=true,server.ttl=5m")
	if tok1 := token(); len(tok0) != 48 || !bytes.Equal(tok0, tok1) {
		t.Errorf("API token changed across an upgrade: %q, %q", tok0, tok1)
	}

	library := helm(t, "install", "lib", chartDir, "--namespace", ns, "--set", "mode=library,library.selector.app=shop,discovery.mode=k8s")
	for _, want := range []string{`cfg.Join = []string{"k8s://` + ns + `/lib-corral-headless"}`, `import _ "github.com/corralcache/corral/peer/k8s"`, "port-forward svc/lib-corral-headless"} {
		if !strings.Contains(library, want) {
			t.Errorf("library-mode notes lack %q:\n%s", want, library)
		}
	}
}
