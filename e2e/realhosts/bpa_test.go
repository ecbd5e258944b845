package realhosts_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"maps"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	metal3api "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	. "github.com/onsi/gomega/gstruct"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
	"github.com/edgefleet/edgefleet/bpa/cluster"
	"github.com/edgefleet/edgefleet/bpa/clusterkms"
	"github.com/edgefleet/edgefleet/bpa/pki"
	"github.com/edgefleet/edgefleet/pkg/encryption"
	"github.com/edgefleet/edgefleet/pkg/secrets"
	"github.com/edgefleet/edgefleet/test/builders"
	"github.com/edgefleet/edgefleet/test/chromium"
	"github.com/edgefleet/edgefleet/test/testfleet"
	"github.com/edgefleet/edgefleet/test/testhosts"
	"github.com/edgefleet/edgefleet/test/testutil"
	"github.com/edgefleet/edgefleet/test/testvault"
)

// The BPA as the site's bootstrap provider, on five real hosts (needs root): see
// realsites_test.go for how such a site runs.
var _ = Describe("The BPA builds a site's application cluster on real hosts", Ordered, ContinueOnFailure, func() {
	const (
		site = "site-d"
		ns   = "bpa"
	)
	var (
		hn *testhosts.HostNet
		// members are the cluster's hosts: 3 control plane, 2 workers; hn's sixth host joins
		// as a worker when the workers scale out.
		members []*testhosts.Host
		vault   *testvault.Vault
		dir     string // this test's files: packages, chart, manifests
		root    string // the repository's, with the binaries in bin/
		siteD   *realSite
		gap     *airGap // the site's artifact API cut off for its install
		store   secrets.Store
		digest  = map[string]string{} // of uploaded artifacts, by name
	)

	// useRelease makes the Release name the site's.
	useRelease := func(ctx context.Context, name string) {
		GinkgoHelper()
		patch := fmt.Sprintf(`{"spec":{"cluster":{"release":%q}}}`, name)
		_, err := fleet.Kubectl(ctx, "patch", "site", site, "-n", ns, "--type", "merge", "-p", patch)
		Expect(err).NotTo(HaveOccurred())
	}
	// release creates a Release of Kubernetes version kube of the packages (keys of digest,
	// see stackWith), the images and the chart, and makes it the site's.
	release := func(ctx context.Context, name, kube string, pkgs ...string) {
		GinkgoHelper()
		createRelease(ctx, ns, name, kube, digest, pkgs...)
		useRelease(ctx, name)
	}
	// installedWith waits for the BPA to report the cluster Installed, running pkg.
	installedWith := func(ctx context.Context, pkg sitev1.InstalledPackage) {
		GinkgoHelper()
		Eventually(func(g Gomega) {
			b := siteD.bootstrap(g, ctx)
			g.Expect(b).NotTo(BeNil())
			g.Expect(b.Phase).To(Equal(sitev1.BootstrapInstalled), "bootstrap says: %s", b.Message)
			g.Expect(b.Packages).To(ContainElement(pkg))
		}).WithContext(ctx).WithTimeout(5 * time.Minute).WithPolling(time.Second).Should(Succeed())
	}
	// appClientVia is a client of the application cluster through the kubeconfig the BPA gave
	// Cluster-API, held in memory only: through the cluster's endpoint (host-0), or through
	// control-plane host h's API server.
	appClientVia := func(ctx context.Context, h *testhosts.Host) kubernetes.Interface {
		GinkgoHelper()
		secret := &corev1.Secret{}
		Expect(siteD.client.Get(ctx, client.ObjectKey{Namespace: sitev1.InfoNamespace, Name: site + "-kubeconfig"}, secret)).To(Succeed())
		cfg, err := clientcmd.RESTConfigFromKubeConfig(secret.Data["value"])
		Expect(err).NotTo(HaveOccurred())
		if h != nil {
			cfg.Host = "https://" + net.JoinHostPort(h.IP.String(), "6443")
		}
		cfg.Timeout = 20 * time.Second
		cs, err := kubernetes.NewForConfig(cfg)
		Expect(err).NotTo(HaveOccurred())
		return cs
	}
	appClient := func(ctx context.Context) kubernetes.Interface { return appClientVia(ctx, nil) }

	// webappPods are the test application's pods, by name, once its 3 replicas are Ready.
	webappPods := func(ctx context.Context, cs kubernetes.Interface) map[string]*corev1.Pod {
		GinkgoHelper()
		pods := map[string]*corev1.Pod{}
		Eventually(func(g Gomega) {
			list, err := cs.CoreV1().Pods("webapp").List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=webapp"})
			g.Expect(err).NotTo(HaveOccurred())
			clear(pods)
			var states []string
			for i := range list.Items {
				p := &list.Items[i]
				states = append(states, testhosts.PodState(p))
				if p.DeletionTimestamp == nil && slices.ContainsFunc(p.Status.Conditions, func(c corev1.PodCondition) bool {
					return c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue
				}) {
					pods[p.Name] = p
				}
			}
			g.Expect(pods).To(HaveLen(3), "webapp's pods: %s", strings.Join(states, "; "))
		}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())
		return pods
	}

	// carolToken is a token of carol, who may get kubeconfigs of the site's cluster
	// (edgefleet-cluster-user) and nothing else: made with her ServiceAccount at the first call.
	var carolsToken string
	carolToken := func(ctx context.Context) string {
		GinkgoHelper()
		if carolsToken == "" {
			var err error
			carolsToken, err = fleet.Token(ctx, ns, "carol", "edgefleet-cluster-user")
			Expect(err).NotTo(HaveOccurred())
		}
		return carolsToken
	}
	// asCarol runs the edgefleet CLI as carol.
	asCarol := func(ctx context.Context, args ...string) {
		GinkgoHelper()
		own := clientcmdapi.NewConfig()
		own.Clusters["global"] = &clientcmdapi.Cluster{Server: fleet.Global.Config.Host, CertificateAuthorityData: fleet.Global.Config.CAData}
		own.AuthInfos["carol"] = &clientcmdapi.AuthInfo{Token: carolToken(ctx)}
		own.Contexts["global"] = &clientcmdapi.Context{Cluster: "global", AuthInfo: "carol", Namespace: ns}
		own.CurrentContext = "global"
		ownFile := filepath.Join(dir, "carol-global.kubeconfig")
		Expect(clientcmd.WriteToFile(*own, ownFile)).To(Succeed())
		base := []string{"--kubeconfig", ownFile, "--api-server", fleet.APIURL}
		if fleet.APICAFile != "" {
			base = append(base, "--api-ca-file", fleet.APICAFile)
		}
		out, err := exec.CommandContext(ctx, filepath.Join(root, "bin", "edgefleet"), append(base, args...)...).CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), "edgefleet %v: %s", args, out)
	}
	// kubectlWith runs kubectl with kubeconfig.
	kubectlWith := func(ctx context.Context, kubeconfig string, args ...string) (string, error) {
		out, err := exec.CommandContext(ctx, filepath.Join(root, "bin", "kubectl"), append([]string{"--kubeconfig", kubeconfig, "--request-timeout=20s"}, args...)...).CombinedOutput()
		return string(out), err
	}

	// noFailedRequests expects no failed request; when some failed, it first writes the
	// application cluster's events of the last 15 minutes, to tell what happened then.
	noFailedRequests := func(ctx context.Context, answered int, failed []string) {
		GinkgoHelper()
		if len(failed) > 0 {
			if list, err := appClient(ctx).EventsV1().Events("").List(ctx, metav1.ListOptions{}); err == nil {
				slices.SortFunc(list.Items, func(a, b eventsv1.Event) int { return eventTime(a).Compare(eventTime(b)) })
				for _, e := range list.Items {
					if t := eventTime(e); time.Since(t) < 15*time.Minute {
						GinkgoWriter.Printf("event %s %s %s %s/%s on %s: %s\n", t.UTC().Format("15:04:05.000"), e.Type, e.Reason, e.Regarding.Kind, e.Regarding.Name, e.ReportingInstance, e.Note)
					}
				}
			}
		}
		Expect(failed).To(BeEmpty(), "%d answered", answered)
	}

	// hostLeft are the notes of the BPA's HostLeft events on the site.
	hostLeft := func(ctx context.Context) []string {
		GinkgoHelper()
		siteCS, err := kubernetes.NewForConfig(fleet.Sites[site].Config)
		Expect(err).NotTo(HaveOccurred())
		events, err := siteCS.EventsV1().Events(sitev1.InfoNamespace).List(ctx, metav1.ListOptions{FieldSelector: "reason=HostLeft"})
		Expect(err).NotTo(HaveOccurred())
		var notes []string
		for _, e := range events.Items {
			notes = append(notes, e.Note)
		}
		return notes
	}

	BeforeAll(func(ctx context.Context) {
		hn = testhosts.NewHosts(GinkgoTB(), 6, testhosts.HostOptions{})
		members = hn.Hosts[:5]
		// Over TLS on the hosts' gateway: the clusters' KMS plugins reach it (the last spec).
		vault = testvault.StartVaultWith(GinkgoTB(), testvault.VaultOptions{Host: hn.Gateway.String()})
		store = secrets.NewVault(vault.Client, "secret", "edgefleet/"+site)
		dir = GinkgoT().TempDir()
		var err error
		root, err = testutil.RepoRoot()
		Expect(err).NotTo(HaveOccurred())
		// Its kubeconfig and BMC credentials are kept in the fleet's Vault, no Secret on the global
		// cluster.
		siteD = startRealSite(ctx, site, ns, hn, 3, 5, vault, nil, func(o *testfleet.RealSiteOptions) { o.FleetVault = true })

		// The cluster starts on the previous Kubernetes minor; the upgrades go to the current.
		uploadBase(ctx, dir, builders.PreviousKubernetesVersion, digest)
		uploadKubernetes(ctx, builders.KubernetesVersion, digest)
		digest["kubelet broken"] = uploadPackage(ctx, builders.BuildPackage(GinkgoTB(), "kubelet", builders.KubernetesVersion+"-1", func(dir string) {
			Expect(os.WriteFile(filepath.Join(dir, "hooks", "health-check"), []byte("#!/bin/sh\necho 'this kubelet is broken' >&2\nexit 1\n"), 0o755)).To(Succeed())
			// It fails for good: no need to wait the 120 s a healthy kubelet may take.
			m, err := os.ReadFile(filepath.Join(dir, "manifest.yaml"))
			Expect(err).NotTo(HaveOccurred())
			Expect(string(m)).To(ContainSubstring("timeoutSeconds: 120"))
			Expect(os.WriteFile(filepath.Join(dir, "manifest.yaml"), bytes.Replace(m, []byte("timeoutSeconds: 120"), []byte("timeoutSeconds: 10"), 1), 0o644)).To(Succeed())
		}))
		digest["edge-hello"] = uploadPackage(ctx, builders.BuildPackage(GinkgoTB(), "edge-hello", "1.0.0", nil))
		// The site is air-gapped for its install: the release's artifacts come from a site pack
		// on its bootstrap image, and the only artifact API URL it has closes every connection.
		// The install spec gives the uplink back once the cluster is built.
		createRelease(ctx, ns, "bpa-1", builders.PreviousKubernetesVersion, digest, stackWith()...)
		gap = siteD.cutOff(ctx, "bpa-1", dir)
		useRelease(ctx, "bpa-1")
	})

	ReportAfterEach(func(r SpecReport) {
		if r.Failed() {
			AddReportEntry("logs", fleet.LocalController(site).Log+" "+filepath.Join(fleet.Dir, site+"-bpa.log"))
		}
	})

	skipAfterFailedBed()

	It("survives a crash of the local controller in the middle of provisioning", Label(bedLabel), func(ctx context.Context) {
		// Wait until Cluster-API's Machines exist for the hosts, the cluster not built yet, then
		// kill the local controller and start it again: the install spec finds nothing made twice.
		Eventually(func(g Gomega) {
			machines := &clusterv1.MachineList{}
			g.Expect(siteD.client.List(ctx, machines, client.InNamespace(sitev1.InfoNamespace))).To(Succeed())
			g.Expect(len(machines.Items)).To(BeNumerically(">=", 3))
		}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(200 * time.Millisecond).Should(Succeed())
		ac := &sitev1.ApplicationCluster{}
		Expect(siteD.client.Get(ctx, client.ObjectKey{Namespace: sitev1.InfoNamespace, Name: site}, ac)).To(Succeed())
		Expect(ac.Status.Phase).NotTo(Equal(sitev1.ClusterProvisioned), "the kill must come before the end")
		Expect(fleet.KillLocalController(site)).To(Succeed())
		_, err := fleet.StartLocalController(ctx, site)
		Expect(err).NotTo(HaveOccurred())
	})

	It("finishes an install the BPA was killed in, without redoing what was done", Label(bedLabel), func(ctx context.Context) {
		// Wait until etcd is active on some control-plane host, then kill the BPA.
		var done []*testhosts.Host
		Eventually(func(g Gomega) {
			done = nil
			for _, h := range hn.Hosts[:3] {
				if h.Running() && installed(ctx, h, "etcd") == "3.6.16 3.6.16" {
					done = append(done, h)
				}
			}
			g.Expect(done).NotTo(BeEmpty(), "bootstrap: %+v", siteD.bootstrap(g, ctx))
		}).WithContext(ctx).WithTimeout(4 * time.Minute).WithPolling(200 * time.Millisecond).Should(Succeed())
		Expect(fleet.KillBPA(site)).To(Succeed())
		// etcd's service on those hosts: the same run of it must serve after the restart.
		invocation := map[string]string{}
		for _, h := range done {
			out, err := h.Exec(ctx, "systemctl", "show", "-p", "InvocationID", "--value", "etcd.service")
			Expect(err).NotTo(HaveOccurred())
			invocation[h.Name] = strings.TrimSpace(string(out))
		}
		Expect(siteD.bootstrap(Default, ctx).Phase).NotTo(Equal(sitev1.BootstrapInstalled), "the kill must come before the end")
		Expect(siteD.startBPA(ctx)).To(Succeed())

		Eventually(func(g Gomega) {
			b := siteD.bootstrap(g, ctx)
			g.Expect(b).NotTo(BeNil())
			g.Expect(b.Phase).To(Equal(sitev1.BootstrapInstalled), "bootstrap says: %s", b.Message)
		}).WithContext(ctx).WithTimeout(5 * time.Minute).WithPolling(time.Second).Should(Succeed())
		for _, h := range done {
			out, err := h.Exec(ctx, "systemctl", "show", "-p", "InvocationID", "--value", "etcd.service")
			Expect(err).NotTo(HaveOccurred())
			Expect(strings.TrimSpace(string(out))).To(Equal(invocation[h.Name]), "etcd on %s was started again after the restart", h.Name)
		}
	})

	It("builds 3 control-plane and 2 worker nodes from the site pack alone, the artifact API cut off, installs the charts, and the global Site shows it", Label(bedLabel), func(ctx context.Context) {
		s := &fleetv1.Site{}
		Eventually(func(g Gomega) {
			g.Expect(fleet.Global.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: site}, s)).To(Succeed())
			g.Expect(s.Status.Cluster).NotTo(BeNil())
			g.Expect(s.Status.Cluster.Phase).To(Equal(sitev1.ClusterProvisioned), "site says: %s %s", s.Status.Cluster.Message, s.Status.Cluster.LastError)
			g.Expect(s.Status.Cluster.ControlPlane).To(Equal(sitev1.NodeCounts{Ready: 3, Total: 3}))
			g.Expect(s.Status.Cluster.Workers).To(Equal(sitev1.NodeCounts{Ready: 2, Total: 2}))
			g.Expect(s.Status.Cluster.Bootstrap).NotTo(BeNil())
			g.Expect(s.Status.Cluster.Bootstrap.Phase).To(Equal(sitev1.BootstrapInstalled))
		}).WithContext(ctx).WithTimeout(5 * time.Minute).WithPolling(time.Second).Should(Succeed())
		// Nothing duplicated by the local controller's crash: one Machine and one claim per host.
		machines := &clusterv1.MachineList{}
		Expect(siteD.client.List(ctx, machines, client.InNamespace(sitev1.InfoNamespace))).To(Succeed())
		Expect(machines.Items).To(HaveLen(5))
		bmhs := &metal3api.BareMetalHostList{}
		Expect(siteD.client.List(ctx, bmhs, client.InNamespace(sitev1.HostsNamespace))).To(Succeed())
		Expect(bmhs.Items).To(HaveLen(5))
		consumers := map[string]string{}
		for _, b := range bmhs.Items {
			Expect(b.Status.Provisioning.State).To(Equal(metal3api.StateProvisioned), b.Name)
			Expect(b.Spec.ConsumerRef).NotTo(BeNil(), b.Name)
			Expect(consumers).NotTo(HaveKey(b.Spec.ConsumerRef.Name), "two hosts claimed by one machine")
			consumers[b.Spec.ConsumerRef.Name] = b.Name
		}
		// Each global Host shows its state at the site.
		var names []string
		for _, h := range members {
			names = append(names, h.Name)
		}
		siteD.hostsAre(Default, ctx, "v"+builders.PreviousKubernetesVersion, names...)

		b := s.Status.Cluster.Bootstrap
		Expect(b.Nodes).To(Equal(int32(5)))
		var want []sitev1.InstalledPackage
		for _, p := range builders.StackPackages(builders.PreviousKubernetesVersion) {
			want = append(want, sitev1.InstalledPackage{Name: p.Name, Version: p.Version, SHA256: digest[p.Name]})
		}
		Expect(b.Packages).To(ConsistOf(want))
		// The charts' pods run — CoreDNS (2) and the test application (3): the status follows
		// them until they are ready.
		Eventually(func(g Gomega) {
			b = siteD.bootstrap(g, ctx)
			g.Expect(b.Charts).To(ConsistOf(
				MatchFields(IgnoreExtras, Fields{"Name": Equal("coredns"), "Namespace": Equal("kube-system"), "Revision": Equal(int32(1)),
					"State": Equal("deployed"), "PodsReady": Equal(int32(2)), "PodsDesired": Equal(int32(2))}),
				MatchFields(IgnoreExtras, Fields{"Name": Equal("webapp"), "Namespace": Equal("webapp"), "Revision": Equal(int32(1)),
					"State": Equal("deployed"), "PodsReady": Equal(int32(3)), "PodsDesired": Equal(int32(3))})))
			g.Expect(b.Message).To(HaveSuffix("2 charts deployed, their pods 5/5 ready"))
		}).WithContext(ctx).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Succeed())

		// The application cluster answers through the kubeconfig the BPA gave Cluster-API.
		cs := appClient(ctx)
		nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		Expect(err).NotTo(HaveOccurred())
		// Every node Ready as its real kubelet reports it, on containerd, the OS of the hosts'
		// image.
		ready := map[string]string{}
		for _, n := range nodes.Items {
			info := n.Status.NodeInfo
			GinkgoWriter.Printf("node %s: kubelet %s, runtime %s, OS %s, kernel %s\n", n.Name, info.KubeletVersion, info.ContainerRuntimeVersion, info.OSImage, info.KernelVersion)
			Expect(info.KubeletVersion).To(Equal("v"+builders.PreviousKubernetesVersion), n.Name)
			Expect(info.ContainerRuntimeVersion).To(HavePrefix("containerd://1.6.20"), n.Name)
			Expect(info.OSImage).To(HavePrefix("Debian GNU/Linux 12"), n.Name)
			role := "node-role.kubernetes.io/worker"
			if slices.ContainsFunc(hn.Hosts[:3], func(h *testhosts.Host) bool { return h.Name == n.Name }) {
				role = "node-role.kubernetes.io/control-plane"
			}
			Expect(n.Labels).To(HaveKey(role), n.Name)
			for _, c := range n.Status.Conditions {
				if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
					ready[n.Name] = n.Spec.ProviderID
				}
			}
		}
		wantNodes := map[string]string{}
		for _, h := range members {
			wantNodes[h.Name] = "metal3://" + sitev1.HostsNamespace + "/" + h.Name
		}
		Expect(ready).To(Equal(wantNodes))
		// The test application's 3 replicas run on the workers (the control plane is tainted).
		pods := webappPods(ctx, cs)
		on := map[string]bool{}
		for _, p := range pods {
			on[p.Spec.NodeName] = true
		}
		Expect(on).To(Equal(map[string]bool{hn.Hosts[3].Name: true, hn.Hosts[4].Name: true}), "webapp's pods run on %v", on)
		// From a pod on one worker, the application's Service by its DNS name (CoreDNS)
		// answers, also from a pod on the other worker.
		url := "http://webapp.webapp.svc.cluster.local/"
		client := hn.Hosts[3].Name
		var image string
		for _, p := range pods {
			image = p.Spec.Containers[0].Image
		}
		answers := testhosts.RunPod(GinkgoTB(), cs, "webapp", "dns-client", client, testhosts.WebappContainer(image, "by-name", "-get", url, "-count", "20"))["by-name"]
		Expect(answers).To(HaveLen(20))
		remote := 0
		for _, line := range answers {
			p := testhosts.AnsweredBy(line, pods)
			Expect(p).NotTo(BeNil(), "%s answered %q to a pod on %s", url, line, client)
			if p.Spec.NodeName != client {
				remote++
			}
		}
		GinkgoWriter.Printf("%s from a pod on %s: %d of %d answers from a pod on another node\n", url, client, remote, len(answers))
		Expect(remote).To(BeNumerically(">", 0), "no answer of %s came from a pod on another node than %s", url, client)

		// One etcd cluster of the three control-plane hosts.
		for _, h := range hn.Hosts[:3] {
			out, err := h.Exec(ctx, "curl", "-sS", "--cacert", "/etc/kubernetes/pki/etcd/ca.crt",
				"--cert", "/etc/kubernetes/pki/apiserver-etcd-client.crt", "--key", "/etc/kubernetes/pki/apiserver-etcd-client.key",
				"-X", "POST", "-d", "{}", "https://127.0.0.1:2379/v3/cluster/member/list")
			Expect(err).NotTo(HaveOccurred(), string(out))
			var list struct {
				Members []struct {
					Name string `json:"name"`
				} `json:"members"`
			}
			Expect(json.Unmarshal(out, &list)).To(Succeed(), string(out))
			Expect(list.Members).To(HaveLen(3), "etcd on %s: %s", h.Name, out)
		}

		// Air-gapped: all of it came from the site pack, and the site never reached for the
		// artifact API. The uplink comes back for the specs after (upgrades bring new artifacts).
		Expect(gap.tries.Load()).To(BeZero(), "connections the air-gapped site opened to its artifact API URL %s", gap.url)
		resp, err := http.Get(fleet.LocalController(site).MetricsURL)
		Expect(err).NotTo(HaveOccurred())
		metrics, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		Expect(err).NotTo(HaveOccurred())
		Expect(string(metrics)).To(MatchRegexp(`(?m)^edgefleet_site_cache_fetches_total 0$`), "the site cache fetched from the artifact API")
		siteD.uplink(ctx)
	})

	It("keeps every node Ready with the endpoint's API server stopped past the node monitor's grace period: each host reaches another API server through its own endpoint (api-proxy)", func(ctx context.Context) {
		cs := appClient(ctx)
		svc, err := cs.CoreV1().Services("webapp").Get(ctx, "webapp", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		via := appClientVia(ctx, hn.Hosts[1])
		requests := testhosts.StartRequests(GinkgoTB(), hn.Hosts[0], "http://"+svc.Spec.ClusterIP+"/")
		endpoint := hn.Hosts[0]
		DeferCleanup(func(ctx context.Context) {
			if out, err := endpoint.Exec(ctx, "systemctl", "start", "kube-apiserver"); err != nil {
				GinkgoWriter.Printf("start kube-apiserver on %s again: %v: %s\n", endpoint.Name, err, out)
			}
		})
		out, err := endpoint.Exec(ctx, "systemctl", "stop", "kube-apiserver")
		Expect(err).NotTo(HaveOccurred(), string(out))
		stopped := time.Now()
		_, err = cs.Discovery().ServerVersion()
		Expect(err).To(HaveOccurred(), "the endpoint's API server answers, stopped")
		// Every kubelet renews its lease (every 10 s) after the stop: through its host's
		// endpoint, another API server.
		Eventually(func(g Gomega) {
			leases, err := via.CoordinationV1().Leases("kube-node-lease").List(ctx, metav1.ListOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			renewed := map[string]string{}
			for _, l := range leases.Items {
				if l.Spec.RenewTime != nil {
					renewed[l.Name] = fmt.Sprint(l.Spec.RenewTime.After(stopped))
				}
			}
			want := map[string]string{}
			for _, h := range members {
				want[h.Name] = "true"
			}
			g.Expect(renewed).To(Equal(want), "each node's lease renewed after the endpoint's API server stopped")
		}).WithContext(ctx).WithTimeout(40 * time.Second).WithPolling(time.Second).Should(Succeed())
		// Past the node monitor's grace period (50 s), no node is marked anything but Ready.
		Consistently(func(g Gomega) {
			nodes, err := via.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(nodes.Items).To(HaveLen(len(members)))
			for _, n := range nodes.Items {
				for _, c := range n.Status.Conditions {
					if c.Type == corev1.NodeReady {
						g.Expect(c.Status).To(Equal(corev1.ConditionTrue), "node %s: %s %s", n.Name, c.Reason, c.Message)
					}
				}
			}
		}).WithContext(ctx).WithTimeout(time.Until(stopped.Add(65 * time.Second))).WithPolling(time.Second).Should(Succeed())
		GinkgoWriter.Printf("%s's kube-apiserver stopped for %s, every node Ready\n", endpoint.Name, time.Since(stopped).Round(time.Second))
		out, err = endpoint.Exec(ctx, "systemctl", "start", "kube-apiserver")
		Expect(err).NotTo(HaveOccurred(), string(out))
		Eventually(func() error {
			_, err := cs.Discovery().ServerVersion()
			return err
		}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())
		answered, failed := requests.Stop()
		GinkgoWriter.Printf("requests to webapp with the endpoint's API server stopped: %d answered, %d failed\n", answered, len(failed))
		noFailedRequests(ctx, answered, failed)
		// The site sees its nodes Ready again through the endpoint, and the BPA its cluster
		// installed (a pass during the stop waits, then passes again).
		Eventually(func(g Gomega) {
			s := &fleetv1.Site{}
			g.Expect(fleet.Global.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: site}, s)).To(Succeed())
			g.Expect(s.Status.Cluster).NotTo(BeNil())
			g.Expect(s.Status.Cluster.Bootstrap).NotTo(BeNil())
			g.Expect(s.Status.Cluster.Bootstrap.Phase).To(Equal(sitev1.BootstrapInstalled), "bootstrap says: %s", s.Status.Cluster.Bootstrap.Message)
			g.Expect(s.Status.Cluster.ControlPlane).To(Equal(sitev1.NodeCounts{Ready: 3, Total: 3}), "site says: %s", s.Status.Cluster.Message)
			g.Expect(s.Status.Cluster.Workers).To(Equal(sitev1.NodeCounts{Ready: 2, Total: 2}), "site says: %s", s.Status.Cluster.Message)
		}).WithContext(ctx).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Succeed())
	})

	It("keeps the kubeconfig and keys in Vault and Secrets only", func(ctx context.Context) {
		key, err := store.Get(ctx, "bpa-ssh-key")
		Expect(err).NotTo(HaveOccurred())
		pki, err := store.Get(ctx, site+"-pki")
		Expect(err).NotTo(HaveOccurred())
		kc, err := store.Get(ctx, site+"-admin-kubeconfig")
		Expect(err).NotTo(HaveOccurred())
		secret := map[string][]byte{"the BPA's SSH private key": key["private-key"], "the admin kubeconfig": kc["value"]}
		for _, k := range []string{"ca.key", "etcd-ca.key", "front-proxy-ca.key", "admin.key"} {
			secret[k] = pki[k]
		}
		// Every host's disk, the fleet's directory (logs of every process, the site caches)
		// and this test's files. (The site cluster's etcd holds Cluster-API's kubeconfig
		// Secret, which is where it belongs.)
		dirs := []string{fleet.Dir, dir, filepath.Dir(vault.Log)}
		for _, h := range hn.Hosts { // the spare host too
			dirs = append(dirs, filepath.Join(h.Dir, "upper"))
		}
		found, scanned, err := testutil.FindSecrets(dirs, secret)
		Expect(err).NotTo(HaveOccurred())
		Expect(found).To(BeEmpty())
		Expect(scanned).To(BeNumerically(">", 100))
		// The scan looks where keys would be: each host's own etcd key is found there.
		serverKey, err := os.ReadFile(filepath.Join(hn.Hosts[0].Dir, "upper", "etc/kubernetes/pki/etcd/server.key"))
		Expect(err).NotTo(HaveOccurred())
		found, _, err = testutil.FindSecrets(dirs[len(dirs)-len(hn.Hosts):], map[string][]byte{"host-0's etcd key": serverKey})
		Expect(err).NotTo(HaveOccurred())
		Expect(found).NotTo(BeEmpty())
	})

	It("reaches the site with the kubeconfig kept in Vault, and carries Vault-held BMC credentials and their rotation to Metal3", func(ctx context.Context) {
		const where = "secret/edgefleet/global/" + ns
		s := &fleetv1.Site{}
		Expect(fleet.Global.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: site}, s)).To(Succeed())
		valid := meta.FindStatusCondition(s.Status.Conditions, fleetv1.SiteKubeconfigValidCondition)
		Expect(valid).NotTo(BeNil())
		Expect(valid.Status).To(Equal(metav1.ConditionTrue))
		Expect(valid.Message).To(Equal(`kubeconfig from Vault entry ` + where + `/sites/` + site + ` key "kubeconfig" loaded`))

		// Only Vault holds host-1's credentials on the global side; the site's copy is Metal3's.
		host := members[1].Name
		Expect(apierrors.IsNotFound(fleet.Global.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: host + "-bmc"}, &corev1.Secret{}))).To(BeTrue())
		entries, err := fleet.VaultEntries()
		Expect(err).NotTo(HaveOccurred())
		entry, err := entries.Read(ctx, ns, "bmc/"+host)
		Expect(err).NotTo(HaveOccurred())
		copyOnSite := &corev1.Secret{}
		Expect(siteD.client.Get(ctx, client.ObjectKey{Namespace: sitev1.HostsNamespace, Name: host + sitev1.BMCSecretSuffix}, copyOnSite)).To(Succeed())
		Expect(copyOnSite.Annotations).To(HaveKeyWithValue(sitev1.SourceAnnotation, "Vault "+where+"/bmc/"+host))
		Expect(string(copyOnSite.Data["password"])).To(Equal(entry.Data["password"]))
		bmh := &metal3api.BareMetalHost{}
		Expect(siteD.client.Get(ctx, client.ObjectKey{Namespace: sitev1.HostsNamespace, Name: host}, bmh)).To(Succeed())
		Expect(bmh.Spec.BMC.CredentialsName).To(Equal(copyOnSite.Name))

		// The password rotated in Vault reaches the site within a heartbeat, with no event.
		rotated, err := fleet.NewBMCPassword(host)
		Expect(err).NotTo(HaveOccurred())
		_, err = entries.Write(ctx, ns, "bmc/"+host, map[string]string{"username": "admin", "password": rotated})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func(g Gomega) {
			g.Expect(siteD.client.Get(ctx, client.ObjectKeyFromObject(copyOnSite), copyOnSite)).To(Succeed())
			g.Expect(string(copyOnSite.Data["password"])).To(Equal(rotated))
		}).WithContext(ctx).WithTimeout(30 * time.Second).WithPolling(250 * time.Millisecond).Should(Succeed())
		// Metal3 keeps the host provisioned with the new credentials.
		Consistently(func(g Gomega) {
			g.Expect(siteD.client.Get(ctx, client.ObjectKeyFromObject(bmh), bmh)).To(Succeed())
			g.Expect(bmh.Status.Provisioning.State).To(Equal(metal3api.StateProvisioned))
			g.Expect(bmh.Status.ErrorMessage).To(BeEmpty())
		}).WithContext(ctx).WithTimeout(5 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
	})

	It("shows the site in the web UI as it is: its nodes at their readiness and kubelet's version, the BPA's packages and charts, the Site's events, and the local controller's and the BPA's own log lines", func(ctx context.Context) {
		token, err := fleet.Token(ctx, "edgefleet-system", "realhosts-ui-admin", "edgefleet-fleet-admin")
		Expect(err).NotTo(HaveOccurred())
		browser, err := chromium.StartChromium(GinkgoTB(), fleet.APICAFile)
		Expect(err).NotTo(HaveOccurred())
		admin := chromium.NewUser(browser, "admin")
		admin.SignIn(fleet.APIURL, token)
		admin.Open(fleet.APIURL, "/ui/sites/"+ns+"/"+site)
		cells := func(sel string) [][]string {
			GinkgoHelper()
			return chromium.Eval[[][]string](admin, fmt.Sprintf(`[...document.querySelectorAll(%q)].map(r => [...r.querySelectorAll('td')].map(td => td.textContent.trim()))`, sel))
		}

		By("each node of the application cluster: its host's row says what the node says")
		nodes, err := appClient(ctx).CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(nodes.Items).To(HaveLen(len(members)))
		want := map[string][]string{} // host → [node readiness, kubelet version]
		for _, n := range nodes.Items {
			ready := "NotReady"
			if slices.ContainsFunc(n.Status.Conditions, func(c corev1.NodeCondition) bool {
				return c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue
			}) {
				ready = "Ready"
			}
			want[n.Name] = []string{ready, n.Status.NodeInfo.KubeletVersion}
		}
		// The page is live: a node's change reaches it through the Site's status.
		Eventually(func(g Gomega) {
			got := map[string][]string{}
			for _, row := range cells("#hosts tr.host") {
				if _, ok := want[row[0]]; ok && len(row) > 4 {
					got[row[0]] = []string{row[3], row[4]}
				}
			}
			g.Expect(got).To(Equal(want))
		}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())
		Expect(admin.Text("#cluster-version")).To(Equal(nodes.Items[0].Status.NodeInfo.KubeletVersion))

		By("the BPA's packages and charts, as the site reports them; the application's chart with its pods")
		global := &fleetv1.Site{}
		Expect(fleet.Global.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: site}, global)).To(Succeed())
		Expect(global.Status.Cluster).NotTo(BeNil())
		b := global.Status.Cluster.Bootstrap
		Expect(b).NotTo(BeNil())
		Expect(b.Packages).NotTo(BeEmpty())
		var wantPackages [][]string
		for _, p := range b.Packages {
			wantPackages = append(wantPackages, []string{p.Name, p.Version})
		}
		var gotPackages [][]string
		for _, row := range cells("#packages tbody tr") {
			gotPackages = append(gotPackages, row[:2])
		}
		Expect(gotPackages).To(ConsistOf(wantPackages))
		charts := map[string]string{}
		for _, row := range cells("#charts tbody tr") {
			Expect(row).To(HaveLen(5), "a chart's row")
			charts[row[0]] = strings.Join(row[1:], " ")
		}
		Expect(charts).To(HaveLen(len(b.Charts)))
		for _, c := range b.Charts {
			Expect(charts).To(HaveKeyWithValue(c.Name, fmt.Sprintf("%s %s %s (rev %d) %d/%d", c.Version, c.Namespace, c.State, c.Revision, c.PodsReady, c.PodsDesired)))
		}
		i := slices.IndexFunc(b.Charts, func(c sitev1.ChartRelease) bool { return c.Name == "webapp" })
		Expect(i).NotTo(Equal(-1), "the site reports no webapp chart")
		Expect(b.Charts[i].State).To(Equal("deployed"))
		Expect(int(b.Charts[i].PodsReady)).To(Equal(len(webappPods(ctx, appClient(ctx)))))

		By("the Site's events, newest first")
		globalCS, err := kubernetes.NewForConfig(fleet.Global.Config)
		Expect(err).NotTo(HaveOccurred())
		events, err := globalCS.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.kind=Site,involvedObject.name=" + site})
		Expect(err).NotTo(HaveOccurred())
		Expect(events.Items).NotTo(BeEmpty(), "the Site has no events")
		reasons := map[string]bool{}
		for _, e := range events.Items {
			reasons[e.Reason] = true
		}
		shown := cells("#events tbody tr")
		Expect(shown).NotTo(BeEmpty())
		for _, row := range shown {
			Expect(row).To(HaveLen(5), "an event's row")
			Expect(reasons).To(HaveKey(row[2]), "the page shows an event the Site does not have: %v", row)
		}

		By("the local controller's and the BPA's log lines, each from its own component")
		line := `^\d{4}-\d\d-\d\dT[\d:.]+Z (DEBUG|INFO|WARN|ERROR) `
		for _, component := range []string{"local-controller", "bpa"} {
			admin.Do(chromedp.SetValue(chromedp.CSS("#log-component"), component))
			admin.Click0("#log-show")
			admin.WaitFor(component+"'s lines", fmt.Sprintf(`document.getElementById('log-status').textContent.startsWith(%q) && document.querySelectorAll('#log-lines-shown .log-line').length > 0`, component+" ("))
			lines := chromium.Eval[[]string](admin, `[...document.querySelectorAll('#log-lines-shown .log-line')].map(l => l.textContent)`)
			for _, l := range lines {
				Expect(l).To(MatchRegexp(line), "a line of %s", component)
			}
		}
	})

	It("gives a cluster user a kubeconfig of their own identity, from the web UI (key made in Chromium) and edgefleet cluster kubeconfig: pods yes, Secrets no, refused once expired", func(ctx context.Context) {
		token := carolToken(ctx)
		edgefleet := func(args ...string) { asCarol(ctx, args...) }
		kubectl := func(kubeconfig string, args ...string) (string, error) { return kubectlWith(ctx, kubeconfig, args...) }
		short, long := filepath.Join(dir, "carol-short.kubeconfig"), filepath.Join(dir, "carol.kubeconfig")
		edgefleet("cluster", "kubeconfig", site, "--ttl", "20s", "-f", short)
		expires := time.Now().Add(20 * time.Second)
		edgefleet("cluster", "kubeconfig", site, "--ttl", "8h", "-f", long)
		info, err := os.Stat(long)
		Expect(err).NotTo(HaveOccurred())
		Expect(info.Mode().Perm()).To(Equal(os.FileMode(0o600)))

		out, err := kubectl(long, "get", "pods", "-A")
		Expect(err).NotTo(HaveOccurred(), "kubectl get pods: %s", out)
		Expect(out).To(ContainSubstring("webapp"))
		out, err = kubectl(long, "get", "secrets", "-n", "kube-system")
		Expect(err).To(HaveOccurred())
		Expect(out).To(ContainSubstring("Forbidden"))
		Expect(out).To(ContainSubstring("edgefleet:system:serviceaccount:" + ns + ":carol"))
		By("downloading a kubeconfig from the web UI, its key made in the browser")
		browser, err := chromium.StartChromium(GinkgoTB(), "")
		Expect(err).NotTo(HaveOccurred())
		downloads := filepath.Join(dir, "downloads")
		Expect(os.MkdirAll(downloads, 0o700)).To(Succeed())
		_, err = chromedp.Call(browser, cdpbrowser.SetDownloadBehavior, cdpbrowser.SetDownloadBehaviorParams{
			Behavior: cdpbrowser.SetDownloadBehaviorBehaviorAllow, DownloadPath: downloads})
		Expect(err).NotTo(HaveOccurred())
		tab, cancel := context.WithTimeout(browser, 2*time.Minute)
		defer cancel()
		Expect(chromedp.Do(tab, chromedp.Navigate(fleet.APIURL+"/ui/login"), chromedp.WaitVisible(chromedp.CSS("#token")),
			chromedp.SetValue(chromedp.CSS("#token"), token))).To(Succeed())
		_, err = chromedp.Run(tab, chromedp.WaitEvent(page.LoadEventFired, nil, chromedp.Click(chromedp.CSS("#sign-in"))))
		Expect(err).NotTo(HaveOccurred())
		button := fmt.Sprintf(`tr.cluster[data-name=%q] button[data-kubeconfig]`, site)
		Expect(chromedp.Do(tab, chromedp.Navigate(fleet.APIURL+"/ui/clusters?namespace="+ns))).To(Succeed())
		// The cluster list redraws with live updates: a row replaced between finding and
		// clicking its button is found again.
		_, err = chromium.RunReplaced(tab, chromedp.Steps(chromedp.WaitVisible(chromedp.CSS(button)), chromedp.Click(chromedp.CSS(button))))
		Expect(err).NotTo(HaveOccurred())
		_, err = chromedp.Run(tab, chromedp.Poll[bool](`document.getElementById('kubeconfig-status').textContent.startsWith('Saved')`,
			chromedp.WithPollingInterval(200*time.Millisecond), chromedp.WithPollingTimeout(time.Minute)))
		status, _ := chromedp.Run(tab, chromedp.Evaluate[string](`document.getElementById('kubeconfig-status').textContent`))
		Expect(err).NotTo(HaveOccurred(), "the page says: %s", status)
		// Chromium names the file as the page asked: the cluster's name.
		var fromUI string
		Eventually(func(g Gomega) {
			files, err := filepath.Glob(filepath.Join(downloads, "*.kubeconfig"))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(files).To(HaveLen(1))
			fromUI = files[0]
		}).WithTimeout(30 * time.Second).Should(Succeed())
		out, err = kubectl(fromUI, "get", "pods", "-A")
		Expect(err).NotTo(HaveOccurred(), "kubectl get pods with the UI's kubeconfig: %s", out)
		Expect(out).To(ContainSubstring("webapp"))
		out, err = kubectl(fromUI, "get", "secrets", "-n", "kube-system")
		Expect(err).To(HaveOccurred())
		Expect(out).To(ContainSubstring("Forbidden"))
		Expect(out).To(ContainSubstring("edgefleet:system:serviceaccount:" + ns + ":carol"))

		// The issues are on record, on the global Site.
		events, err := fleet.Kubectl(ctx, "get", "events", "-n", ns, "--field-selector", "reason=KubeconfigIssued", "-o", "jsonpath={.items[*].message}")
		Expect(err).NotTo(HaveOccurred())
		Expect(string(events)).To(ContainSubstring("system:serviceaccount:" + ns + ":carol"))
		Expect(string(events)).To(ContainSubstring("cluster " + site))

		out, err = kubectl(short, "get", "pods", "-A")
		Expect(err).NotTo(HaveOccurred(), "kubectl get pods with a fresh certificate of 20s: %s", out)
		time.Sleep(time.Until(expires.Add(2 * time.Second)))
		out, err = kubectl(short, "get", "pods", "-A")
		Expect(err).To(HaveOccurred())
		Expect(out).To(ContainSubstring("Unauthorized"))
	})

	It("stops an upgrade whose new kubelet fails its health check at the first node, that node back on the previous version, the application serving", func(ctx context.Context) {
		cs := appClient(ctx)
		svc, err := cs.CoreV1().Services("webapp").Get(ctx, "webapp", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		requests := testhosts.StartRequests(GinkgoTB(), hn.Hosts[0], "http://"+svc.Spec.ClusterIP+"/")
		release(ctx, "bpa-2-broken", builders.KubernetesVersion, stackWith(kubernetesAt(builders.KubernetesVersion, "kubelet broken")...)...)
		var b *sitev1.BootstrapStatus
		Eventually(func(g Gomega) {
			b = siteD.bootstrap(g, ctx)
			g.Expect(b).NotTo(BeNil())
			g.Expect(b.Phase).To(Equal(sitev1.BootstrapFailed), "bootstrap says: %s", b.Message)
		}).WithContext(ctx).WithTimeout(8 * time.Minute).WithPolling(time.Second).Should(Succeed())
		answered, failed := requests.Stop()
		GinkgoWriter.Printf("requests to webapp through the failed upgrade: %d answered, %d failed\n", answered, len(failed))
		noFailedRequests(ctx, answered, failed)
		Expect(b.FailedPackage).To(Equal(digest["kubelet broken"]))
		Expect(b.Message).To(ContainSubstring("stopped at host host-0"))
		Expect(b.Message).To(ContainSubstring("this kubelet is broken"))
		// Where it stopped, step by step: the kubelet's install on the first of the five nodes.
		Expect(b.Step).To(PointTo(MatchFields(IgnoreExtras, Fields{"Package": Equal("kubelet"), "Version": Equal(builders.KubernetesVersion + "-1"),
			"Node": Equal("host-0"), "Index": Equal(int32(1)), "Of": Equal(int32(5)), "Step": Equal(cluster.StepInstall)})))
		// The control plane went first (the version skew policy: API servers before the
		// kubelets): it runs the new version; every kubelet the previous one.
		for _, name := range []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
			Expect(b.Packages).To(ContainElement(sitev1.InstalledPackage{Name: name, Version: builders.KubernetesVersion, SHA256: digest[name+" "+builders.KubernetesVersion]}))
			for _, h := range hn.Hosts[:3] {
				Expect(installed(ctx, h, name)).To(Equal(builders.KubernetesVersion+" "+builders.KubernetesVersion), "%s on %s", name, h.Name)
			}
		}
		Expect(b.Packages).To(ContainElement(sitev1.InstalledPackage{Name: "kubelet", Version: builders.PreviousKubernetesVersion, SHA256: digest["kubelet"]}))
		for _, h := range members {
			Expect(installed(ctx, h, "kubelet")).To(Equal(builders.PreviousKubernetesVersion+" "+builders.PreviousKubernetesVersion), h.Name)
		}
		// The cluster still serves, every node Ready, schedulable and on the previous kubelet,
		// the application's 3 pods Ready.
		webappPods(ctx, cs)
		nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(nodes.Items).To(HaveLen(5))
		for _, n := range nodes.Items {
			Expect(n.Spec.Unschedulable).To(BeFalse(), n.Name)
			Expect(n.Status.NodeInfo.KubeletVersion).To(Equal("v"+builders.PreviousKubernetesVersion), n.Name)
		}
		// The global Site says it too, and its cluster is not on the new version.
		s := &fleetv1.Site{}
		Eventually(func(g Gomega) {
			g.Expect(fleet.Global.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: site}, s)).To(Succeed())
			g.Expect(s.Status.Cluster.Bootstrap.Phase).To(Equal(sitev1.BootstrapFailed))
			g.Expect(s.Status.Cluster.KubernetesVersion).To(Equal("v" + builders.PreviousKubernetesVersion))
		}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())
	})

	It("upgrades Kubernetes with an upgrade campaign, node by node, etcd keeping its 3 healthy members and the application's Service never failing a request", func(ctx context.Context) {
		cs := appClient(ctx)
		before := webappPods(ctx, cs)
		svc, err := cs.CoreV1().Services("webapp").Get(ctx, "webapp", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		// A client on a control-plane host asks the Service every 100 ms throughout; another
		// control-plane host samples etcd's members every 2 s.
		machines := func() []string {
			GinkgoHelper()
			list := &clusterv1.MachineList{}
			Expect(siteD.client.List(ctx, list, client.InNamespace(sitev1.InfoNamespace))).To(Succeed())
			var names []string
			for _, m := range list.Items {
				names = append(names, m.Name)
			}
			return names
		}
		machinesBefore := machines()
		Expect(machinesBefore).To(HaveLen(5))
		requests := testhosts.StartRequests(GinkgoTB(), hn.Hosts[0], "http://"+svc.Spec.ClusterIP+"/")
		etcd := testhosts.StartEtcdSamples(GinkgoTB(), hn.Hosts[1])
		// The BPA crashes at a random step of the kubelets' patch (the API servers are on the new
		// version already, since the spec before), the local controller at a random later node
		// (the suite's seed picks them); both start again. A host whose kubelet was patched
		// before the BPA's crash must not be patched again: its kubelet keeps running as it was.
		rng := mrand.New(mrand.NewPCG(uint64(GinkgoRandomSeed()), 470))
		steps := []string{cluster.StepCheckOthers, cluster.StepDrain, cluster.StepInstall, cluster.StepNodeReady, cluster.StepUncordon}
		reached := func(b *sitev1.BootstrapStatus, index, step int) bool {
			return b.Step != nil && b.Step.Package == "kubelet" && (int(b.Step.Index) > index || int(b.Step.Index) == index && slices.Index(steps, b.Step.Step) >= step)
		}
		bpaAt, bpaStep := 1+rng.IntN(4), rng.IntN(len(steps)-1)
		lcAt := bpaAt + 1 + rng.IntN(5-bpaAt)
		kubeletRun := func(h *testhosts.Host) string {
			out, _ := h.Exec(ctx, "systemctl", "show", "-p", "InvocationID", "--value", "kubelet.service")
			return strings.TrimSpace(string(out))
		}
		patchedBefore := map[string]string{} // host: its kubelet's run at the crash
		crashed := siteD.crashes(ctx,
			crash{what: "BPA", at: func(b *sitev1.BootstrapStatus) bool { return reached(b, bpaAt, bpaStep) },
				before: func(b *sitev1.BootstrapStatus) {
					for _, h := range members {
						if h.Name != b.Step.Node && installed(ctx, h, "kubelet") == builders.KubernetesVersion+" "+builders.KubernetesVersion {
							patchedBefore[h.Name] = kubeletRun(h)
						}
					}
				}},
			crash{what: "local controller", at: func(b *sitev1.BootstrapStatus) bool { return reached(b, lcAt, 0) }},
		)
		createRelease(ctx, ns, "bpa-3", builders.KubernetesVersion, digest, stackWith(kubernetesAt(builders.KubernetesVersion)...)...)
		out := runCampaign(ctx, ns, "upgrade-bpa-3", "--action", "upgrade", "--release", "bpa-3", "--sites", site)
		Expect(out).To(ContainSubstring("phase Succeeded"))
		crashes, err := crashed()
		GinkgoWriter.Printf("crashes during the upgrade: %q; kubelets patched before the BPA's: %v\n", crashes, slices.Sorted(maps.Keys(patchedBefore)))
		Expect(err).NotTo(HaveOccurred())
		Expect(crashes).To(HaveLen(2))
		for _, h := range members {
			if run, ok := patchedBefore[h.Name]; ok {
				Expect(kubeletRun(h)).To(Equal(run), "kubelet on %s, patched before the BPA's crash, was started again after it", h.Name)
			}
		}
		answered, failed := requests.Stop()
		samples := etcd.Stop()
		GinkgoWriter.Printf("through the upgrade: requests to webapp %d answered, %d failed; etcd samples %v\n", answered, len(failed), samples)
		noFailedRequests(ctx, answered, failed)
		Expect(answered).To(BeNumerically(">", 100))
		Expect(len(samples)).To(BeNumerically(">", 10))
		for i, e := range samples {
			Expect(e).To(Equal(testhosts.EtcdSample{Members: 3, Healthy: 3}), "etcd sample %d of %d", i, len(samples))
		}
		s := &fleetv1.Site{}
		Expect(fleet.Global.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: site}, s)).To(Succeed())
		Expect(s.Status.LastOperation.Campaign).To(Equal("upgrade-bpa-3"))
		Expect(s.Status.LastOperation.Action).To(Equal(fleetv1.ActionUpgrade))
		Expect(s.Status.LastOperation.Phase).To(Equal(fleetv1.OperationSucceeded), s.Status.LastOperation.Message)
		Expect(s.Status.Cluster.KubernetesVersion).To(Equal("v" + builders.KubernetesVersion))
		for _, name := range builders.KubernetesPackages() {
			Expect(s.Status.Cluster.Bootstrap.Packages).To(ContainElement(sitev1.InstalledPackage{Name: name, Version: builders.KubernetesVersion, SHA256: digest[name+" "+builders.KubernetesVersion]}))
		}
		// Every node on the new kubelet, Ready and schedulable, on the same machines (upgraded
		// in place, not provisioned again).
		Expect(machines()).To(ConsistOf(machinesBefore))
		nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(nodes.Items).To(HaveLen(5))
		for _, n := range nodes.Items {
			Expect(n.Status.NodeInfo.KubeletVersion).To(Equal("v"+builders.KubernetesVersion), n.Name)
			Expect(n.Spec.Unschedulable).To(BeFalse(), n.Name)
		}
		for _, h := range members {
			Expect(installed(ctx, h, "kubelet")).To(Equal(builders.KubernetesVersion+" "+builders.KubernetesVersion), h.Name)
		}
		// Both workers were drained: every pod of the application was evicted and runs anew.
		for name := range webappPods(ctx, cs) {
			Expect(before).NotTo(HaveKey(name), "pod %s was never evicted", name)
		}
		// Going back is a control-plane downgrade: the admission webhook refuses the Site update,
		// knowing the version from the site's report, and the Site keeps its release.
		createRelease(ctx, ns, "bpa-3-back", builders.PreviousKubernetesVersion, digest, stackWith()...)
		_, err = fleet.Kubectl(ctx, "patch", "site", site, "-n", ns, "--type", "merge", "-p", `{"spec":{"cluster":{"release":"bpa-3-back"}}}`)
		Expect(err).To(MatchError(And(ContainSubstring("spec.cluster.release"), ContainSubstring("would downgrade the control plane from v"+builders.KubernetesVersion))))
		Expect(fleet.Global.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: site}, s)).To(Succeed())
		Expect(s.Spec.Cluster.Release).To(Equal("bpa-3"))
	})

	It("rotates the cluster's Secret encryption key when the Site asks, every Secret stored again under the new key, the application's Service never failing a request", func(ctx context.Context) {
		// The Site names a Release that exists (the specs before delete theirs, and nothing is
		// pushed to a site whose Release is gone), of what the cluster runs already.
		release(ctx, "bpa-3-rotation", builders.KubernetesVersion, stackWith(kubernetesAt(builders.KubernetesVersion)...)...)
		cs := appClient(ctx)
		value := "rotation-" + rand.Text()
		_, err := cs.CoreV1().Secrets("default").Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "rotation-probe"}, StringData: map[string]string{"value": value},
		}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		// storedUnder is the name of the key etcd holds the probe Secret under, read on a
		// control-plane host with the API server's etcd client certificate.
		storedUnder := func() string {
			GinkgoHelper()
			stored := storedSecret(ctx, hn.Hosts[1], "default", "rotation-probe")
			Expect(stored).NotTo(ContainSubstring(value))
			key, _, _ := strings.Cut(strings.TrimPrefix(stored, "k8s:enc:secretbox:v1:"), ":")
			return key
		}
		Expect(storedUnder()).To(Equal("bpa-1"))
		svc, err := cs.CoreV1().Services("webapp").Get(ctx, "webapp", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		requests := testhosts.StartRequests(GinkgoTB(), hn.Hosts[0], "http://"+svc.Spec.ClusterIP+"/")
		_, err = fleet.Kubectl(ctx, "patch", "site", site, "-n", ns, "--type", "merge", "-p", `{"spec":{"cluster":{"rotations":{"secretEncryptionKey":1}}}}`)
		Expect(err).NotTo(HaveOccurred())
		seen := map[sitev1.KeyRotationPhase]bool{}
		Eventually(func(g Gomega) {
			b := siteD.bootstrap(g, ctx)
			g.Expect(b).NotTo(BeNil())
			g.Expect(b.SecretEncryption).NotTo(BeNil())
			if p := b.SecretEncryption.Phase; p != "" {
				seen[p] = true
				g.Expect(b.SecretEncryption.Since).NotTo(BeNil())
				g.Expect(b.Message).To(ContainSubstring("rotating the Secret encryption key (0 of 1 rotations done)"))
			}
			g.Expect(*b.SecretEncryption).To(Equal(sitev1.SecretEncryptionStatus{Provider: sitev1.SecretEncryptionSecretbox, Key: "bpa-2", Rotations: 1, Reencrypted: "bpa-2"}), "bootstrap says: %s", b.Message)
			g.Expect(b.Phase).To(Equal(sitev1.BootstrapInstalled), "bootstrap says: %s", b.Message)
		}).WithContext(ctx).WithTimeout(8 * time.Minute).WithPolling(500 * time.Millisecond).Should(Succeed())
		answered, failed := requests.Stop()
		GinkgoWriter.Printf("through the key rotation: requests to webapp %d answered, %d failed; phases seen %v\n", answered, len(failed), seen)
		noFailedRequests(ctx, answered, failed)
		Expect(answered).To(BeNumerically(">", 20))
		// Each phase lasts the restarts of three API servers: the status showed those between.
		Expect(seen).To(HaveKey(sitev1.RotationUseNew))
		Expect(seen).To(HaveKey(sitev1.RotationDropOld))
		Expect(storedUnder()).To(Equal("bpa-2"))
		probe, err := cs.CoreV1().Secrets("default").Get(ctx, "rotation-probe", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(string(probe.Data["value"])).To(Equal(value))
		// The old key is gone from the store and from every API server's configuration.
		pki, err := store.Get(ctx, site+"-pki")
		Expect(err).NotTo(HaveOccurred())
		Expect(pki).NotTo(HaveKey("secretbox.next.key"))
		for _, h := range members[:3] {
			out, err := h.Exec(ctx, "grep", "-c", "name: bpa-", "/etc/kubernetes/encryption-config.yaml")
			Expect(err).NotTo(HaveOccurred(), string(out))
			Expect(strings.TrimSpace(string(out))).To(Equal("1"), h.Name)
		}
		// The Site shows it.
		Eventually(func(g Gomega) {
			s := &fleetv1.Site{}
			g.Expect(fleet.Global.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: site}, s)).To(Succeed())
			g.Expect(s.Status.Cluster).NotTo(BeNil())
			g.Expect(s.Status.Cluster.Bootstrap).NotTo(BeNil())
			g.Expect(s.Status.Cluster.Bootstrap.SecretEncryption).To(Equal(&sitev1.SecretEncryptionStatus{Provider: sitev1.SecretEncryptionSecretbox, Key: "bpa-2", Rotations: 1, Reencrypted: "bpa-2"}))
		}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())
	})

	It("rolls the cluster's CAs over when the Site asks, pods restarted onto the new CA before it signs, the application's Service never failing a request", func(ctx context.Context) {
		release(ctx, "bpa-3-ca-rollover", builders.KubernetesVersion, stackWith(kubernetesAt(builders.KubernetesVersion)...)...)
		cs := appClient(ctx)
		svc, err := cs.CoreV1().Services("webapp").Get(ctx, "webapp", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		// The revisions of the webapp's pods (a drain may replace pods, of the same revision).
		revisions := func(pods map[string]*corev1.Pod) []string {
			var out []string
			for _, p := range pods {
				out = append(out, p.Labels["pod-template-hash"])
			}
			return slices.Compact(slices.Sorted(slices.Values(out)))
		}
		before := webappPods(ctx, cs)
		corednsRevision := func(cs kubernetes.Interface) int {
			GinkgoHelper()
			d, err := cs.AppsV1().Deployments("kube-system").Get(ctx, "coredns", metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred())
			var rev int
			_, err = fmt.Sscan(d.Annotations["deployment.kubernetes.io/revision"], &rev)
			Expect(err).NotTo(HaveOccurred(), "coredns's revision annotation: %v", d.Annotations)
			return rev
		}
		corednsBefore := corednsRevision(cs)
		oldKubeconfig := &corev1.Secret{}
		Expect(siteD.client.Get(ctx, client.ObjectKey{Namespace: sitev1.InfoNamespace, Name: site + "-kubeconfig"}, oldKubeconfig)).To(Succeed())
		// Leaf certificates of 10 minutes for this spec, renewed once 2 minutes old: the
		// roll-over issues them, and they are renewed while UseNew waits; cluster users'
		// certificates of 3 minutes at most (AddNew and UseNew each wait out one). The BPA's
		// defaults come back at its end.
		// Its first pass ends before carol's first kubeconfig is issued, so the roll-over
		// begins right after the patch; AddNew's pass, which makes every host trust both CAs,
		// must end while carol's kubeconfig is still valid: it took 2m18s at a load of 13-25
		// with a new SSH connection per step, 1m14s with kept ones (a spec run with a 2-minute
		// lifetime failed so).
		siteD.startBPAPassed(ctx, "--certificate-validity=10m", "--certificate-renew-before=8m", "--resync-interval=30s", "--max-credential-ttl=3m")
		// carol's kubeconfig of before the roll-over trusts the old cluster CA only; the one she
		// gets while both CAs are trusted has a certificate the old CA signed. Each works to its
		// end: the API servers present certificates of the new CA once the first has expired,
		// and the old CAs go once the second has.
		userBefore, userDuring := filepath.Join(dir, "carol-before.kubeconfig"), filepath.Join(dir, "carol-during.kubeconfig")
		asCarol(ctx, "cluster", "kubeconfig", site, "--ttl", "3m", "-f", userBefore)
		beforeIssued := time.Now()
		var beforeInAddNew string         // what kubectl with the first said once the hosts trusted both CAs
		var beforeUsedAfter time.Duration // from its issue to that kubectl: under its 3 minutes, or it expired
		var beforeErr error
		// The roll-over's leaves, watched on their hosts from before it begins: the API servers'
		// serving certificates and a worker's kubelet client certificate.
		leaves := []hostFile{{members[3], "/etc/kubernetes/pki/node-client.crt"}}
		for _, h := range members[:3] {
			leaves = append(leaves, hostFile{h, "/etc/kubernetes/pki/apiserver.crt"})
		}
		leafLog := watchLeaves(ctx, leaves, "kubernetes-2")
		requests := testhosts.StartRequests(GinkgoTB(), hn.Hosts[0], "http://"+svc.Spec.ClusterIP+"/")
		_, err = fleet.Kubectl(ctx, "patch", "site", site, "-n", ns, "--type", "merge", "-p", `{"spec":{"cluster":{"rotations":{"certificateAuthorities":1}}}}`)
		Expect(err).NotTo(HaveOccurred())
		began := map[sitev1.KeyRotationPhase]time.Time{} // each phase's start, as the status says
		var waited []string
		Eventually(func(g Gomega) {
			b := siteD.bootstrap(g, ctx)
			g.Expect(b).NotTo(BeNil())
			g.Expect(b.CertificateAuthorities).NotTo(BeNil(), "bootstrap says: %s", b.Message)
			if ca := b.CertificateAuthorities; ca.Phase != "" {
				g.Expect(ca.Since).NotTo(BeNil())
				if _, ok := began[ca.Phase]; !ok {
					began[ca.Phase] = ca.Since.Time
				}
				if ca.Phase == sitev1.RotationAddNew && beforeInAddNew == "" {
					beforeUsedAfter = time.Since(beforeIssued)
					beforeInAddNew, beforeErr = kubectlWith(ctx, userBefore, "get", "pods", "-n", "webapp")
					asCarol(ctx, "cluster", "kubeconfig", site, "--ttl", "3m", "-f", userDuring)
				}
				g.Expect(b.Message).To(ContainSubstring("rolling the CAs over (0 of 1 roll-overs done)"))
				if ca.Waiting != "" && !slices.Contains(waited, ca.Waiting) {
					waited = append(waited, ca.Waiting)
				}
			}
			g.Expect(*b.CertificateAuthorities).To(Equal(sitev1.CARotationStatus{Rotations: 1}), "bootstrap says: %s", b.Message)
			g.Expect(b.Phase).To(Equal(sitev1.BootstrapInstalled), "bootstrap says: %s", b.Message)
		}).WithContext(ctx).WithTimeout(20 * time.Minute).WithPolling(500 * time.Millisecond).Should(Succeed()) // AddNew and UseNew last 3 minutes at least, and a pass some

		// The leaves of the new CA were renewed, the first of them while the roll-over went on
		// (UseNew waits 3 minutes, they are renewed once 2 minutes old), and every leaf was
		// replaced before it expired.
		Eventually(func(g Gomega) {
			for _, l := range leaves {
				g.Expect(len(leafLog.ofNew(l))).To(BeNumerically(">=", 2), "%s of %s: the new CA's leaf not renewed yet; seen %s", l.file, l.h.Name, leafLog.String(l))
			}
		}).WithContext(ctx).WithTimeout(8 * time.Minute).WithPolling(2 * time.Second).Should(Succeed())
		leafLog.stop()
		for _, l := range leaves {
			Expect(leafLog.rolledOver(l, "kubernetes")).To(Succeed())
		}
		// Back to the BPA's defaults: the next pass issues leaves of a year.
		Expect(siteD.startBPA(ctx)).To(Succeed())
		Eventually(func(g Gomega) {
			for _, l := range leaves {
				c, err := readLeaf(ctx, l)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(c.NotAfter).To(BeTemporally(">", time.Now().Add(24*time.Hour)), "%s of %s", l.file, l.h.Name)
			}
			g.Expect(siteD.bootstrap(g, ctx).Phase).To(Equal(sitev1.BootstrapInstalled))
		}).WithContext(ctx).WithTimeout(6 * time.Minute).WithPolling(2 * time.Second).Should(Succeed())

		answered, failed := requests.Stop()
		GinkgoWriter.Printf("through the CA roll-over and two renewals: requests to webapp %d answered, %d failed; phases began %v; waited for %q; carol's kubeconfig of before used %v after its issue\n", answered, len(failed), began, waited, beforeUsedAfter.Round(time.Second))
		noFailedRequests(ctx, answered, failed)
		Expect(answered).To(BeNumerically(">", 20))
		Expect(began).To(HaveKey(sitev1.RotationUseNew))
		Expect(began).To(HaveKey(sitev1.RotationDropOld))

		// carol's kubeconfigs worked to their end: the one of before, which trusts the old CA
		// only, still worked once every host trusted both, and had expired before the API
		// servers presented the new CA's certificates; the one of during trusts both, has a
		// certificate of the old CA, and had expired before the old CAs went.
		Expect(beforeErr).NotTo(HaveOccurred(), "kubectl with carol's kubeconfig of before the roll-over, in AddNew, %v after its issue: %s", beforeUsedAfter, beforeInAddNew)
		Expect(beforeInAddNew).To(ContainSubstring("webapp-"))
		userCert := func(file string) (*x509.Certificate, []string) {
			GinkgoHelper()
			cfg, err := clientcmd.LoadFromFile(file)
			Expect(err).NotTo(HaveOccurred())
			auth := cfg.AuthInfos[cfg.Contexts[cfg.CurrentContext].AuthInfo]
			block, _ := pem.Decode(auth.ClientCertificateData)
			Expect(block).NotTo(BeNil(), file)
			c, err := x509.ParseCertificate(block.Bytes)
			Expect(err).NotTo(HaveOccurred())
			var cas []string
			for rest := cfg.Clusters[cfg.Contexts[cfg.CurrentContext].Cluster].CertificateAuthorityData; ; {
				var b *pem.Block
				if b, rest = pem.Decode(rest); b == nil {
					break
				}
				ca, err := x509.ParseCertificate(b.Bytes)
				Expect(err).NotTo(HaveOccurred())
				cas = append(cas, ca.Subject.CommonName)
			}
			return c, cas
		}
		certBefore, beforeCAs := userCert(userBefore)
		Expect(beforeCAs).To(Equal([]string{"kubernetes"}))
		Expect(began[sitev1.RotationUseNew]).NotTo(BeTemporally("<", certBefore.NotAfter), "the API servers presented the new CA's certificates while carol's kubeconfig of before was valid")
		certDuring, duringCAs := userCert(userDuring)
		Expect(certDuring.Issuer.CommonName).To(Equal("kubernetes"))
		Expect(duringCAs).To(ConsistOf("kubernetes", "kubernetes-2"))
		Expect(began[sitev1.RotationDropOld]).NotTo(BeTemporally("<", certDuring.NotAfter), "the old CAs went while a certificate they signed was valid")
		Expect(waited).To(ContainElement(ContainSubstring("so that they keep working")))

		// The store holds the new CAs only; every host trusts the new cluster and etcd CAs only
		// and presents certificates they signed.
		pkiData, err := store.Get(ctx, site+"-pki")
		Expect(err).NotTo(HaveOccurred())
		Expect(pkiData).NotTo(HaveKey("ca.next.crt"))
		Expect(string(pkiData["ca.generation"])).To(Equal("1"))
		newCA := strings.TrimSpace(string(pkiData["ca.crt"]))
		for i, h := range members {
			for _, f := range []string{"/etc/kubernetes/pki/ca.crt", "/etc/kubernetes/pki/etcd/ca.crt"} {
				if f != "/etc/kubernetes/pki/ca.crt" && i >= 3 {
					continue // etcd runs on the control plane
				}
				out, err := h.Exec(ctx, "cat", f)
				Expect(err).NotTo(HaveOccurred(), string(out))
				Expect(strings.Count(string(out), "BEGIN CERTIFICATE")).To(Equal(1), "%s: %s", h.Name, f)
			}
			out, err := h.Exec(ctx, "cat", "/etc/kubernetes/pki/ca.crt")
			Expect(err).NotTo(HaveOccurred())
			Expect(strings.TrimSpace(string(out))).To(Equal(newCA), h.Name)
		}
		// Every API server presents a certificate of the new cluster CA; the kubeconfig of
		// before the roll-over no longer reaches the cluster; etcd's members, talking to each
		// other with the new etcd CA, are all still there.
		cs = appClient(ctx)
		for _, h := range members[:3] {
			conn, err := tls.Dial("tcp", netip.AddrPortFrom(h.IP, cluster.APIPort).String(), &tls.Config{InsecureSkipVerify: true})
			Expect(err).NotTo(HaveOccurred(), "kube-apiserver on %s", h.Name)
			issuer := conn.ConnectionState().PeerCertificates[0].Issuer.CommonName
			conn.Close()
			Expect(issuer).To(Equal("kubernetes-2"), "the certificate kube-apiserver on %s presents", h.Name)
		}
		oldCfg, err := clientcmd.RESTConfigFromKubeConfig(oldKubeconfig.Data["value"])
		Expect(err).NotTo(HaveOccurred())
		oldCfg.Timeout = 10 * time.Second
		_, err = kubernetes.NewForConfigOrDie(oldCfg).CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{})
		Expect(err).To(MatchError(ContainSubstring("certificate")), "the kubeconfig of before the roll-over")
		out, err := members[0].Exec(ctx, "sh", "-c", "curl -sS --max-time 5 --cacert /etc/kubernetes/pki/etcd/ca.crt --cert /etc/kubernetes/pki/etcd/server.crt --key /etc/kubernetes/pki/etcd/server.key -X POST -d '{}' https://127.0.0.1:2379/v3/cluster/member/list")
		Expect(err).NotTo(HaveOccurred(), "%s", out)
		for _, h := range members[:3] {
			Expect(string(out)).To(ContainSubstring(`"name":"`+h.Name+`"`), "etcd's members")
		}
		// The workloads whose pods reach the API server were restarted for the new CA, once
		// (CoreDNS); the webapp, which does not mount the API access, kept its pods.
		coredns, err := cs.AppsV1().Deployments("kube-system").Get(ctx, "coredns", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(coredns.Spec.Template.Annotations).To(HaveKey(cluster.CARestartAnnotation))
		Expect(corednsRevision(cs)).To(Equal(corednsBefore+1), "coredns restarted once for the new CA")
		webapp, err := cs.AppsV1().Deployments("webapp").Get(ctx, "webapp", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(webapp.Spec.Template.Annotations).NotTo(HaveKey(cluster.CARestartAnnotation))
		Expect(revisions(webappPods(ctx, cs))).To(Equal(revisions(before)), "the webapp's pods are of another revision")
		Eventually(func(g Gomega) {
			cm, err := cs.CoreV1().ConfigMaps("webapp").Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(strings.TrimSpace(cm.Data["ca.crt"])).To(Equal(newCA))
		}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())
		// The Site shows it.
		Eventually(func(g Gomega) {
			s := &fleetv1.Site{}
			g.Expect(fleet.Global.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: site}, s)).To(Succeed())
			g.Expect(s.Status.Cluster).NotTo(BeNil())
			g.Expect(s.Status.Cluster.Bootstrap).NotTo(BeNil())
			g.Expect(s.Status.Cluster.Bootstrap.CertificateAuthorities).To(Equal(&sitev1.CARotationStatus{Rotations: 1}))
		}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())
	})

	It("installs a package the BPA has never heard of on exactly the hosts its manifest names", func(ctx context.Context) {
		release(ctx, "bpa-3-hello", builders.KubernetesVersion, stackWith(kubernetesAt(builders.KubernetesVersion, "edge-hello")...)...)
		installedWith(ctx, sitev1.InstalledPackage{Name: "edge-hello", Version: "1.0.0", SHA256: digest["edge-hello"]})
		// Its manifest says hosts: worker; the first three hosts are the control plane.
		for i, h := range members {
			if i < 3 {
				out, err := h.Exec(ctx, "ls", "-A", "/opt/edgefleet/packages")
				Expect(err).NotTo(HaveOccurred())
				Expect(strings.Fields(string(out))).NotTo(ContainElement("edge-hello"), "%s is control plane", h.Name)
				continue
			}
			Expect(installed(ctx, h, "edge-hello")).To(Equal("1.0.0 1.0.0"), h.Name)
			out, err := h.Exec(ctx, "cat", "/run/edge-hello/greeting")
			Expect(err).NotTo(HaveOccurred())
			Expect(string(out)).To(HavePrefix(fmt.Sprintf("hello from %s (%s), pods in ", h.Name, h.IP)))
		}
	})

	It("scales the workers out to a new host and in again, keeping or wiping the leaving host, the application serving throughout", func(ctx context.Context) {
		cs := appClient(ctx)
		svc, err := cs.CoreV1().Services("webapp").Get(ctx, "webapp", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		requests := testhosts.StartRequests(GinkgoTB(), hn.Hosts[0], "http://"+svc.Spec.ClusterIP+"/")
		workers := func(g Gomega, ready, total int32) {
			s := &fleetv1.Site{}
			g.Expect(fleet.Global.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: site}, s)).To(Succeed())
			g.Expect(s.Status.Cluster).NotTo(BeNil())
			g.Expect(s.Status.Cluster.Workers).To(Equal(sitev1.NodeCounts{Ready: ready, Total: total}), "site says: %s", s.Status.Cluster.Message)
		}
		nodeNames := func(g Gomega) []string {
			list, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			var names []string
			for _, n := range list.Items {
				names = append(names, n.Name)
			}
			return names
		}
		spare, kept, wiped := hn.Hosts[5], hn.Hosts[4], hn.Hosts[5]
		// The site's release of the spec before is gone with that spec (its cleanup), and a Site
		// whose release does not exist keeps its cluster as last pushed: this spec's own.
		release(ctx, "bpa-4", builders.KubernetesVersion, stackWith(kubernetesAt(builders.KubernetesVersion, "edge-hello")...)...)

		By("scale-out: a sixth host registered as a worker is provisioned, gets the release and joins")
		siteD.register(ctx, 5, fleetv1.RoleWorker)
		Eventually(func(g Gomega) {
			workers(g, 3, 3)
			b := siteD.bootstrap(g, ctx)
			g.Expect(b.Nodes).To(Equal(int32(6)), "bootstrap says: %s", b.Message)
		}).WithContext(ctx).WithTimeout(8 * time.Minute).WithPolling(2 * time.Second).Should(Succeed())
		n, err := cs.CoreV1().Nodes().Get(ctx, spare.Name, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(n.Status.NodeInfo.KubeletVersion).To(Equal("v" + builders.KubernetesVersion))
		Expect(n.Labels).To(HaveKey("node-role.kubernetes.io/worker"))
		Expect(installed(ctx, spare, "edge-hello")).To(Equal("1.0.0 1.0.0"), "the release's worker package")
		// The global Hosts are the registered ones, each a ready, provisioned node of the release.
		version := "v" + builders.KubernetesVersion
		globalHosts := func(hosts ...*testhosts.Host) {
			GinkgoHelper()
			var names []string
			for _, h := range hosts {
				names = append(names, h.Name)
			}
			Eventually(func(g Gomega) {
				siteD.hostsAre(g, ctx, version, names...)
			}).WithContext(ctx).WithTimeout(30 * time.Second).WithPolling(time.Second).Should(Succeed())
		}
		globalHosts(hn.Hosts...)
		// The new node runs pods: one asks the application's Service by name from there.
		var image string
		for _, p := range webappPods(ctx, cs) {
			image = p.Spec.Containers[0].Image
		}
		answers := testhosts.RunPod(GinkgoTB(), cs, "webapp", "on-the-new-node", spare.Name, testhosts.WebappContainer(image, "get", "-get", "http://webapp.webapp.svc.cluster.local/", "-count", "5"))["get"]
		Expect(answers).To(HaveLen(5))

		By("scale-in, keeping the host: its node drained (the application's pods run elsewhere first), its packages stopped, the host released as it is")
		_, err = fleet.Kubectl(ctx, "patch", "site", site, "-n", ns, "--type", "merge", "-p", `{"spec":{"cluster":{"hostRemovalPolicy":"Keep"}}}`)
		Expect(err).NotTo(HaveOccurred())
		_, err = fleet.Kubectl(ctx, "delete", "host", kept.Name, "-n", ns, "--wait=false")
		Expect(err).NotTo(HaveOccurred())
		Eventually(func(g Gomega) {
			workers(g, 2, 2)
			g.Expect(nodeNames(g)).NotTo(ContainElement(kept.Name))
		}).WithContext(ctx).WithTimeout(5 * time.Minute).WithPolling(2 * time.Second).Should(Succeed())
		for _, p := range webappPods(ctx, cs) {
			Expect(p.Spec.NodeName).NotTo(Equal(kept.Name), p.Name)
		}
		// Kept: still running, its kubelet stopped so that its node stays gone.
		Expect(kept.Running()).To(BeTrue())
		Expect(installed(ctx, kept, "kubelet")).To(Equal(builders.KubernetesVersion), "kubelet installed, not active")
		out, _ := kept.Exec(ctx, "systemctl", "is-active", "kubelet.service")
		Expect(strings.TrimSpace(string(out))).To(Equal("inactive"))
		Consistently(func(g Gomega) {
			g.Expect(nodeNames(g)).NotTo(ContainElement(kept.Name))
		}).WithContext(ctx).WithTimeout(20 * time.Second).WithPolling(2 * time.Second).Should(Succeed())
		globalHosts(hn.Hosts[0], hn.Hosts[1], hn.Hosts[2], hn.Hosts[3], wiped)

		By("scale-in, wiping the host")
		_, err = fleet.Kubectl(ctx, "patch", "site", site, "-n", ns, "--type", "merge", "-p", `{"spec":{"cluster":{"hostRemovalPolicy":"Deprovision"}}}`)
		Expect(err).NotTo(HaveOccurred())
		history := siteD.watch(ctx, &metal3api.BareMetalHostList{}, client.InNamespace(sitev1.HostsNamespace), client.MatchingFields{"metadata.name": wiped.Name})
		_, err = fleet.Kubectl(ctx, "delete", "host", wiped.Name, "-n", ns, "--wait=false")
		Expect(err).NotTo(HaveOccurred())
		Eventually(func(g Gomega) {
			workers(g, 1, 1)
			g.Expect(nodeNames(g)).NotTo(ContainElement(wiped.Name))
			err := siteD.client.Get(ctx, client.ObjectKey{Namespace: sitev1.HostsNamespace, Name: wiped.Name}, &metal3api.BareMetalHost{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "BareMetalHost %s: %v", wiped.Name, err)
		}).WithContext(ctx).WithTimeout(5 * time.Minute).WithPolling(2 * time.Second).Should(Succeed())
		globalHosts(hn.Hosts[:4]...)
		// Deprovision: Metal3 wiped the host, the provider released it powered off, and the site
		// deleted its BareMetalHost; the harness's Ironic powered the test host off.
		var versions []metal3api.BareMetalHost
		Eventually(func(g Gomega) {
			evs := history(g)
			g.Expect(evs).NotTo(BeEmpty())
			g.Expect(evs[len(evs)-1].Type).To(Equal(watch.Deleted), "the watch has not seen the deletion yet")
			versions = versions[:0]
			for _, ev := range evs {
				versions = append(versions, *ev.Object.(*metal3api.BareMetalHost))
			}
		}).WithContext(ctx).WithTimeout(30 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
		Expect(versions[0].Spec.ConsumerRef).NotTo(BeNil(), "the host was in use before")
		released := slices.IndexFunc(versions, func(b metal3api.BareMetalHost) bool { return b.Spec.ConsumerRef == nil })
		Expect(released).To(BeNumerically(">", 0), "BareMetalHost %s deleted without being released", wiped.Name)
		for _, b := range versions[released:] {
			Expect(b.Spec.Online).To(BeFalse(), "BareMetalHost %s released online (resourceVersion %s)", wiped.Name, b.ResourceVersion)
			Expect(b.Spec.Image).To(BeNil(), "BareMetalHost %s released with an image", wiped.Name)
		}
		Expect(versions[len(versions)-1].Status.PoweredOn).To(BeFalse(), "BareMetalHost %s deleted powered on", wiped.Name)
		Eventually(wiped.Running).WithTimeout(30*time.Second).WithPolling(500*time.Millisecond).Should(BeFalse(), "test host %s still running, wiped", wiped.Name)
		webappPods(ctx, cs)

		answered, failed := requests.Stop()
		GinkgoWriter.Printf("requests to webapp through the scale-out and both scale-ins: %d answered, %d failed\n", answered, len(failed))
		noFailedRequests(ctx, answered, failed)
		Expect(hostLeft(ctx)).To(ContainElements(ContainSubstring("host "+kept.Name+" left the cluster"), ContainSubstring("host "+wiped.Name+" left the cluster")))
	})

	It("replaces a control-plane host: etcd goes 3 → 2 → 3 members without losing its quorum, the application serving throughout", func(ctx context.Context) {
		cs := appClient(ctx)
		svc, err := cs.CoreV1().Services("webapp").Get(ctx, "webapp", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		// The release of the spec before is gone with it (its cleanup), and a Site whose release
		// does not exist keeps its cluster as last pushed: this spec's own.
		release(ctx, "bpa-5", builders.KubernetesVersion, stackWith(kubernetesAt(builders.KubernetesVersion, "edge-hello")...)...)
		requests := testhosts.StartRequests(GinkgoTB(), hn.Hosts[0], "http://"+svc.Spec.ClusterIP+"/")
		etcd := testhosts.StartEtcdSamples(GinkgoTB(), hn.Hosts[0])
		// host-0 is the API endpoint; host-2 goes, and host-5 (wiped by the scale-in) comes back
		// as a control-plane host. The local controller deletes the old host's Machine and makes
		// the new one's at once: the BPA adds the new member only once the old one is removed.
		old, replacement := hn.Hosts[2], hn.Hosts[5]
		// etcd's members as the member on host-0 lists them, by peer address (a member added
		// but not started yet has no name), with their IDs.
		type member struct {
			ID       string   `json:"ID"`
			Name     string   `json:"name"`
			PeerURLs []string `json:"peerURLs"`
		}
		etcdMembers := func() (map[string]member, error) {
			out, err := hn.Hosts[0].Exec(ctx, "sh", "-c", "curl -sS --max-time 5 --cacert /etc/kubernetes/pki/etcd/ca.crt --cert /etc/kubernetes/pki/etcd/server.crt --key /etc/kubernetes/pki/etcd/server.key -X POST -d '{}' https://127.0.0.1:2379/v3/cluster/member/list")
			if err != nil {
				return nil, fmt.Errorf("%w: %s", err, out)
			}
			var list struct{ Members []member }
			if err := json.Unmarshal(out, &list); err != nil {
				return nil, fmt.Errorf("etcd's member list %q: %w", out, err)
			}
			byPeer := map[string]member{}
			for _, m := range list.Members {
				for _, u := range m.PeerURLs {
					if pu, err := url.Parse(u); err == nil {
						byPeer[pu.Hostname()] = m
					}
				}
			}
			return byPeer, nil
		}
		// The BPA crashes at a random step of the replacement, the local controller at the same
		// or a later one (the suite's seed picks them); both start again. The steps are seen
		// from outside, each holds from when it is reached on: the old host drained and its
		// Machine waiting for the BPA, its etcd member removed, the new host's member added.
		// The members that stay must not be restarted, nor the new member added twice.
		oldLeaving := func(*sitev1.BootstrapStatus) bool {
			list := &clusterv1.MachineList{}
			if err := siteD.client.List(ctx, list, client.InNamespace(sitev1.InfoNamespace)); err != nil {
				return false
			}
			for _, m := range list.Items {
				if path.Base(m.Spec.ProviderID) == old.Name {
					return m.Status.Deletion != nil && !m.Status.Deletion.WaitForPreTerminateHookStartTime.IsZero()
				}
			}
			return true // gone: it left
		}
		// added is the new host's member when first seen, by the crashes' polls or this spec's.
		var (
			mu    sync.Mutex
			added member
		)
		seen := func(m map[string]member) member {
			mu.Lock()
			defer mu.Unlock()
			if added.ID == "" {
				added = m[replacement.IP.String()]
			}
			return added
		}
		memberRemoved := func(*sitev1.BootstrapStatus) bool {
			m, err := etcdMembers()
			_, there := m[old.IP.String()]
			seen(m)
			return err == nil && !there
		}
		memberAdded := func(*sitev1.BootstrapStatus) bool {
			m, err := etcdMembers()
			return err == nil && seen(m).ID != ""
		}
		steps := []crash{
			{at: oldLeaving, step: "host " + old.Name + " drained, its Machine waiting for the BPA"},
			{at: memberRemoved, step: "etcd member of " + old.Name + " removed"},
			{at: memberAdded, step: "etcd member of " + replacement.Name + " added"},
		}
		rng := mrand.New(mrand.NewPCG(uint64(GinkgoRandomSeed()), 887))
		bpaAt := rng.IntN(len(steps))
		lcAt := bpaAt + rng.IntN(len(steps)-bpaAt)
		bpaCrash, lcCrash := steps[bpaAt], steps[lcAt]
		bpaCrash.what, lcCrash.what = "BPA", "local controller"
		etcdRun := func(h *testhosts.Host) string {
			GinkgoHelper()
			out, err := h.Exec(ctx, "systemctl", "show", "-p", "InvocationID", "--value", "etcd.service")
			Expect(err).NotTo(HaveOccurred(), "%s", out)
			return strings.TrimSpace(string(out))
		}
		staying := map[*testhosts.Host]string{hn.Hosts[0]: etcdRun(hn.Hosts[0]), hn.Hosts[1]: etcdRun(hn.Hosts[1])}
		crashed := siteD.crashes(ctx, bpaCrash, lcCrash)

		_, err = fleet.Kubectl(ctx, "delete", "host", old.Name, "-n", ns, "--wait=false")
		Expect(err).NotTo(HaveOccurred())
		siteD.register(ctx, 5, fleetv1.RoleControlPlane)

		Eventually(func(g Gomega) {
			s := &fleetv1.Site{}
			g.Expect(fleet.Global.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: site}, s)).To(Succeed())
			g.Expect(s.Status.Cluster).NotTo(BeNil())
			g.Expect(s.Status.Cluster.ControlPlane).To(Equal(sitev1.NodeCounts{Ready: 3, Total: 3}), "site says: %s", s.Status.Cluster.Message)
			if m, err := etcdMembers(); err == nil {
				seen(m)
			}
			b := siteD.bootstrap(g, ctx)
			g.Expect(b.Phase).To(Equal(sitev1.BootstrapInstalled), "bootstrap says: %s", b.Message)
			g.Expect(b.Message).NotTo(ContainSubstring("join once"))
			list, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "node-role.kubernetes.io/control-plane"})
			g.Expect(err).NotTo(HaveOccurred())
			var names []string
			for _, n := range list.Items {
				names = append(names, n.Name)
			}
			g.Expect(names).To(ConsistOf(hn.Hosts[0].Name, hn.Hosts[1].Name, replacement.Name))
		}).WithContext(ctx).WithTimeout(10 * time.Minute).WithPolling(2 * time.Second).Should(Succeed())
		webappPods(ctx, cs)
		crashes, err := crashed()
		GinkgoWriter.Printf("crashes during the control-plane replacement: %q\n", crashes)
		Expect(err).NotTo(HaveOccurred())
		Expect(crashes).To(HaveLen(2))

		answered, failed := requests.Stop()
		samples := etcd.Stop()
		GinkgoWriter.Printf("through the control-plane replacement: requests to webapp %d answered, %d failed; etcd samples %v\n", answered, len(failed), samples)
		noFailedRequests(ctx, answered, failed)
		Expect(len(samples)).To(BeNumerically(">", 5))
		sawTwo := false
		for i, e := range samples {
			Expect(e.Members).To(BeNumerically("<=", 3), "etcd sample %d of %d: never a fourth member", i, len(samples))
			Expect(e.Healthy).To(BeNumerically(">", e.Members/2), "etcd sample %d of %d: quorum kept", i, len(samples))
			sawTwo = sawTwo || e.Members == 2
		}
		Expect(sawTwo).To(BeTrue(), "etcd went down to 2 members before the new one was added")
		Expect(samples[len(samples)-1]).To(Equal(testhosts.EtcdSample{Members: 3, Healthy: 3}))
		// Exactly the three hosts are members (none left behind, none added but never started),
		// the new one under the member first added for it; the members that stayed ran on.
		final, err := etcdMembers()
		Expect(err).NotTo(HaveOccurred())
		Expect(final).To(HaveLen(3), "etcd's members: %+v", final)
		for _, h := range []*testhosts.Host{hn.Hosts[0], hn.Hosts[1], replacement} {
			Expect(final).To(HaveKeyWithValue(h.IP.String(), HaveField("Name", h.Name)), "etcd's members")
		}
		Expect(final[replacement.IP.String()].ID).To(Equal(added.ID), "the member of %s was added again", replacement.Name)
		for h, run := range staying {
			Expect(etcdRun(h)).To(Equal(run), "etcd on %s, which stayed, was restarted", h.Name)
		}
		Expect(hostLeft(ctx)).To(ContainElement(ContainSubstring("host " + old.Name + " left the cluster")))
	})

	// Last: the BPA runs with --cluster-kms-* from here on (a restart without them is refused
	// for this cluster, as it should be).
	It("moves the cluster's Secrets to Vault through the KMS plugin once its BPA is given --cluster-kms-*, phase by phase, the application's Service never failing a request; then the Secrets in etcd under the plugin, the plugin on the control-plane hosts only, the secretbox key gone, the transit key and ServiceAccount made, the plugin's token renewed at half its life", func(ctx context.Context) {
		cs := appClient(ctx)
		svc, err := cs.CoreV1().Services("webapp").Get(ctx, "webapp", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		// Vault set up for the site as docs/security.md says: its Kubernetes auth method
		// reviewing the site cluster's tokens, the plugins' role bound to the cluster's plugin
		// ServiceAccount with a policy of its transit key, the transit engine (the BPA makes the
		// key). Vault serves TLS on the hosts' gateway, where the plugins reach it.
		key := "site-d-" + site
		Expect(client.IgnoreAlreadyExists(siteD.client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: clusterkms.Namespace}}))).To(Succeed())
		Expect(vault.KubernetesAuth(ctx, fleet.Sites[site], "kube-system")).To(Succeed())
		Expect(vault.KubernetesRole(ctx, "edgefleet-kms", clusterkms.Namespace, clusterkms.ServiceAccountPrefix+site, "edgefleet-kms-site-d",
			encryption.TransitPolicy(testvault.TransitMount, key), time.Hour, 24*time.Hour)).To(Succeed())
		Expect(vault.MountTransit(ctx)).To(Succeed())
		digest["kms-plugin"] = uploadPackage(ctx, builders.BuildPackage(GinkgoTB(), "kms-plugin", "0.1.0", nil))
		release(ctx, "bpa-6-kms", builders.KubernetesVersion, stackWith(kubernetesAt(builders.KubernetesVersion, "edge-hello", "kms-plugin")...)...)

		requests := testhosts.StartRequests(GinkgoTB(), hn.Hosts[0], "http://"+svc.Spec.ClusterIP+"/")
		Expect(siteD.startBPA(ctx, "--cluster-kms-vault-addr", vault.Addr, "--cluster-kms-vault-ca-file", vault.CAFile,
			"--cluster-kms-key-prefix", "site-d-", "--cluster-kms-token-ttl", "10m")).To(Succeed())
		seen := map[sitev1.KeyRotationPhase]bool{}
		Eventually(func(g Gomega) {
			b := siteD.bootstrap(g, ctx)
			g.Expect(b).NotTo(BeNil())
			g.Expect(b.SecretEncryption).NotTo(BeNil())
			if e := b.SecretEncryption; e.To == sitev1.SecretEncryptionKMS {
				seen[e.Phase] = true
				g.Expect(e.Since).NotTo(BeNil())
				g.Expect(b.Message).To(ContainSubstring("moving the Secrets to the KMS plugin (Vault)"))
			}
			g.Expect(*b.SecretEncryption).To(Equal(sitev1.SecretEncryptionStatus{Provider: sitev1.SecretEncryptionKMS, Key: "edgefleet-vault", Rotations: 1, Reencrypted: "edgefleet-vault"}), "bootstrap says: %s", b.Message)
			g.Expect(b.Phase).To(Equal(sitev1.BootstrapInstalled), "bootstrap says: %s", b.Message)
			g.Expect(b.Packages).To(ContainElement(sitev1.InstalledPackage{Name: "kms-plugin", Version: "0.1.0", SHA256: digest["kms-plugin"]}))
		}).WithContext(ctx).WithTimeout(10 * time.Minute).WithPolling(500 * time.Millisecond).Should(Succeed())
		answered, failed := requests.Stop()
		GinkgoWriter.Printf("through the move to the KMS plugin: requests to webapp %d answered, %d failed; phases seen %v\n", answered, len(failed), seen)
		noFailedRequests(ctx, answered, failed)
		Expect(answered).To(BeNumerically(">", 20))
		// Each run rolls its phase out and moves on, so the status shows the phases after
		// AddNew (as in the key rotation).
		Expect(seen).To(HaveKey(sitev1.RotationUseNew))
		Expect(seen).To(HaveKey(sitev1.RotationDropOld))

		// The Secret of the rotation spec, written under a secretbox key, is in etcd through the
		// plugin now, and reads back; a new one is written through it.
		for _, name := range []string{"rotation-probe", "kms-probe"} {
			if name == "kms-probe" {
				_, err := cs.CoreV1().Secrets("default").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}, StringData: map[string]string{"value": "kms-" + rand.Text()}}, metav1.CreateOptions{})
				Expect(err).NotTo(HaveOccurred())
			}
			Expect(storedSecret(ctx, hn.Hosts[0], "default", name)).To(HavePrefix("k8s:enc:kms:v2:edgefleet-vault:"), name)
			_, err := cs.CoreV1().Secrets("default").Get(ctx, name, metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred())
		}
		// The plugin runs on the control-plane hosts only (host-2 was replaced by host-5); their
		// API servers name it alone; the secretbox key is gone from the PKI; the BPA made the
		// transit key and the plugin's ServiceAccount, labeled with its cluster.
		controlPlanes := []*testhosts.Host{hn.Hosts[0], hn.Hosts[1], hn.Hosts[5]}
		for _, h := range controlPlanes {
			Expect(installed(ctx, h, "kms-plugin")).To(Equal("0.1.0 0.1.0"), h.Name)
			out, err := h.Exec(ctx, "cat", "/etc/kubernetes/"+pki.EncryptionConfigFile)
			Expect(err).NotTo(HaveOccurred())
			Expect(string(out)).To(ContainSubstring("name: "+pki.KMSProviderName), h.Name)
			Expect(string(out)).NotTo(ContainSubstring("secretbox"), h.Name)
		}
		for _, worker := range []*testhosts.Host{hn.Hosts[3], hn.Hosts[4]} {
			Expect(installed(ctx, worker, "kms-plugin")).To(BeEmpty(), worker.Name)
		}
		stored, err := store.Get(ctx, site+"-pki")
		Expect(err).NotTo(HaveOccurred())
		Expect(stored).NotTo(HaveKey("secretbox.key"))
		transitKey, err := vault.Client.Logical().ReadWithContext(ctx, testvault.TransitMount+"/keys/"+key)
		Expect(err).NotTo(HaveOccurred())
		Expect(transitKey).NotTo(BeNil(), "transit key %s", key)
		sa := &corev1.ServiceAccount{}
		Expect(siteD.client.Get(ctx, client.ObjectKey{Namespace: clusterkms.Namespace, Name: clusterkms.ServiceAccountPrefix + site}, sa)).To(Succeed())
		owner, ok := clusterkms.ClusterOf(sa)
		Expect(ok).To(BeTrue(), "the labels of ServiceAccount %s: %v", sa.Name, sa.Labels)
		Expect(owner).To(Equal(client.ObjectKey{Namespace: sitev1.InfoNamespace, Name: site}))

		// The token (10 minutes) is minted again once half its life is gone, written to every
		// control-plane host, and each plugin logs in with it.
		tokenOn := func(h *testhosts.Host) string {
			out, err := h.Exec(ctx, "cat", "/etc/edgefleet/kms-plugin/token")
			Expect(err).NotTo(HaveOccurred())
			return string(out)
		}
		logins := func(h *testhosts.Host) int {
			out, err := h.Exec(ctx, "journalctl", "--no-pager", "-o", "cat", "-u", "edgefleet-kms.service")
			Expect(err).NotTo(HaveOccurred())
			return strings.Count(string(out), "logged in to Vault")
		}
		first, loginsBefore := map[*testhosts.Host]string{}, map[*testhosts.Host]int{}
		for _, h := range controlPlanes {
			first[h], loginsBefore[h] = tokenOn(h), logins(h)
		}
		Eventually(func(g Gomega) {
			for _, h := range controlPlanes {
				g.Expect(tokenOn(h)).NotTo(Equal(first[h]), "%s's token", h.Name)
				g.Expect(logins(h)).To(BeNumerically(">", loginsBefore[h]), "%s's plugin's log-ins", h.Name)
			}
		}).WithContext(ctx).WithTimeout(7 * time.Minute).WithPolling(5 * time.Second).Should(Succeed())
	})
})

