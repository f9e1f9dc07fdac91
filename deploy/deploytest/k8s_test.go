package deploytest

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/agentmem/agentmem/pkg/bus"
	"github.com/agentmem/agentmem/pkg/config"
)

// streamWorkers are the workers with a durable consumer, each scaled by KEDA on its lag.
var streamWorkers = []string{bus.WorkerIngest, bus.WorkerExtractor, bus.WorkerConsolidator}

// workerBinaries are the four worker binaries of SPEC E2.
var workerBinaries = append(slices.Clone(streamWorkers), "retriever")

func TestKustomizationListsEveryManifest(t *testing.T) {
	k := loadK8s(t) // fails on a listed resource that does not exist
	dir := filepath.Join(repoRoot(t), k8sDir)
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || name == "kustomization.yaml" || (!strings.HasSuffix(name, ".yaml") && !strings.HasSuffix(name, ".yml")) {
			continue
		}
		if !slices.Contains(k.Resources, name) {
			t.Errorf("%s/%s is not listed in kustomization.yaml resources: kubectl apply -k would skip it", k8sDir, name)
		}
	}
	if k.Namespace == "" {
		t.Fatal("kustomization.yaml sets no namespace")
	}
	if _, ok := k.find("Namespace", k.Namespace); !ok {
		t.Errorf("the base deploys into namespace %q but does not create it", k.Namespace)
	}
	seen := map[string]bool{}
	for _, m := range k.manifests {
		id := m.Kind + "/" + m.Metadata.Name
		if seen[id] {
			t.Errorf("%s is defined twice", id)
		}
		seen[id] = true
		if m.Metadata.Namespace != "" && m.Metadata.Namespace != k.Namespace {
			t.Errorf("%s pins namespace %q, not the kustomization's %q", m, m.Metadata.Namespace, k.Namespace)
		}
	}
	// Images are pinned to a release: a mutable "latest" lets the pods of one
	// rollout run different builds.
	for _, img := range k.Images {
		if !releaseTag.MatchString(img.NewTag) {
			t.Errorf("kustomization.yaml gives image %s the tag %q, want a release tag such as v1.2.3", img.Name, img.NewTag)
		}
	}
	// Every image a worker runs is one the kustomization can retag.
	for _, c := range k.workerContainers(t) {
		if !slices.ContainsFunc(k.Images, func(i imageRef) bool { return i.Name == c.Image }) {
			t.Errorf("%s runs image %q, which kustomization.yaml images does not set", c.deployment, c.Image)
		}
	}
}

func TestEachWorkerBinaryRunsInOneDeployment(t *testing.T) {
	k := loadK8s(t)
	built := dockerfileBinaries(t)
	count := map[string]int{}
	for _, c := range k.workerContainers(t) {
		b := binaryOf(c.container)
		if !built[b] {
			t.Errorf("%s runs %q, which the Dockerfile does not build", c.deployment, c.Command)
		}
		count[b]++
	}
	for _, w := range workerBinaries {
		if count[w] != 1 {
			t.Errorf("worker %s runs in %d Deployments, want 1", w, count[w])
		}
	}
}

