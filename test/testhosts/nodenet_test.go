package testhosts

import (
	"bytes"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/edgefleet/edgefleet/test/testutil"
)

// clusterCIDR holds the pods' addresses; host i's pods get podCIDR(i).
var clusterCIDR = netip.MustParsePrefix("10.244.0.0/16")

// podCIDR is the /24 of host i's pods.
func podCIDR(i int) netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 244, byte(i), 0}), 24)
}

// TestNodeStackPodNetwork runs a two-node cluster of test hosts against a real control plane
// (needs root): each host a node (containerd, kubelet, kube-proxy) with a pod CIDR of its own,
// routed to the other host over the hosts' network; kube-controller-manager and kube-scheduler
// as systemd units in the first host. A Deployment of two replicas is spread over both nodes by
// the scheduler, a ClusterIP Service is in front of it, and a client pod on the first host
// reaches both backends by pod IP and through the Service, and a server off the cluster.
func TestNodeStackPodNetwork(t *testing.T) {
	c := startNodeCluster(t, 2, "kubectl", "kube-proxy", "kube-controller-manager", "kube-scheduler")
	ctx := t.Context()
	hosts := c.hosts.Hosts
	for i, h := range hosts {
		c.installNode(h, podCIDR(i))
		c.routePods(h, i)
		c.installKubeProxy(h)
	}
	controlPlane := hosts[0]
	c.installControllers(controlPlane)
	started := map[*Host]time.Time{}
	for _, h := range hosts {
		started[h] = time.Now()
		c.startUnits(h, "kubelet")
	}
	for _, h := range hosts {
		c.waitNodeReady(h, started[h])
		c.startUnits(h, "kube-proxy")
	}
	c.startUnits(controlPlane, "kube-controller-manager", "kube-scheduler")

	// Two replicas, at most one per node: the scheduler must put them on both.
	ns := c.cp.Namespace(t)
	labels := map[string]string{"app": "webapp"}
	spec := c.webappPodSpec()
	spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			LabelSelector: &metav1.LabelSelector{MatchLabels: labels},
			TopologyKey:   corev1.LabelHostname,
		}},
	}}
	replicas := int32(2)
	start := time.Now()
	if err := c.cp.Client.Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "webapp", Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec},
		},
	}); err != nil {
		t.Fatal(err)
	}
	var backends []corev1.Pod
	testutil.WaitFor(t, 3*time.Minute, "deployment webapp: 2 pods Running", func() (bool, string) {
		var pods corev1.PodList
		if err := c.cp.Client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels(labels)); err != nil {
			return false, err.Error()
		}
		var states []string
		running := 0
		for i := range pods.Items {
			states = append(states, PodState(&pods.Items[i]))
			if pods.Items[i].Status.Phase == corev1.PodRunning {
				running++
			}
		}
		backends = pods.Items
		return running == 2 && len(pods.Items) == 2, fmt.Sprintf("%d pods: %s", len(pods.Items), strings.Join(states, "; "))
	})
	// Includes the start of kube-controller-manager and kube-scheduler, started just before.
	t.Logf("deployment created to both pods Running: %s", time.Since(start).Round(time.Millisecond))
	byName := map[string]*corev1.Pod{}
	nodes := map[string]bool{}
	for i := range backends {
		p := &backends[i]
		byName[p.Name] = p
		nodes[p.Spec.NodeName] = true
		t.Logf("pod %s on %s, IP %s", p.Name, p.Spec.NodeName, p.Status.PodIP)
	}
	if len(nodes) != 2 {
		t.Fatalf("both replicas on one node: %v", nodes)
	}

	// The client: a pod on the first host, placed there by the scheduler too; its requests are
	// made by the webapp program in it (webapp -get).
	clientPod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "client", Namespace: ns}, Spec: c.webappPodSpec()}
	clientPod.Spec.NodeSelector = map[string]string{corev1.LabelHostname: controlPlane.Name}
	start = time.Now()
	if err := c.cp.Client.Create(ctx, clientPod); err != nil {
		t.Fatal(err)
	}
	c.waitPodRunning(clientPod)
	t.Logf("pod %s created to Running (scheduled): %s", clientPod.Name, time.Since(start).Round(time.Millisecond))

	// Pod to pod by IP, on the same node and across nodes, both ways.
	for _, to := range backends {
		for _, from := range append([]corev1.Pod{*clientPod}, backends...) {
			if from.Name == to.Name {
				continue
			}
			got := c.requestFrom(&from, "http://"+net.JoinHostPort(to.Status.PodIP, "8080")+"/", 1)
			if want := "hello from " + to.Name + " on " + to.Spec.NodeName; len(got) != 1 || got[0] != want {
				t.Errorf("pod %s (%s) to pod %s (%s) by IP: %q, want %q", from.Name, from.Spec.NodeName, to.Name, to.Spec.NodeName, got, want)
			}
		}
	}

	// Off the cluster: a server in the root namespace, which has no route to the pods, sees
	// the client's requests come from its host (masqueraded).
	if got, want := c.requestFrom(clientPod, c.hosts.OutsideServer(t), 1), "outside, from "+controlPlane.IP.String(); len(got) != 1 || got[0] != want {
		t.Errorf("client pod to a server off the cluster: %q, want %q", got, want)
	}

	// The Service: kube-proxy on the client's host sends connections to its ClusterIP to both
	// backends.
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "webapp", Namespace: ns},
		Spec: corev1.ServiceSpec{
			Selector: labels,
			Ports:    []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}},
		},
	}
	start = time.Now()
	if err := c.cp.Client.Create(ctx, svc); err != nil {
		t.Fatal(err)
	}
	svcURL := "http://" + svc.Spec.ClusterIP + "/"
	testutil.WaitFor(t, time.Minute, fmt.Sprintf("service %s (%s) from pod %s", svc.Name, svcURL, clientPod.Name), func() (bool, string) {
		got := c.requestFrom(clientPod, svcURL, 1)
		return len(got) == 1 && strings.HasPrefix(got[0], "hello from "), strings.Join(got, "; ")
	})
	t.Logf("service created to its first answer in pod %s: %s", clientPod.Name, time.Since(start).Round(time.Millisecond))
	// 40 connections: both backends answer unless the random choice of each is broken (2^-39).
	answers := map[string]int{}
	for _, line := range c.requestFrom(clientPod, svcURL, 40) {
		rest, ok := strings.CutPrefix(line, "hello from ")
		name, node, ok2 := strings.Cut(rest, " on ")
		if ok && ok2 && byName[name] != nil && byName[name].Spec.NodeName == node {
			answers[name]++
		} else {
			t.Errorf("service %s from pod %s: %q", svcURL, clientPod.Name, line)
		}
	}
	t.Logf("answers of service %s (%s) to 40 connections from %s: %v", svc.Name, svcURL, controlPlane.Name, answers)
	for name := range byName {
		if answers[name] == 0 {
			t.Errorf("pod %s (on %s) never answered through service %s", name, byName[name].Spec.NodeName, svcURL)
		}
	}

	out, err := c.kubectl("get", "nodes,pods,services,endpointslices", "-A", "-o", "wide")
	t.Logf("kubectl get nodes,pods,services,endpointslices -A -o wide (%v):\n%s", err, out)
	for _, h := range hosts {
		logHostMemory(t, h)
	}
}

