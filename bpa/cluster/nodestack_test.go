package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/edgefleet/edgefleet/bpa/charts"
	"github.com/edgefleet/edgefleet/bpa/cluster"
	"github.com/edgefleet/edgefleet/bpa/install"
	"github.com/edgefleet/edgefleet/pkg/secrets"
	"github.com/edgefleet/edgefleet/pkg/sshexec"
	"github.com/edgefleet/edgefleet/test/builders"
	"github.com/edgefleet/edgefleet/test/testhosts"
	"github.com/edgefleet/edgefleet/test/testutil"
	"github.com/edgefleet/edgefleet/test/testvault"
)

// nodeStackUnits are the units of the real node stack's packages, whose journals a failed test
// logs.
var nodeStackUnits = []string{"etcd", "edgefleet-kms", "kube-apiserver", "edgefleet-apiproxy", "kube-controller-manager", "kube-scheduler", "containerd", "edgefleet-pod-network", "kubelet", "kube-proxy"}

// TestRealNodeStack brings up a real cluster on three real hosts from packages only (needs
// root): the BPA, unchanged, installs what the manifests say — etcd, kube-apiserver,
// kube-controller-manager and kube-scheduler on the control-plane host; the host's endpoint of
// the API servers (api-proxy), containerd (Debian 12's containerd, runc and CNI plugins,
// repackaged), the pod network, kubelet and kube-proxy on every host — and the cluster's images (pause, webapp, coredns of hack/images), imported by the
// containerd package. Real kubelets report the Nodes Ready; the real scheduler puts a
// Deployment's two replicas on the two workers; a pod on one worker reaches the pod on the
// other by its address and both through a ClusterIP Service (kube-proxy), and its logs come back
// through the API server from its kubelet. The coredns and webapp charts, installed as the BPA
// installs charts, make the cluster's DNS: a pod on one worker reaches webapp by its name, and
// a pod on the other worker answers. A worker reboots; a kubelet patch drains node after node
// while webapp answers every request, one node cordoned at a time; the same patch again does
// nothing. The cluster is built with a secretbox key and moved to the KMS plugin (Vault over
// TLS) in three runs, its Secrets readable at every step. A second run right after the
// bring-up does nothing; the hosts' keys are pinned in Vault, and a restarted BPA refuses a
// changed one (a worker left out, a control-plane host stopping the run). Many checks of the
// whole system on five hosts are in e2e/realhosts (a killed BPA's next run, the Secret
// encryption key's rotation, a failing patch rolled back, keys in Vault only).
func TestRealNodeStack(t *testing.T) {
	t.Parallel() // beside the other real-host test: both mostly wait on their hosts
	ctx := t.Context()
	signer, authorizedKey := testhosts.SSHKey(t)
	hn := testhosts.StartHosts(t, 3, authorizedKey, testhosts.HostOptions{})
	// Vault serves the BPA's secrets and the cluster's KMS plugin, over TLS on the hosts' gateway.
	vault := testvault.StartVaultWith(t, testvault.VaultOptions{Host: hn.Gateway.String()})
	store := secrets.NewVault(vault.Client, "secret", "edgefleet")
	exec := sshexec.New(signer, &sshexec.StoredHostKeys{Store: store, Prefix: "hostkey-"}, sshexec.Options{Parallelism: 3})
	t.Cleanup(exec.Close)
	kms := clusterKMS(t, vault, "real")

	// The images the nodes run, imported through the containerd package: nothing is pulled.
	// pause is the sandbox image the containerd recipe's configuration names.
	images := map[string]builders.BuiltImage{}
	var clusterImages []install.Image
	for _, name := range []string{"pause", "webapp", "coredns"} {
		img := builders.BuildImage(t, name)
		images[name] = img
		clusterImages = append(clusterImages, install.Image{Name: img.Tag, Digest: img.Digest, Archive: sshexec.Bytes(img.Archive)})
	}
	webapp := images["webapp"].Tag
	spec := cluster.Spec{
		Name:              "real",
		KubernetesVersion: kubernetesVersion,
		Workers:           2,
		Images:            clusterImages,
		// Built with a secretbox key; moved to the KMS plugin below (kms.moveToKMS).
	}
	for _, p := range append(builders.StackPackages(builders.KubernetesVersion), builders.PackageVersion{Name: "kms-plugin", Version: "0.1.0"}) {
		spec.Packages = append(spec.Packages, pkg(builders.BuildPackage(t, p.Name, p.Version, nil)))
	}
	hosts := map[string]*testhosts.Host{}
	for i, h := range hn.Hosts {
		hosts[h.Name] = h
		spec.Hosts = append(spec.Hosts, cluster.Host{
			Name: h.Name, IP: h.IP, SSH: sshexec.Target{Name: h.Name, Addr: h.SSHAddr()},
			ControlPlane: i == 0, ProviderID: "metal3://site/" + h.Name,
		})
	}
	workers := []string{hn.Hosts[1].Name, hn.Hosts[2].Name}
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // the test's context is done by now
		defer cancel()
		for _, h := range hn.Hosts {
			out, _ := h.Exec(ctx, "systemctl", "--no-pager", "--failed")
			t.Logf("%s: systemctl --failed:\n%s", h.Name, out)
			for _, u := range nodeStackUnits {
				out, _ := h.Exec(ctx, "journalctl", "--no-pager", "-n", "40", "-u", u)
				if !strings.Contains(string(out), "-- No entries --") {
					t.Logf("%s: journal of %s:\n%s", h.Name, u, out)
				}
			}
			out, _ = h.Exec(ctx, "sh", "-c", "ip route; iptables-save -t nat | head -60")
			t.Logf("%s: routes and nat rules:\n%s", h.Name, out)
		}
	})

	start := time.Now()
	res, err := cluster.New(install.New(exec), store).Run(ctx, spec)
	if err != nil {
		t.Fatalf("bring-up: %v\nran: %v", err, res.Ran())
	}
	t.Logf("bring-up: %d install steps, %d files and %d image imports in %s", len(res.Ran()), res.Files, res.Images, time.Since(start).Round(time.Millisecond))
	if want := len(spec.Images) * len(spec.Hosts); res.Images != want {
		t.Errorf("%d image imports, want %d: each of the %d images on each of the %d hosts (containerd runs on all)", res.Images, want, len(spec.Images), len(spec.Hosts))
	}
	// Each image is named by its tag in containerd (the OCI archive's index.json annotation).
	for _, h := range hn.Hosts {
		out, err := h.Exec(ctx, "/opt/edgefleet/packages/containerd/current/files/bin/ctr", "-n", "k8s.io", "images", "list", "-q")
		if err != nil {
			t.Fatal(err)
		}
		for _, img := range images {
			if !slices.Contains(strings.Fields(string(out)), img.Tag) {
				t.Errorf("%s: containerd's images %q, want %s among them", h.Name, out, img.Tag)
			}
		}
	}
	// activate: the units (re)started until the health check passed — for kubelet, from its
	// start to its Node Ready.
	for i, l := range res.Levels {
		t.Logf("level %d (%s): %s", i, strings.Join(l.Packages, ", "), l.Took.Round(time.Millisecond))
		for _, j := range l.Jobs {
			var activate time.Duration
			for _, st := range j.Install.Steps {
				if st.Step == "activate" {
					activate = st.Duration
				}
			}
			t.Logf("  %s/%s %s: %s (activate: %s)", j.Host, j.Package, j.Install.Version, j.Took.Round(time.Millisecond), activate.Round(time.Millisecond))
		}
	}

	cs := appClient(t, store, spec.Name)

	// Every node Ready as its kubelet reports it, on containerd; the control plane tainted.
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes.Items) != len(spec.Hosts) {
		t.Errorf("%d nodes, want %d", len(nodes.Items), len(spec.Hosts))
	}
	for _, n := range nodes.Items {
		ready := false
		for _, c := range n.Status.Conditions {
			ready = ready || c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue
		}
		info := n.Status.NodeInfo
		t.Logf("node %s: ready %v, kubelet %s, runtime %s, provider ID %s, taints %v, created %s", n.Name, ready, info.KubeletVersion,
			info.ContainerRuntimeVersion, n.Spec.ProviderID, n.Spec.Taints, n.CreationTimestamp.Sub(start).Round(time.Millisecond))
		if !ready || info.KubeletVersion != kubernetesVersion || !strings.HasPrefix(info.ContainerRuntimeVersion, "containerd://1.6.20") ||
			n.Spec.ProviderID != "metal3://site/"+n.Name {
			t.Errorf("node %s: ready %v, kubelet %q, runtime %q, provider ID %q; want Ready, %s, containerd://1.6.20…, metal3://site/%s",
				n.Name, ready, info.KubeletVersion, info.ContainerRuntimeVersion, n.Spec.ProviderID, kubernetesVersion, n.Name)
		}
		tainted := slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool {
			return t.Key == "node-role.kubernetes.io/control-plane" && t.Effect == corev1.TaintEffectNoSchedule
		})
		if cp := n.Name == hn.Hosts[0].Name; tainted != cp {
			t.Errorf("node %s: control-plane taint %v, want %v", n.Name, tainted, cp)
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	// Each host's key is pinned in Vault, where it outlives the BPA (a restarted BPA reads it
	// back: see the changed host keys at the end).
	for _, h := range spec.Hosts {
		if pinned, err := (&sshexec.StoredHostKeys{Store: store, Prefix: "hostkey-"}).Get(ctx, h.Name); err != nil || pinned == nil {
			t.Errorf("%s: host key pinned in Vault: %v (%v)", h.Name, pinned != nil, err)
		}
	}
	// Running again redoes nothing.
	bu := cluster.New(install.New(exec), store)
	if again, err := bu.Run(ctx, spec); err != nil || len(again.Ran()) != 0 || again.Files != 0 {
		t.Errorf("a second run: %v; ran %v, wrote %d files; want nothing done", err, again.Ran(), again.Files)
	}

	// The running cluster moves from its secretbox key to the KMS plugin (Vault), phase by
	// phase; then etcd on the control-plane host holds a new Secret through the plugin, its
	// value nowhere in clear, and it reads back.
	kms.moveToKMS(t, bu, &spec, cs, hn.Hosts[0])
	kms.secretsEncrypted(t, cs, hn.Hosts[0], "after the move")

	// A new token of the plugin's ServiceAccount reaches the host at the next run and the
	// plugin logs in with it, unrestarted (the token does not count in the package's
	// configuration digest): Vault's log-ins of its role count one more.
	kms.renewToken(t, bu, &spec, hn.Hosts[0])
	kms.secretsEncrypted(t, cs, hn.Hosts[0], "after the token's renewal")

	// A namespace of the test; the controller manager gives it its default service account.
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "nodestack"}}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, time.Minute, "the namespace's default service account (kube-controller-manager)", func() (bool, string) {
		_, err := cs.CoreV1().ServiceAccounts(ns.Name).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, fmt.Sprint(err)
	})

	// Two replicas, at most one per node: the scheduler puts them on the two workers (the
	// control plane is tainted).
	labels := map[string]string{"app": "pair"}
	podSpec := testhosts.WebappPodSpec(testhosts.WebappContainer(webapp, "webapp"))
	podSpec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			LabelSelector: &metav1.LabelSelector{MatchLabels: labels},
			TopologyKey:   corev1.LabelHostname,
		}},
	}}
	replicas := int32(2)
	start = time.Now()
	if _, err := cs.AppsV1().Deployments(ns.Name).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "pair"},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: podSpec},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var backends []corev1.Pod
	testutil.WaitFor(t, 3*time.Minute, "deployment pair: 2 pods Running", func() (bool, string) {
		pods, err := cs.CoreV1().Pods(ns.Name).List(ctx, metav1.ListOptions{LabelSelector: "app=pair"})
		if err != nil {
			return false, err.Error()
		}
		var states []string
		running := 0
		for i := range pods.Items {
			states = append(states, testhosts.PodState(&pods.Items[i]))
			if pods.Items[i].Status.Phase == corev1.PodRunning {
				running++
			}
		}
		backends = pods.Items
		return running == 2 && len(pods.Items) == 2, strings.Join(states, "; ")
	})
	t.Logf("deployment created to both pods Running: %s", time.Since(start).Round(time.Millisecond))
	var on []string
	byName := map[string]*corev1.Pod{}
	for i := range backends {
		p := &backends[i]
		on = append(on, p.Spec.NodeName)
		byName[p.Name] = p
		t.Logf("pod %s on %s, IP %s", p.Name, p.Spec.NodeName, p.Status.PodIP)
	}
	slices.Sort(on)
	if !slices.Equal(on, workers) {
		t.Fatalf("the replicas run on %v, want one on each worker %v", on, workers)
	}

	// An image no Release shipped: nothing is pulled, and the pod's events name the image.
	const missing = "edgefleet.test/missing:1.0"
	if _, err := cs.CoreV1().Pods(ns.Name).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "missing-image"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: missing, ImagePullPolicy: corev1.PullNever}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, time.Minute, "an event naming the missing image", func() (bool, string) {
		evs, err := cs.CoreV1().Events(ns.Name).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=missing-image"})
		if err != nil {
			return false, err.Error()
		}
		var seen []string
		for _, e := range evs.Items {
			if e.Reason == "ErrImageNeverPull" && strings.Contains(e.Message, missing) {
				t.Logf("missing image: %s: %s", e.Reason, e.Message)
				return true, ""
			}
			seen = append(seen, e.Reason+": "+e.Message)
		}
		return false, strings.Join(seen, "; ")
	})
	if err := cs.CoreV1().Pods(ns.Name).Delete(ctx, "missing-image", metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))}); err != nil {
		t.Fatal(err)
	}

	// A ClusterIP Service in front; the first answer awaited from the first worker itself
	// (kube-proxy programs the node's own connections too).
	svc, err := cs.CoreV1().Services(ns.Name).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "pair"},
		Spec: corev1.ServiceSpec{
			Selector: labels,
			Ports:    []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	svcURL := "http://" + svc.Spec.ClusterIP + "/"
	start = time.Now()
	client := hosts[workers[0]]
	testutil.WaitFor(t, time.Minute, "service "+svcURL+" from "+client.Name, func() (bool, string) {
		out, err := client.Exec(ctx, "curl", "-sS", "--max-time", "2", svcURL)
		return err == nil && strings.HasPrefix(string(out), "hello from "), fmt.Sprintf("%q (%v)", out, err)
	})
	t.Logf("service created to its first answer on %s: %s", client.Name, time.Since(start).Round(time.Millisecond))

	// A client pod on the first worker: one container asks the other worker's backend by its
	// address, one asks the Service 40 times, each on a new connection, one a server off the
	// cluster (the root namespace has no route to the pods: it sees their node, masqueraded).
	// Their output comes back through the API server from the kubelet (pods/log).
	nc := &nodeStackCheck{t: t, cs: cs, ns: ns.Name, image: webapp, svcURL: svcURL, outsideURL: hn.OutsideServer(t),
		client: client.Name, clientIP: client.IP.String(), backends: byName}
	nc.clientPod("client")

	// The cluster's DNS and the test application, installed as the BPA installs a Release's
	// charts: each a release named after its chart in the namespace the chart names, by the
	// real chart installer (helm SDK), with the cluster's facts as global values. CoreDNS
	// serves at the address every kubelet gives its pods (clusterDNS) only because the BPA
	// tells the chart (global.edgefleet.cluster.dnsServiceIP).
	facts, err := spec.ClusterValues()
	if err != nil {
		t.Fatal(err)
	}
	inst, err := charts.New(appConfig(t, store, spec.Name), charts.Options{})
	if err != nil {
		t.Fatal(err)
	}
	releases := map[string]charts.Metadata{}
	start = time.Now()
	for _, name := range []string{"coredns", "webapp"} {
		c := builders.BuildChart(t, name, "", nil)
		meta, err := charts.Describe(c.Archive)
		if err != nil {
			t.Fatal(err)
		}
		st, err := inst.Apply(ctx, charts.Release{Name: meta.Name, Namespace: meta.Namespace, Chart: c.Archive, Values: charts.WithCluster(nil, facts)})
		if err != nil {
			t.Fatalf("chart %s: %v", name, err)
		}
		releases[name] = meta
		t.Logf("chart %s %s: release %s in %s, revision %d %s", st.Chart, st.Version, st.Name, st.Namespace, st.Revision, st.State)
	}
	if ns := releases["coredns"].Namespace; ns != metav1.NamespaceSystem {
		t.Errorf("the coredns chart goes to namespace %s, want %s (its %s annotation)", ns, metav1.NamespaceSystem, charts.NamespaceAnnotation)
	}
	for _, name := range []string{"coredns", "webapp"} {
		st := chartReady(t, inst, releases[name])
		t.Logf("charts applied to %s's pods ready (%d/%d, its chart status): %s", name, st.Pods.Ready, st.Pods.Desired, time.Since(start).Round(time.Millisecond))
	}
	dns, err := cs.CoreV1().Services(metav1.NamespaceSystem).Get(ctx, "kube-dns", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if dns.Spec.ClusterIP != facts.DNSServiceIP {
		t.Errorf("service kube-dns at %s, want the cluster's DNS address %s", dns.Spec.ClusterIP, facts.DNSServiceIP)
	}
	podsOf(t, cs, metav1.NamespaceSystem, "k8s-app=kube-dns")
	webappPods := podsOf(t, cs, releases["webapp"].Namespace, "app.kubernetes.io/name=webapp")
	on = nil
	for _, p := range webappPods {
		on = append(on, p.Spec.NodeName)
	}
	slices.Sort(on)
	if len(webappPods) != 3 || !slices.Contains(on, workers[0]) || !slices.Contains(on, workers[1]) || slices.Contains(on, hn.Hosts[0].Name) {
		t.Fatalf("webapp's pods run on %v, want 3 spread over the workers %v", on, workers)
	}

	// kube-proxy on the client's node routes webapp to each of its 3 pods before a pod there
	// asks: on a loaded machine the endpoints reached it after the pods were ready, and all 40
	// answers came from the one pod on its own node.
	webappRule := fmt.Sprintf(`--comment "%s/webapp:http"`, releases["webapp"].Namespace)
	testutil.WaitFor(t, time.Minute, "kube-proxy on "+client.Name+" to route webapp to its 3 pods", func() (bool, string) {
		out, err := client.Exec(ctx, "sh", "-c", "iptables -t nat -S | grep -F -- '"+webappRule+"' | grep -c -- '-j DNAT'")
		return err == nil && strings.TrimSpace(string(out)) == "3", fmt.Sprintf("%s DNAT rules (%v)", strings.TrimSpace(string(out)), err)
	})

	// A pod on the first worker asks for webapp by its name (the Service's, in the cluster's
	// domain), 40 times: every answer comes from a webapp pod, some from the other worker's.
	webappURL := fmt.Sprintf("http://webapp.%s.svc.%s/", releases["webapp"].Namespace, facts.DNSDomain)
	lines := nc.run("dns-client", testhosts.WebappContainer(webapp, "by-name", "-get", webappURL, "-count", "40"))["by-name"]
	answers := map[string]int{}
	for _, line := range lines {
		if p := testhosts.AnsweredBy(line, webappPods); p != nil {
			answers[p.Name]++
		} else {
			t.Errorf("%s from pod dns-client on %s: %q", webappURL, client.Name, line)
		}
	}
	var remote []string
	for n, count := range answers {
		if node := webappPods[n].Spec.NodeName; node != client.Name {
			remote = append(remote, fmt.Sprintf("%s on %s (%d times)", n, node, count))
		}
	}
	t.Logf("answers of %s to pod dns-client on %s: %v; from another node: %s", webappURL, client.Name, answers, strings.Join(remote, ", "))
	if len(lines) != 40 {
		t.Errorf("%d answers of %s to pod dns-client, want 40", len(lines), webappURL)
	}
	if len(remote) == 0 {
		t.Errorf("no answer of %s to pod dns-client on %s came from a webapp pod on another node", webappURL, client.Name)
	}

	for _, h := range hn.Hosts {
		usage, rss, err := h.Memory()
		if err != nil {
			t.Error(err)
			continue
		}
		t.Logf("memory of host %s (everything it runs): %d MiB with page cache, %d MiB resident", h.Name, usage>>20, rss>>20)
	}

	// The second worker loses its power and boots again: every package's units start with
	// the host (the pod network's routes and rule are made again), kubelet runs its pod again
	// in a new sandbox, and the client on the first worker reaches it again — its answers
	// come back through the rebooted host's route to the first worker's pods.
	rebooted := hosts[workers[1]]
	var before *corev1.Pod
	for _, p := range byName {
		if p.Spec.NodeName == rebooted.Name {
			before = p
		}
	}
	if err := rebooted.Stop(); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	if err := rebooted.Boot(); err != nil {
		t.Fatal(err)
	}
	if _, err := rebooted.WaitSSH(ctx); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 3*time.Minute, "pod "+before.Name+" running again on "+rebooted.Name+" after its reboot", func() (bool, string) {
		p, err := cs.CoreV1().Pods(ns.Name).Get(ctx, before.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		byName[p.Name] = p
		ready := slices.ContainsFunc(p.Status.Conditions, func(c corev1.PodCondition) bool {
			return c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue
		})
		return ready && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].ContainerID != before.Status.ContainerStatuses[0].ContainerID &&
			p.Status.ContainerStatuses[0].State.Running != nil, testhosts.PodState(p)
	})
	t.Logf("%s booted to its pod running again: %s (pod IP %s, was %s)", rebooted.Name, time.Since(start).Round(time.Millisecond), byName[before.Name].Status.PodIP, before.Status.PodIP)
	for _, check := range [][]string{
		{"systemctl", "is-active", "edgefleet-apiproxy", "containerd", "edgefleet-pod-network", "kubelet", "kube-proxy"},
		{"sh", "-c", "iptables -t nat -S POSTROUTING | grep -- '--comment edgefleet-pod-network'"},
		{"ip", "-4", "route", "show", "exact", mustPodCIDR(t, hn.Hosts[1].IP)},
	} {
		out, err := rebooted.Exec(ctx, check...)
		t.Logf("%s after the reboot: %s: %s", rebooted.Name, strings.Join(check, " "), strings.TrimSpace(string(out)))
		if err != nil || len(out) == 0 {
			t.Errorf("%s after the reboot: %s: %q (%v)", rebooted.Name, strings.Join(check, " "), out, err)
		}
	}
	// The Service's endpoints follow the pod's new address: the first worker's kube-proxy
	// sends a connection to the rebooted host's pod again.
	testutil.WaitFor(t, time.Minute, "service "+svcURL+" answered by "+before.Name+" on "+client.Name, func() (bool, string) {
		out, err := client.Exec(ctx, "curl", "-sS", "--max-time", "2", svcURL)
		return err == nil && string(out) == "hello from "+before.Name+" on "+rebooted.Name+"\n", fmt.Sprintf("%q (%v)", out, err)
	})
	nc.clientPod("client-after-reboot")
	for _, name := range []string{"coredns", "webapp"} {
		st := chartReady(t, inst, releases[name])
		t.Logf("after the reboot, %s's pods ready (its chart status): %d/%d", name, st.Pods.Ready, st.Pods.Desired)
	}

	// A kubelet patch (patch.drain): node by node, control plane first, each cordoned and
	// drained (the Deployment's pod evicted; its replacement waits, the other worker has one
	// already), kubelet replaced, Ready, uncordoned; the Deployment runs on both workers after.
	// webapp answers every request meanwhile: a drain evicts its pods one at a time (its
	// disruption budget), each going on answering while the Service forgets it (its drain);
	// the requests come from the control-plane host, through its kube-proxy.
	webappSvc, err := cs.CoreV1().Services(releases["webapp"].Namespace).Get(ctx, "webapp", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	reqs := testhosts.StartRequests(t, hn.Hosts[0], "http://"+webappSvc.Spec.ClusterIP+"/")
	cordons := watchCordons(t, cs)
	start = time.Now()
	patched := withPackage(spec, pkg(builders.BuildPackage(t, "kubelet", "1.36.3-edgefleet.1", nil)))
	pres, err := bu.Patch(ctx, patched, "kubelet")
	if err != nil {
		t.Fatalf("kubelet patch: %v", err)
	}
	cordoned, atOnce := cordons()
	answered, failed := reqs.Stop()
	t.Logf("requests to webapp (service %s) from %s through the patch: %d answered, %d failed", webappSvc.Spec.ClusterIP, hn.Hosts[0].Name, answered, len(failed))
	if len(failed) > 0 || answered == 0 {
		t.Errorf("requests to webapp through the patch: %d answered, %d failed: %q", answered, len(failed), failed)
	}
	t.Logf("kubelet patch through %v: %s", order(pres), time.Since(start).Round(time.Millisecond))
	if got, want := order(pres), []string{hn.Hosts[0].Name, hn.Hosts[1].Name, hn.Hosts[2].Name}; !slices.Equal(got, want) {
		t.Errorf("patched %v, want %v", got, want)
	}
	for _, n := range pres.Nodes {
		if n.From != "1.36.3" || n.To != "1.36.3-edgefleet.1" || n.Skipped {
			t.Errorf("node %+v", n)
		}
		if cordoned[n.Host] != 1 {
			t.Errorf("node %s cordoned %d times, want once", n.Host, cordoned[n.Host])
		}
	}
	if atOnce != 1 {
		t.Errorf("up to %d nodes cordoned at once, want 1", atOnce)
	}
	testutil.WaitFor(t, 3*time.Minute, "deployment pair: 2 pods Running, one on each worker, every node Ready and schedulable", func() (bool, string) {
		pods, err := cs.CoreV1().Pods(ns.Name).List(ctx, metav1.ListOptions{LabelSelector: "app=pair"})
		if err != nil {
			return false, err.Error()
		}
		var on, states []string
		for i := range pods.Items {
			states = append(states, testhosts.PodState(&pods.Items[i]))
			if pods.Items[i].Status.Phase == corev1.PodRunning && pods.Items[i].DeletionTimestamp == nil {
				on = append(on, pods.Items[i].Spec.NodeName)
			}
		}
		slices.Sort(on)
		nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, n := range nodes.Items {
			ready := slices.ContainsFunc(n.Status.Conditions, func(c corev1.NodeCondition) bool {
				return c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue
			})
			if !ready || n.Spec.Unschedulable {
				states = append(states, fmt.Sprintf("node %s: ready %v, unschedulable %v", n.Name, ready, n.Spec.Unschedulable))
			}
		}
		return slices.Equal(on, workers) && len(states) == len(pods.Items), strings.Join(states, "; ")
	})
	t.Logf("kubelet patch started to the deployment running on both workers again: %s", time.Since(start).Round(time.Millisecond))
	for _, name := range []string{"coredns", "webapp"} {
		st := chartReady(t, inst, releases[name])
		t.Logf("after the patch, %s's pods ready (its chart status): %d/%d", name, st.Pods.Ready, st.Pods.Desired)
	}
	// Again: every node has it, nothing to do.
	if pres, err = bu.Patch(ctx, patched, "kubelet"); err != nil {
		t.Fatalf("the kubelet patch again: %v", err)
	}
	for _, n := range pres.Nodes {
		if !n.Skipped {
			t.Errorf("the kubelet patch again touched %s", n.Host)
		}
	}

	// Hosts reprovisioned behind the BPA's back have new host keys. A restarted BPA (a new
	// executor, the pins read back from Vault) leaves a worker with a changed key out, and
	// stops at a control-plane host with one.
	// A reprovisioned host was rebooted: its SSH connections ended (sshd's connection
	// processes are killed; the listener, "sshd: /usr/sbin/sshd ...", is restarted).
	newKeys := func(h *testhosts.Host) {
		t.Helper()
		if out, err := h.Exec(ctx, "sh", "-c", "rm /etc/ssh/ssh_host_* && pkill -KILL -f '^sshd: [^/]'; systemctl restart ssh.service"); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		if _, err := h.WaitSSH(ctx); err != nil {
			t.Fatal(err)
		}
	}
	restartedExec := sshexec.New(signer, &sshexec.StoredHostKeys{Store: store, Prefix: "hostkey-"}, sshexec.Options{})
	t.Cleanup(restartedExec.Close)
	restarted := cluster.New(install.New(restartedExec), store)
	var hk *sshexec.HostKeyError
	newKeys(hosts[workers[1]])
	if res, err := restarted.Run(ctx, patched); err != nil || len(res.LeftOut) != 1 || res.LeftOut[0].Host != workers[1] || !errors.As(res.LeftOut[0].Err, &hk) {
		t.Fatalf("run: left out %+v, %v; want %s left out with a *HostKeyError", res.LeftOut, err, workers[1])
	}
	newKeys(hn.Hosts[0])
	if _, err := restarted.Run(ctx, patched); !errors.As(err, &hk) || hk.Host != hn.Hosts[0].Name {
		t.Fatalf("err %v, want a *HostKeyError for %s", err, hn.Hosts[0].Name)
	}
}

// watchCordons watches the nodes of cs until the returned func is called, which returns how
// often each node was cordoned and the most nodes cordoned at once.
func watchCordons(t *testing.T, cs kubernetes.Interface) func() (cordons map[string]int, atOnce int) {
	t.Helper()
	w, err := cs.CoreV1().Nodes().Watch(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cordons, atOnce := map[string]int{}, 0
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		now := map[string]bool{}
		for ev := range w.ResultChan() {
			n, ok := ev.Object.(*corev1.Node)
			if !ok {
				continue
			}
			if n.Spec.Unschedulable && !now[n.Name] {
				cordons[n.Name]++
			}
			now[n.Name] = n.Spec.Unschedulable
			c := 0
			for _, u := range now {
				if u {
					c++
				}
			}
			atOnce = max(atOnce, c)
		}
	}()
	return func() (map[string]int, int) {
		w.Stop()
		<-watched
		return cordons, atOnce
	}
}

// chartReady waits until the release of chart m is deployed with all its pods ready, as its
// chart status counts them (what the BPA reports), and returns that status.
func chartReady(t *testing.T, inst *charts.Installer, m charts.Metadata) charts.Status {
	t.Helper()
	var st charts.Status
	testutil.WaitFor(t, 3*time.Minute, "chart "+m.Name+": its pods ready", func() (bool, string) {
		var err error
		if st, err = inst.Status(t.Context(), m.Name, m.Namespace); err != nil {
			return false, err.Error()
		}
		return st.State == charts.StateDeployed && st.Pods.Desired > 0 && st.Pods.Ready == st.Pods.Desired,
			fmt.Sprintf("%s, pods %d/%d ready; not ready: %s", st.State, st.Pods.Ready, st.Pods.Desired, strings.Join(st.Pods.NotReady, ", "))
	})
	return st
}

// podsOf lists the pods of namespace matching selector, by name, and logs where they run.
func podsOf(t *testing.T, cs kubernetes.Interface, namespace, selector string) map[string]*corev1.Pod {
	t.Helper()
	list, err := cs.CoreV1().Pods(namespace).List(t.Context(), metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	pods := map[string]*corev1.Pod{}
	for i := range list.Items {
		p := &list.Items[i]
		pods[p.Name] = p
		t.Logf("pod %s/%s on %s, IP %s: %s", p.Namespace, p.Name, p.Spec.NodeName, p.Status.PodIP, testhosts.PodState(p))
	}
	return pods
}

// nodeStackCheck checks the pod network and the Service of TestRealNodeStack from a client pod.
type nodeStackCheck struct {
	t          *testing.T
	cs         kubernetes.Interface
	ns         string
	image      string // the webapp image, whose program is also the client (webapp -get)
	svcURL     string
	outsideURL string                 // a server off the cluster
	client     string                 // the node of the client pods
	clientIP   string                 // its address
	backends   map[string]*corev1.Pod // the Service's, by name
}

// clientPod runs a pod named name on the client node, whose containers ask the backend on the
// other node by its address (once), the Service (40 times, each on a new connection) and the
// server off the cluster (once), and checks their answers.
func (nc *nodeStackCheck) clientPod(name string) {
	t := nc.t
	var remote *corev1.Pod
	for _, p := range nc.backends {
		if p.Spec.NodeName != nc.client {
			remote = p
		}
	}
	if remote == nil {
		t.Fatalf("no backend on another node than %s", nc.client)
	}
	logs := nc.run(name,
		testhosts.WebappContainer(nc.image, "by-ip", "-get", "http://"+remote.Status.PodIP+":8080/", "-count", "1"),
		testhosts.WebappContainer(nc.image, "service", "-get", nc.svcURL, "-count", "40"),
		testhosts.WebappContainer(nc.image, "outside", "-get", nc.outsideURL, "-count", "1"),
	)
	if got, want := logs["by-ip"], "hello from "+remote.Name+" on "+remote.Spec.NodeName; len(got) != 1 || got[0] != want {
		t.Errorf("pod %s on %s to pod %s on %s by IP %s: %q, want %q", name, nc.client, remote.Name, remote.Spec.NodeName, remote.Status.PodIP, got, want)
	}
	if got, want := logs["outside"], "outside, from "+nc.clientIP; len(got) != 1 || got[0] != want {
		t.Errorf("pod %s on %s to a server off the cluster: %q, want %q (masqueraded to its node's address)", name, nc.client, got, want)
	}
	answers := map[string]int{}
	for _, line := range logs["service"] {
		if p := testhosts.AnsweredBy(line, nc.backends); p != nil {
			answers[p.Name]++
		} else {
			t.Errorf("service %s from pod %s: %q", nc.svcURL, name, line)
		}
	}
	t.Logf("answers of service %s to 40 connections from pod %s on %s: %v", nc.svcURL, name, nc.client, answers)
	if len(logs["service"]) != 40 {
		t.Errorf("%d answers of service %s, want 40", len(logs["service"]), nc.svcURL)
	}
	// Both backends answer unless each connection's random choice is broken (2^-39).
	for n, p := range nc.backends {
		if answers[n] == 0 {
			t.Errorf("pod %s (on %s) never answered through service %s", n, p.Spec.NodeName, nc.svcURL)
		}
	}
}

// run runs a pod named name of containers on the client node until it succeeds, and returns
// each container's output lines.
func (nc *nodeStackCheck) run(name string, containers ...corev1.Container) map[string][]string {
	return testhosts.RunPod(nc.t, nc.cs, nc.ns, name, nc.client, containers...)
}

// mustPodCIDR is the pod CIDR of the host at ip.
func mustPodCIDR(t *testing.T, ip netip.Addr) string {
	cidr, err := cluster.NodePodCIDR(cluster.DefaultPodCIDR, ip)
	if err != nil {
		t.Fatal(err)
	}
	return cidr
}

const kubernetesVersion = "v" + builders.KubernetesVersion

func pkg(b builders.BuiltPackage) install.Package {
	return install.Package{Manifest: b.Manifest, Digest: b.Digest, Archive: b.Open}
}

// appConfig is the client config of the application cluster, from the admin kubeconfig the
// BPA saved in store.
func appConfig(t *testing.T, store secrets.Store, name string) *rest.Config {
	t.Helper()
	kc, err := store.Get(t.Context(), cluster.AdminKubeconfigSecret(name))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kc["value"])
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// appClient is a client of the application cluster (appConfig).
func appClient(t *testing.T, store secrets.Store, name string) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(appConfig(t, store, name))
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// order lists the hosts a patch went through, in order.
func order(r *cluster.PatchResult) []string {
	var hs []string
	for _, n := range r.Nodes {
		hs = append(hs, n.Host)
	}
	return hs
}

// withPackage is spec with p in place of its package of the same name.
func withPackage(spec cluster.Spec, p install.Package) cluster.Spec {
	spec.Packages = slices.Clone(spec.Packages)
	for i, old := range spec.Packages {
		if old.Manifest.Name == p.Manifest.Name {
			spec.Packages[i] = p
		}
	}
	return spec
}