// storedSecret is what the etcd of control-plane host h holds for Secret ns/name, read there
// with the API server's etcd client certificate.
func storedSecret(ctx context.Context, h *testhosts.Host, ns, name string) string {
	GinkgoHelper()
	body := fmt.Sprintf(`{"key":%q}`, base64.StdEncoding.EncodeToString([]byte("/registry/secrets/"+ns+"/"+name)))
	out, err := h.Exec(ctx, "curl", "-sS", "--max-time", "10", "--cacert", "/etc/kubernetes/pki/etcd/ca.crt",
		"--cert", "/etc/kubernetes/pki/apiserver-etcd-client.crt", "--key", "/etc/kubernetes/pki/apiserver-etcd-client.key",
		"-X", "POST", "-d", body, "https://127.0.0.1:2379/v3/kv/range")
	Expect(err).NotTo(HaveOccurred(), string(out))
	var kv struct {
		KVs []struct {
			Value []byte `json:"value"`
		} `json:"kvs"`
	}
	Expect(json.Unmarshal(out, &kv)).To(Succeed(), string(out))
	Expect(kv.KVs).To(HaveLen(1), "etcd's keys /registry/secrets/%s/%s", ns, name)
	return string(kv.KVs[0].Value)
}

// eventTime is when an event last happened.
func eventTime(e eventsv1.Event) time.Time {
	switch {
	case e.Series != nil:
		return e.Series.LastObservedTime.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.DeprecatedLastTimestamp.Time
}
