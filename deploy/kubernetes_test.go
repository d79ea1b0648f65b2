package deploy

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/venn-gateway/venn/app"
)

// manifests are deploy/kubernetes, decoded.
type manifests struct {
	deployment *appsv1.Deployment
	configMap  *corev1.ConfigMap
	secret     *corev1.Secret
	service    *corev1.Service
	pdb        *policyv1.PodDisruptionBudget
	monitor    *monitoringv1.ServiceMonitor
}

// decodeStrict decodes a manifest into v; an unknown field is an error,
// as kubectl apply --validate=strict makes it.
func decodeStrict(t *testing.T, file string, v any) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("kubernetes", file))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(data, []byte("\n---")) {
		t.Fatalf("%s: one object per file", file)
	}
	if err := yaml.UnmarshalStrict(data, v); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
}

func loadManifests(t *testing.T) *manifests {
	t.Helper()
	files, err := filepath.Glob("kubernetes/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	m := &manifests{deployment: &appsv1.Deployment{}, configMap: &corev1.ConfigMap{}, secret: &corev1.Secret{},
		service: &corev1.Service{}, pdb: &policyv1.PodDisruptionBudget{}, monitor: &monitoringv1.ServiceMonitor{}}
	byFile := []struct {
		file, kind string // kind: "apiVersion Kind"
		v          any
		meta       *metav1.TypeMeta
	}{
		{"deployment.yaml", "apps/v1 Deployment", m.deployment, &m.deployment.TypeMeta},
		{"configmap.yaml", "v1 ConfigMap", m.configMap, &m.configMap.TypeMeta},
		{"secret.yaml", "v1 Secret", m.secret, &m.secret.TypeMeta},
		{"service.yaml", "v1 Service", m.service, &m.service.TypeMeta},
		{"pdb.yaml", "policy/v1 PodDisruptionBudget", m.pdb, &m.pdb.TypeMeta},
		{"servicemonitor.yaml", "monitoring.coreos.com/v1 ServiceMonitor", m.monitor, &m.monitor.TypeMeta},
	}
	if len(files) != len(byFile) {
		t.Errorf("kubernetes/ has %v, want exactly the %d manifests the test decodes", files, len(byFile))
	}
	for _, f := range byFile {
		decodeStrict(t, f.file, f.v)
		if got := f.meta.APIVersion + " " + f.meta.Kind; got != f.kind {
			t.Errorf("%s is %q, want %q", f.file, got, f.kind)
		}
	}
	return m
}

// venn's container in the Deployment.
func (m *manifests) container(t *testing.T) corev1.Container {
	t.Helper()
	cs := m.deployment.Spec.Template.Spec.Containers
	if len(cs) != 1 {
		t.Fatalf("the pod has %d containers, want venn alone", len(cs))
	}
	return cs[0]
}