// TestWorkerConfigLoadsInDistributedMode loads, with config.Load, exactly what each
// worker container reads: the ConfigMap file AGENTMEM_CONFIG names plus its environment.
func TestWorkerConfigLoadsInDistributedMode(t *testing.T) {
	k := loadK8s(t)
	_, secretValues := k.secret(t)
	for _, c := range k.workerContainers(t) {
		if _, ok := c.env(config.EnvConfigFile); !ok {
			t.Errorf("%s: %s is not set, so the ConfigMap is not read", c.deployment, config.EnvConfigFile)
			continue
		}
		cfg := k.loadContainerConfig(t, c)
		// The embedded vector store and the filesystem DocStore are single-process.
		if cfg.Vector.Backend != config.VectorBackendQdrant {
			t.Errorf("%s: vector.backend = %q, want %q", c.deployment, cfg.Vector.Backend, config.VectorBackendQdrant)
		}
		if cfg.Memory.Backend != config.MemoryBackendJetStream {
			t.Errorf("%s: memory.backend = %q, want %q", c.deployment, cfg.Memory.Backend, config.MemoryBackendJetStream)
		}
		for _, raw := range strings.Split(cfg.NATS.URL, ",") {
			u, err := url.Parse(strings.TrimSpace(raw))
			if err != nil {
				t.Fatalf("%s: nats.url %q: %v", c.deployment, raw, err)
			}
			port, _ := strconv.Atoi(u.Port())
			if !k.serviceHasPort(t, u.Hostname(), port) {
				t.Errorf("%s: nats.url %s is no Service port of the base", c.deployment, raw)
			}
		}
		host, p, err := net.SplitHostPort(cfg.Vector.Qdrant.Addr)
		if err != nil {
			t.Fatalf("%s: vector.qdrant.addr: %v", c.deployment, err)
		}
		if port, _ := strconv.Atoi(p); !k.serviceHasPort(t, host, port) {
			t.Errorf("%s: vector.qdrant.addr %s is no Service port of the base", c.deployment, cfg.Vector.Qdrant.Addr)
		}
		// Credentials come only from files of the mounted Secret.
		for key, v := range configFields(cfg, reflectSecret, "") {
			if v != "" {
				t.Errorf("%s: %s is set inline; use its _file key with the Secret", c.deployment, key)
			}
		}
		for key, file := range configFields(cfg, nil, "_file") {
			if file == "" {
				continue
			}
			kind, name, secretKey, ok := c.mountedFile(file)
			switch {
			case !ok:
				t.Errorf("%s: %s = %s is not a file of any mounted ConfigMap or Secret", c.deployment, key, file)
			case kind != "Secret" && !strings.HasSuffix(key, "ca_file"):
				t.Errorf("%s: %s = %s comes from %s %s, not from a Secret", c.deployment, key, file, kind, name)
			case kind == "Secret":
				if _, has := secretValues[secretKey]; !has {
					t.Errorf("%s: %s = %s is key %q of Secret %s, which has no such key", c.deployment, key, file, secretKey, name)
				}
			}
		}
		// A graceful stop drains in-flight messages, which may take up to the ack wait.
		if g := c.pod.TerminationGracePeriodSeconds; g == nil || float64(*g) <= cfg.NATS.Consumer.AckWait.Seconds() {
			t.Errorf("%s: terminationGracePeriodSeconds must exceed nats.consumer.ack_wait (%s)", c.deployment, cfg.NATS.Consumer.AckWait)
		}
	}
}

func TestWorkerProbesUseHTTPListen(t *testing.T) {
	k := loadK8s(t)
	for _, c := range k.workerContainers(t) {
		cfg := k.loadContainerConfig(t, c)
		want := listenPort(t, cfg.HTTP.Listen)
		for _, pr := range []struct {
			kind, path string
			probe      *probe
		}{{"livenessProbe", "/healthz", c.LivenessProbe}, {"readinessProbe", "/readyz", c.ReadinessProbe}} {
			if pr.probe == nil || pr.probe.HTTPGet == nil {
				t.Errorf("%s: no %s httpGet", c.deployment, pr.kind)
				continue
			}
			if pr.probe.HTTPGet.Path != pr.path {
				t.Errorf("%s: %s path %q, want %q", c.deployment, pr.kind, pr.probe.HTTPGet.Path, pr.path)
			}
			if port, ok := c.portOf(pr.probe.HTTPGet.Port); !ok || port != want {
				t.Errorf("%s: %s port %q is %d, but http.listen is %q", c.deployment, pr.kind, pr.probe.HTTPGet.Port, port, cfg.HTTP.Listen)
			}
		}
	}
}

