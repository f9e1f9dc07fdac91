package deploytest

import (
	"fmt"
	"slices"
	"strconv"
	"testing"
)

// TestNATSRunsAsAThreeNodeCluster: the base's NATS is a 3-node JetStream cluster
// (nats.conf as nats-server parses it: a cluster block whose routes name every
// pod of the StatefulSet through its headless Service, server_name the pod's),
// its pods start in parallel (a node is ready only with a quorum) and lose one
// at a time at most, and every worker provisions its streams and buckets at R3.
func TestNATSRunsAsAThreeNodeCluster(t *testing.T) {
	k := loadK8s(t)
	m, ok := k.find("StatefulSet", "nats")
	if !ok {
		t.Fatal("no StatefulSet nats")
	}
	sts := decodeAs[workload](t, m)
	if sts.Spec.Replicas == nil || *sts.Spec.Replicas != 3 {
		t.Fatalf("%s: replicas %v, want 3", m, sts.Spec.Replicas)
	}
	if sts.Spec.PodManagementPolicy != "Parallel" {
		t.Errorf("%s: podManagementPolicy %q, want Parallel (OrderedReady waits for nats-0, which needs a quorum to be ready)", m, sts.Spec.PodManagementPolicy)
	}

	cm, _ := k.find("ConfigMap", "nats-config")
	opts := natsOptions(t, decodeAs[dataObject](t, cm).Data["nats.conf"], newTrust(t))
	if opts.ServerName != "nats-0" { // natsOptions sets POD_NAME=nats-0
		t.Errorf("server_name %q, want the pod's name ($POD_NAME)", opts.ServerName)
	}
	if opts.Cluster.Name == "" {
		t.Error("nats.conf: the cluster has no name (JetStream needs a fixed one)")
	}
	clusterPort, ok := sts.Spec.Template.Spec.Containers[0].portOf("cluster")
	if !ok || clusterPort != opts.Cluster.Port {
		t.Errorf("nats.conf cluster port %d is not the container's port named cluster (%d, %v)", opts.Cluster.Port, clusterPort, ok)
	}
	headless, _ := k.find("Service", sts.Spec.ServiceName)
	if !slices.ContainsFunc(decodeAs[service](t, headless).Spec.Ports, func(p servicePort) bool { return p.TargetPort == "cluster" }) {
		t.Errorf("%s does not carry the cluster port", headless)
	}
	var routes, want []string
	for _, r := range opts.Routes {
		routes = append(routes, r.Host)
	}
	for i := range *sts.Spec.Replicas {
		want = append(want, fmt.Sprintf("nats-%d.%s:%s", i, sts.Spec.ServiceName, strconv.Itoa(clusterPort)))
	}
	if !slices.Equal(routes, want) {
		t.Errorf("nats.conf routes %v, want every pod: %v", routes, want)
	}

	var budget *pdb
	for _, pm := range k.ofKind("PodDisruptionBudget") {
		if p := decodeAs[pdb](t, pm); sameLabels(p.Spec.Selector.MatchLabels, sts.Spec.Template.Metadata.Labels) {
			budget = &p
		}
	}
	if budget == nil || budget.Spec.MaxUnavailable != 1 {
		t.Errorf("nats: PodDisruptionBudget %+v, want maxUnavailable 1 (two of three keep the quorum)", budget)
	}

	for _, c := range k.workerContainers(t) {
		if r := k.loadContainerConfig(t, c).NATS.Stream.Replicas; r != *sts.Spec.Replicas {
			t.Errorf("%s: nats.stream.replicas %d, want %d (every node of the cluster)", c.deployment, r, *sts.Spec.Replicas)
		}
	}
}