// requestFrom runs webapp -get url -count n in pod's container (ctr task exec on the pod's host,
// as kubectl exec would through the CRI) and returns its lines: the answers, or "error: ...".
func (c *nodeCluster) requestFrom(pod *corev1.Pod, url string, n int) []string {
	var h *Host
	for _, hh := range c.hosts.Hosts {
		if hh.Name == pod.Spec.NodeName {
			h = hh
		}
	}
	if h == nil || len(pod.Status.ContainerStatuses) == 0 {
		c.t.Fatalf("pod %s: no container on a host (%s)", pod.Name, PodState(pod))
	}
	container := strings.TrimPrefix(pod.Status.ContainerStatuses[0].ContainerID, "containerd://")
	// webapp -get prints a line for every request, an answer or an error. An exec whose output
	// is empty lost it on the way back through ctr (seen once under load, right after the pod
	// started): the requests are made again, at most twice more.
	var out []byte
	for attempt := range 3 {
		c.mu.Lock()
		c.execs++
		execID := fmt.Sprintf("get-%d", c.execs)
		c.mu.Unlock()
		out = c.exec(h, "ctr", "-n", "k8s.io", "task", "exec", "--exec-id", execID, container,
			"/webapp", "-get", url, "-count", fmt.Sprint(n))
		if len(bytes.TrimSpace(out)) > 0 {
			break
		}
		c.t.Logf("pod %s: ctr task exec %s gave no output (attempt %d of 3)", pod.Name, execID, attempt+1)
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}

// podSysctls are what the pod network needs of a host's network namespace (net.* is writable
// in a host). Both are already so in a new namespace here (the bridge CNI plugin turns on
// forwarding; this kernel has br_netfilter built in, on by default): the file says the pod
// network depends on them. Without br_netfilter's call to iptables, a pod's connection to a
// Service whose chosen backend is on the same bridge gets its answer straight from the
// backend's address, never un-DNATed: it times out.
const podSysctls = `net.ipv4.ip_forward = 1
net.bridge.bridge-nf-call-iptables = 1
`

// routePods makes host i (of c.hosts) route the other hosts' pod CIDRs through them and
// masquerade what its pods send off the cluster: nothing outside knows a route to the pods.
func (c *nodeCluster) routePods(h *Host, i int) {
	c.writeFiles(h, hostFile{"/etc/sysctl.d/90-edgefleet-pods.conf", []byte(podSysctls), 0o644})
	c.exec(h, "sysctl", "-p", "/etc/sysctl.d/90-edgefleet-pods.conf")
	for j, other := range c.hosts.Hosts {
		if j != i {
			c.exec(h, "ip", "route", "add", podCIDR(j).String(), "via", other.IP.String(), "dev", "eth0")
		}
	}
	c.exec(h, "iptables", "-t", "nat", "-A", "POSTROUTING", "-s", podCIDR(i).String(), "!", "-d", clusterCIDR.String(), "-j", "MASQUERADE")
	c.logOnFailure(h, "ip", "route")
}

// installKubeProxy installs kube-proxy in host h (not started): iptables mode, a client
// certificate for system:kube-proxy (bound to system:node-proxier by the default RBAC).
func (c *nodeCluster) installKubeProxy(h *Host) {
	c.writeFiles(h,
		hostFile{"/usr/local/bin/kube-proxy", c.binary("kube-proxy"), 0o755},
		hostFile{"/etc/kubernetes/kube-proxy.yaml", []byte(kubeProxyConfig(h.Name)), 0o644},
		hostFile{"/etc/kubernetes/kube-proxy.kubeconfig", c.kubeconfig("system:kube-proxy"), 0o600},
		hostFile{"/etc/systemd/system/kube-proxy.service", []byte(systemdUnit("kube-proxy", "",
			"/usr/local/bin/kube-proxy --config=/etc/kubernetes/kube-proxy.yaml --v=2")), 0o644},
	)
	c.logOnFailure(h, "iptables-save")
}

// kubeProxyConfig is kube-proxy's configuration on node hostname.
func kubeProxyConfig(hostname string) string {
	return `apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: /etc/kubernetes/kube-proxy.kubeconfig
hostnameOverride: ` + hostname + `
mode: iptables
nodePortAddresses: [primary]
clusterCIDR: ` + clusterCIDR.String() + `
conntrack:
  maxPerCore: 0
`
}

// installControllers installs kube-controller-manager and kube-scheduler in host h (not
// started), each with a client certificate for the user the default RBAC gives its roles.
func (c *nodeCluster) installControllers(h *Host) {
	c.writeFiles(h,
		hostFile{"/usr/local/bin/kube-controller-manager", c.binary("kube-controller-manager"), 0o755},
		hostFile{"/usr/local/bin/kube-scheduler", c.binary("kube-scheduler"), 0o755},
		hostFile{"/etc/kubernetes/controller-manager.kubeconfig", c.kubeconfig("system:kube-controller-manager"), 0o600},
		hostFile{"/etc/kubernetes/scheduler.kubeconfig", c.kubeconfig("system:kube-scheduler"), 0o600},
		// --use-service-account-credentials: each controller acts as its own service account
		// (tokens from the API server's TokenRequest), with the roles the default RBAC gives it.
		hostFile{"/etc/systemd/system/kube-controller-manager.service", []byte(systemdUnit("kube-controller-manager", "",
			"/usr/local/bin/kube-controller-manager --kubeconfig=/etc/kubernetes/controller-manager.kubeconfig --use-service-account-credentials --bind-address=127.0.0.1 --v=2")), 0o644},
		hostFile{"/etc/systemd/system/kube-scheduler.service", []byte(systemdUnit("kube-scheduler", "",
			"/usr/local/bin/kube-scheduler --kubeconfig=/etc/kubernetes/scheduler.kubeconfig --bind-address=127.0.0.1 --v=2")), 0o644},
	)
}