func TestWorkerPodsRunLockedDown(t *testing.T) {
	k := loadK8s(t)
	uid := dockerfileUser(t)
	for _, c := range k.workerContainers(t) {
		pod, ctr := c.pod.SecurityContext, c.SecurityContext
		if !isTrue(pod.RunAsNonRoot) && !isTrue(ctr.RunAsNonRoot) {
			t.Errorf("%s: runAsNonRoot is not set", c.deployment)
		}
		if pod.RunAsUser != nil && *pod.RunAsUser != uid {
			t.Errorf("%s: runAsUser %d is not the image's user %d", c.deployment, *pod.RunAsUser, uid)
		}
		if !isTrue(ctr.ReadOnlyRootFilesystem) {
			t.Errorf("%s: readOnlyRootFilesystem is not set", c.deployment)
		}
		if ctr.AllowPrivilegeEscalation == nil || *ctr.AllowPrivilegeEscalation {
			t.Errorf("%s: allowPrivilegeEscalation is not false", c.deployment)
		}
		for _, r := range []string{"cpu", "memory"} {
			if c.Resources.Requests[r] == "" {
				t.Errorf("%s: no %s request", c.deployment, r)
			}
		}
		if c.Resources.Limits["memory"] == "" {
			t.Errorf("%s: no memory limit", c.deployment)
		}
	}
}

func isTrue(b *bool) bool { return b != nil && *b }

// TestKEDAScalesStreamWorkersOnTheirDurables checks the ScaledObjects against pkg/bus:
// a consumer name that drifts from the durable the worker creates scales on nothing.
func TestKEDAScalesStreamWorkersOnTheirDurables(t *testing.T) {
	k := loadK8s(t)
	byBinary := map[string]string{} // worker → Deployment name
	for _, c := range k.workerContainers(t) {
		byBinary[binaryOf(c.container)] = c.deployment.Metadata.Name
	}
	monitor := natsMonitorEndpoint(t, k)
	scaled := map[string]scaledObject{} // Deployment name → its ScaledObject
	for _, m := range k.ofKind("ScaledObject") {
		if m.APIVersion != "keda.sh/v1alpha1" {
			t.Errorf("%s: apiVersion %q, want keda.sh/v1alpha1", m, m.APIVersion)
		}
		so := decodeAs[scaledObject](t, m)
		if _, dup := scaled[so.Spec.ScaleTargetRef.Name]; dup {
			t.Errorf("Deployment %s has two ScaledObjects", so.Spec.ScaleTargetRef.Name)
		}
		scaled[so.Spec.ScaleTargetRef.Name] = so
	}
	for _, w := range streamWorkers {
		so, ok := scaled[byBinary[w]]
		if !ok {
			t.Errorf("no ScaledObject targets the %s Deployment %q", w, byBinary[w])
			continue
		}
		if so.Spec.MinReplicaCount == nil || so.Spec.MaxReplicaCount < *so.Spec.MinReplicaCount || so.Spec.MaxReplicaCount < 1 {
			t.Errorf("%s: replica bounds min %v max %d", w, so.Spec.MinReplicaCount, so.Spec.MaxReplicaCount)
		}
		if len(so.Spec.Triggers) != 1 || so.Spec.Triggers[0].Type != "nats-jetstream" {
			t.Errorf("%s: want one nats-jetstream trigger, got %+v", w, so.Spec.Triggers)
			continue
		}
		md := so.Spec.Triggers[0].Metadata
		want := map[string]string{
			"natsServerMonitoringEndpoint": monitor,
			"account":                      kedaAccountPlaceholder, // operator mode: the AGENTMEM account's public key
			"stream":                       bus.DefaultStream,
			"consumer":                     bus.WorkerConsumer(w, bus.ConsumerDefaults{}).Durable,
		}
		for key, v := range want {
			if md[key] != v {
				t.Errorf("%s trigger: %s = %q, want %q", w, key, md[key], v)
			}
		}
		if n, err := strconv.Atoi(md["lagThreshold"]); err != nil || n < 1 {
			t.Errorf("%s trigger: lagThreshold %q, want a positive integer", w, md["lagThreshold"])
		}
	}
	if _, ok := scaled[byBinary["retriever"]]; ok {
		t.Error("the retriever consumes no stream and must not scale on consumer lag")
	}
}