// TestKubernetes: the manifests decode strictly; the ConfigMap's config
// passes venn's validation with the environment the pod gets; the probes,
// the Service and the ServiceMonitor point at the ports venn listens on;
// the admin API takes a token and stays out of the Service;
// the PodDisruptionBudget keeps replicas serving; the drain fits the grace
// period.
func TestKubernetes(t *testing.T) {
	m := loadManifests(t)
	c := m.container(t)
	cfg := m.config(t, c)

	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	if got := port(cfg.Listen); got != fmt.Sprint(ports["rpc"]) {
		t.Errorf("venn listens on %s, the rpc port is %d", cfg.Listen, ports["rpc"])
	}
	if got := port(*cfg.MetricsListen); got != fmt.Sprint(ports["metrics"]) {
		t.Errorf("venn serves metrics on %s, the metrics port is %d", *cfg.MetricsListen, ports["metrics"])
	}
	if got := port(cfg.AdminListen); got != fmt.Sprint(ports["admin"]) || len(cfg.Admin.Tokens) == 0 {
		t.Errorf("venn serves the admin API on %q with %d tokens, want the admin port %d with a token",
			cfg.AdminListen, len(cfg.Admin.Tokens), ports["admin"])
	}
	for name, pr := range map[string]*corev1.Probe{"readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
		if pr == nil || pr.HTTPGet == nil {
			t.Errorf("%s probe %+v, want an HTTP GET", name, pr)
			continue
		}
		if pr.HTTPGet.Port != intstr.FromString("metrics") {
			t.Errorf("%s probe asks port %v, want metrics", name, pr.HTTPGet.Port)
		}
	}
	if c.ReadinessProbe != nil && c.ReadinessProbe.HTTPGet != nil && c.ReadinessProbe.HTTPGet.Path != "/readyz" {
		t.Errorf("readiness probe asks %s, want /readyz", c.ReadinessProbe.HTTPGet.Path)
	}
	if c.LivenessProbe != nil && c.LivenessProbe.HTTPGet != nil && c.LivenessProbe.HTTPGet.Path != "/healthz" {
		t.Errorf("liveness probe asks %s, want /healthz: /readyz fails with the providers, and restarting venn mends none", c.LivenessProbe.HTTPGet.Path)
	}
	if rp := c.ReadinessProbe; rp != nil {
		// A draining replica must be out of the Service before it stops serving.
		if out := time.Duration(rp.PeriodSeconds*rp.FailureThreshold) * time.Second; cfg.ShutdownDelay < out {
			t.Errorf("shutdown_delay %v is shorter than the readiness probe takes to fail (%v)", cfg.ShutdownDelay, out)
		}
	}
	spec := m.deployment.Spec.Template.Spec
	if g := spec.TerminationGracePeriodSeconds; g == nil || time.Duration(*g)*time.Second <= cfg.ShutdownDelay+cfg.ShutdownTimeout {
		t.Errorf("terminationGracePeriodSeconds %v, want more than shutdown_delay + shutdown_timeout", g)
	}
	if r := m.deployment.Spec.Replicas; r == nil || *r < 2 {
		t.Errorf("replicas %v, want a cluster", r)
	}
	if m.pdb.Spec.MaxUnavailable == nil && m.pdb.Spec.MinAvailable == nil {
		t.Error("the PodDisruptionBudget bounds nothing")
	}
	podLabels := m.deployment.Spec.Template.Labels
	for what, sel := range map[string]map[string]string{
		"deployment": m.deployment.Spec.Selector.MatchLabels, "service": m.service.Spec.Selector,
		"pdb": m.pdb.Spec.Selector.MatchLabels,
	} {
		if !subset(sel, podLabels) {
			t.Errorf("the %s selects %v, which the pods (%v) do not carry", what, sel, podLabels)
		}
	}
	servicePorts := map[string]bool{}
	for _, p := range m.service.Spec.Ports {
		servicePorts[p.Name] = true
		if p.TargetPort.StrVal == "" || ports[p.TargetPort.StrVal] == 0 {
			t.Errorf("service port %s targets %v, not a named container port", p.Name, p.TargetPort)
		}
		if p.TargetPort.StrVal == "admin" {
			t.Errorf("service port %s exposes the admin API to the cluster: reach a pod by kubectl exec or port-forward", p.Name)
		}
	}
	if !subset(m.monitor.Spec.Selector.MatchLabels, m.service.Labels) {
		t.Errorf("the ServiceMonitor selects %v, which the Service (%v) does not carry", m.monitor.Spec.Selector.MatchLabels, m.service.Labels)
	}
	if len(m.monitor.Spec.Endpoints) != 1 || !servicePorts[m.monitor.Spec.Endpoints[0].Port] || m.monitor.Spec.Endpoints[0].Path != "/metrics" {
		t.Errorf("the ServiceMonitor scrapes %+v, want the Service's metrics port at /metrics", m.monitor.Spec.Endpoints)
	}
}

// config validates the ConfigMap's venn config as venn check-config
// would, with the environment the pod gets: the Secret's keys and the
// container's own env.
func (m *manifests) config(t *testing.T, c corev1.Container) *app.Config {
	t.Helper()
	if !slices.Equal(c.Args, []string{"--config", "/etc/venn/venn.yaml"}) {
		t.Errorf("args %v, want --config /etc/venn/venn.yaml", c.Args)
	}
	mounted := false
	for _, vm := range c.VolumeMounts {
		for _, v := range m.deployment.Spec.Template.Spec.Volumes {
			if v.Name == vm.Name && vm.MountPath == "/etc/venn" && v.ConfigMap != nil && v.ConfigMap.Name == m.configMap.Name {
				mounted = true
			}
		}
	}
	if !mounted {
		t.Errorf("the ConfigMap %s is not mounted at /etc/venn", m.configMap.Name)
	}
	src, ok := m.configMap.Data["venn.yaml"]
	if !ok {
		t.Fatal("the ConfigMap has no venn.yaml")
	}
	fromSecret := false
	for _, ef := range c.EnvFrom {
		if ef.SecretRef != nil && ef.SecretRef.Name == m.secret.Name {
			fromSecret = true
			for k, v := range m.secret.StringData {
				t.Setenv(k, v)
			}
		}
	}
	if !fromSecret {
		t.Errorf("the container does not read the Secret %s", m.secret.Name)
	}
	for _, e := range c.Env {
		t.Setenv(e.Name, "from-"+e.Name) // downward API values: any string
	}
	cfg, err := app.Parse([]byte(src))
	if err != nil {
		t.Fatalf("the ConfigMap's venn.yaml does not pass venn check-config:\n%v", err)
	}
	refs := envRefs(t, "kubernetes/configmap.yaml")
	for k := range m.secret.StringData {
		if !refs[k] {
			t.Errorf("the Secret holds %s, which the config does not read", k)
		}
	}
	return cfg
}

// subset says whether every label of sel is in labels, and sel is not
// empty.
func subset(sel, labels map[string]string) bool {
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return len(sel) > 0
}