// natsMonitorEndpoint is the host:port KEDA (in its own namespace) must use to reach
// the monitoring port of the base's NATS cluster: the cluster DNS name of the
// StatefulSet's headless Service, below which each node has its own name
// (<server_name>.<endpoint>: KEDA asks the node leading the consumer there).
func natsMonitorEndpoint(t *testing.T, k k8s) string {
	t.Helper()
	sts, ok := k.find("StatefulSet", "nats")
	if !ok {
		t.Fatal("no StatefulSet nats")
	}
	name := decodeAs[workload](t, sts).Spec.ServiceName
	headless, ok := k.find("Service", name)
	if !ok {
		t.Fatalf("no Service %s (the nats StatefulSet's serviceName)", name)
	}
	for _, p := range decodeAs[service](t, headless).Spec.Ports {
		if p.Name == "monitor" {
			return name + "." + k.Namespace + ".svc.cluster.local:" + strconv.Itoa(p.Port)
		}
	}
	t.Fatalf("Service %s has no port named monitor", name)
	return ""
}

func TestRetrieverScalesOnCPU(t *testing.T) {
	k := loadK8s(t)
	var retriever string
	for _, c := range k.workerContainers(t) {
		if binaryOf(c.container) == "retriever" {
			retriever = c.deployment.Metadata.Name
		}
	}
	var found bool
	for _, m := range k.ofKind("HorizontalPodAutoscaler") {
		h := decodeAs[hpa](t, m)
		if h.Spec.ScaleTargetRef.Kind != "Deployment" || h.Spec.ScaleTargetRef.Name != retriever {
			continue
		}
		found = true
		if m.APIVersion != "autoscaling/v2" {
			t.Errorf("%s: apiVersion %q, want autoscaling/v2", m, m.APIVersion)
		}
		if !slices.ContainsFunc(h.Spec.Metrics, func(mt metricSpec) bool {
			return mt.Type == "Resource" && mt.Resource != nil && mt.Resource.Name == "cpu"
		}) {
			t.Errorf("%s does not scale on CPU", m)
		}
		if h.Spec.MinReplicas < 1 || h.Spec.MaxReplicas < h.Spec.MinReplicas {
			t.Errorf("%s: replicas %d..%d", m, h.Spec.MinReplicas, h.Spec.MaxReplicas)
		}
	}
	if !found {
		t.Errorf("no HorizontalPodAutoscaler targets Deployment %q", retriever)
	}
	if _, ok := k.find("Service", retriever); !ok {
		t.Errorf("no Service %s", retriever)
	}
}

// TestAutoscaledDeploymentsLeaveReplicasAlone: a replicas field fights the autoscaler,
// resetting the count on every apply.
func TestAutoscaledDeploymentsLeaveReplicasAlone(t *testing.T) {
	k := loadK8s(t)
	targets := map[string]int{}
	for _, m := range k.ofKind("ScaledObject") {
		targets[decodeAs[scaledObject](t, m).Spec.ScaleTargetRef.Name]++
	}
	for _, m := range k.ofKind("HorizontalPodAutoscaler") {
		targets[decodeAs[hpa](t, m).Spec.ScaleTargetRef.Name]++
	}
	for _, m := range k.ofKind("Deployment") {
		if targets[m.Metadata.Name] != 1 {
			t.Errorf("%s is the target of %d autoscalers, want 1", m, targets[m.Metadata.Name])
		}
		if decodeAs[workload](t, m).Spec.Replicas != nil {
			t.Errorf("%s sets replicas although an autoscaler owns the count", m)
		}
	}
}

func TestSelectorsMatchPods(t *testing.T) {
	k := loadK8s(t)
	type pods struct {
		owner  manifest
		labels map[string]string
		ctrs   []container
	}
	var all []pods
	for _, kind := range []string{"Deployment", "StatefulSet"} {
		for _, m := range k.ofKind(kind) {
			w := decodeAs[workload](t, m)
			if !sameLabels(w.Spec.Selector.MatchLabels, w.Spec.Template.Metadata.Labels) {
				t.Errorf("%s: selector %v does not match its pod labels %v", m, w.Spec.Selector.MatchLabels, w.Spec.Template.Metadata.Labels)
			}
			all = append(all, pods{m, w.Spec.Template.Metadata.Labels, w.Spec.Template.Spec.Containers})
		}
	}
	matching := func(sel map[string]string) []pods {
		var out []pods
		for _, p := range all {
			if sameLabels(sel, p.labels) {
				out = append(out, p)
			}
		}
		return out
	}
	for _, m := range k.ofKind("Service") {
		s := decodeAs[service](t, m)
		ps := matching(s.Spec.Selector)
		if len(ps) != 1 {
			t.Errorf("%s selects the pods of %d workloads, want 1", m, len(ps))
			continue
		}
		for _, sp := range s.Spec.Ports {
			if !slices.ContainsFunc(ps[0].ctrs, func(c container) bool { _, ok := c.portOf(sp.TargetPort); return ok }) {
				t.Errorf("%s: targetPort %q is no container port of %s", m, sp.TargetPort, ps[0].owner)
			}
		}
	}
	for _, m := range k.ofKind("Deployment") {
		w := decodeAs[workload](t, m)
		var covered bool
		for _, pm := range k.ofKind("PodDisruptionBudget") {
			p := decodeAs[pdb](t, pm)
			if sameLabels(p.Spec.Selector.MatchLabels, w.Spec.Template.Metadata.Labels) {
				covered = true
				if (p.Spec.MinAvailable == nil) == (p.Spec.MaxUnavailable == nil) {
					t.Errorf("%s: set exactly one of minAvailable and maxUnavailable", pm)
				}
				if len(matching(p.Spec.Selector.MatchLabels)) != 1 {
					t.Errorf("%s spans several workloads", pm)
				}
			}
		}
		if !covered {
			t.Errorf("%s has no PodDisruptionBudget", m)
		}
	}
}

// TestStatefulServicesPersist checks NATS (JetStream on a volume, monitoring for KEDA,
// the same user as the workers) and Qdrant.
func TestStatefulServicesPersist(t *testing.T) {
	k := loadK8s(t)
	for _, name := range []string{"nats", "qdrant"} {
		m, ok := k.find("StatefulSet", name)
		if !ok {
			t.Errorf("no StatefulSet %s", name)
			continue
		}
		w := decodeAs[workload](t, m)
		if len(w.Spec.VolumeClaimTemplates) == 0 {
			t.Errorf("%s has no volumeClaimTemplates: its data would not survive a restart", m)
		}
		hs, ok := k.find("Service", w.Spec.ServiceName)
		if !ok || decodeAs[service](t, hs).Spec.ClusterIP != "None" {
			t.Errorf("%s: serviceName %q is not a headless Service of the base", m, w.Spec.ServiceName)
		}
	}

	cm, ok := k.find("ConfigMap", "nats-config")
	if !ok {
		t.Fatal("no ConfigMap nats-config")
	}
	conf := decodeAs[dataObject](t, cm).Data["nats.conf"]
	if !regexp.MustCompile(`(?m)^\s*jetstream\s*\{`).MatchString(conf) {
		t.Error("nats.conf does not enable JetStream")
	}
	monitor := regexp.MustCompile(`(?m)^\s*http_port:\s*(\d+)`).FindStringSubmatch(conf)
	if monitor == nil || !strings.HasSuffix(natsMonitorEndpoint(t, k), ":"+monitor[1]) {
		t.Errorf("nats.conf http_port %v is not the monitoring port KEDA reads", monitor)
	}
	var user string
	if m := regexp.MustCompile(`(?m)^\s*user:\s*(\S+)`).FindStringSubmatch(conf); m != nil {
		user = m[1]
	}
	for _, c := range k.workerContainers(t) {
		cfg := k.loadContainerConfig(t, c)
		if cfg.NATS.User != user {
			t.Errorf("%s: nats.user %q is not the user %q of nats.conf", c.deployment, cfg.NATS.User, user)
		}
		// The server's credentials and the workers' files are the same Secret keys.
		for _, pair := range []struct{ workload, env, file string }{
			{"nats", "NATS_PASSWORD", cfg.NATS.PasswordFile},
			{"qdrant", "QDRANT__SERVICE__API_KEY", cfg.Vector.Qdrant.APIKeyFile},
		} {
			_, _, fileKey, _ := c.mountedFile(pair.file)
			if got := serverSecretKey(t, k, pair.workload, pair.env); got != fileKey {
				t.Errorf("%s: %s reads Secret key %q, the %s server's %s key %q", c.deployment, pair.file, fileKey, pair.workload, pair.env, got)
			}
		}
	}
}

// serverSecretKey is the Secret key the env variable of a StatefulSet comes from.
func serverSecretKey(t *testing.T, k k8s, name, env string) string {
	t.Helper()
	m, _ := k.find("StatefulSet", name)
	for _, c := range decodeAs[workload](t, m).Spec.Template.Spec.Containers {
		if e, ok := c.env(env); ok && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			return e.ValueFrom.SecretKeyRef.Key
		}
	}
	return ""
}

// Every worker tells the Go runtime its memory budget: GOMEMLIMIT at most 90% of
// the container's memory limit, so that the collector, not the OOM killer, acts
// first, with room left for memory the runtime does not manage.
func TestWorkersSetAGoMemoryLimitUnderTheirContainers(t *testing.T) {
	k := loadK8s(t)
	for _, c := range k.workerContainers(t) {
		limit, err := quantityBytes(c.Resources.Limits["memory"])
		if err != nil {
			t.Errorf("%s: memory limit: %v", c.deployment, err)
			continue
		}
		i := slices.IndexFunc(c.Env, func(e envVar) bool { return e.Name == "GOMEMLIMIT" })
		if i < 0 {
			t.Errorf("%s: GOMEMLIMIT is not set (memory limit %s)", c.deployment, c.Resources.Limits["memory"])
			continue
		}
		soft, err := goMemLimitBytes(c.Env[i].Value)
		switch {
		case err != nil:
			t.Errorf("%s: GOMEMLIMIT: %v", c.deployment, err)
		case soft > limit*9/10:
			t.Errorf("%s: GOMEMLIMIT %s is over 90%% of the memory limit %s", c.deployment, c.Env[i].Value, c.Resources.Limits["memory"])
		case soft < limit/2:
			t.Errorf("%s: GOMEMLIMIT %s is under half the memory limit %s: the collector would run far more than it needs", c.deployment, c.Env[i].Value, c.Resources.Limits["memory"])
		}
	}
}

// quantityBytes parses a Kubernetes memory quantity in the forms the manifests
// use: an integer with an optional binary (Ki, Mi, Gi, Ti) or decimal (k, M, G, T)
// suffix.
func quantityBytes(q string) (int64, error) {
	return sizeBytes(q, map[string]int64{"": 1, "Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40,
		"k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12})
}

// goMemLimitBytes parses GOMEMLIMIT as the runtime does: an integer with an
// optional B, KiB, MiB, GiB or TiB suffix.
func goMemLimitBytes(v string) (int64, error) {
	return sizeBytes(v, map[string]int64{"": 1, "B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40})
}

func sizeBytes(s string, units map[string]int64) (int64, error) {
	digits := strings.TrimRightFunc(s, func(r rune) bool { return r < '0' || r > '9' })
	n, err := strconv.ParseInt(digits, 10, 64)
	unit, ok := units[s[len(digits):]]
	if err != nil || !ok || n <= 0 {
		return 0, fmt.Errorf("%q is not a size this test reads", s)
	}
	return n * unit, nil
}
