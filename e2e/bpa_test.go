package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	. "github.com/onsi/gomega/gstruct"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
	restv1 "github.com/edgefleet/edgefleet/api/rest/v1"
	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
	"github.com/edgefleet/edgefleet/local-controller/setup"
	"github.com/edgefleet/edgefleet/pkg/secrets"
	"github.com/edgefleet/edgefleet/pkg/testenv"
)

// The BPA as the site's bootstrap provider, on five real hosts (needs root): the global
// controller pushes the cluster, Metal3 (fixture provisioner) provisions the hosts, the
// harness boots each real host with its first-boot data as Ironic would, and the site's BPA
// builds the application cluster over SSH from the packages the site cached.
var _ = Describe("The BPA builds a site's application cluster on real hosts", Ordered, func() {
	const (
		site = "site-d"
		ns   = "bpa"
	)
	var (
		hn     *testenv.HostNet
		vault  *testenv.Vault
		dir    string // this test's files: packages, chart, manifests
		siteD  client.Client
		store  secrets.Store
		digest = map[string]string{} // of uploaded artifacts, by file name
	)

	// upload puts a file into the artifact store with the CLI and returns its sha256.
	upload := func(ctx context.Context, file, kind, name, version string) string {
		GinkgoHelper()
		out, err := fleet.Edgefleet(ctx, "artifact", "upload", file, "--kind", kind, "--name", name, "--version", version, "-o", "json")
		Expect(err).NotTo(HaveOccurred())
		var a restv1.Artifact
		Expect(json.Unmarshal(out, &a)).To(Succeed(), string(out))
		DeferCleanup(func(ctx context.Context) error {
			_, err := fleet.Edgefleet(ctx, "artifact", "delete", a.ID)
			return err
		})
		return a.SHA256
	}
	uploadPackage := func(ctx context.Context, b testenv.BuiltPackage) string {
		GinkgoHelper()
		return upload(ctx, b.Path, "binary-package", b.Manifest.Name, b.Manifest.Version)
	}
	// release creates a Release of the three packages (etcd, kube-apiserver, node agent) and
	// the chart, and makes it the site's.
	release := func(ctx context.Context, name string, pkgs ...string) {
		GinkgoHelper()
		r := &fleetv1.Release{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: fleetv1.ReleaseSpec{
			KubernetesVersion: "v1.36.3",
			OSImage:           sitev1.OSImage{SHA256: digest["os"]},
			Charts:            []sitev1.ArtifactRef{{SHA256: digest["chart"], Name: "helm-chart hello"}},
		}}
		for _, p := range pkgs {
			r.Spec.Packages = append(r.Spec.Packages, sitev1.ArtifactRef{SHA256: digest[p], Name: "binary-package " + p})
		}
		Expect(fleet.Global.Client.Create(ctx, r)).To(Succeed())
		// Before the artifacts it references (cleanups run last in, first out).
		DeferCleanup(func(ctx context.Context) error { return client.IgnoreNotFound(fleet.Global.Client.Delete(ctx, r)) })
		patch := fmt.Sprintf(`{"spec":{"cluster":{"release":%q}}}`, name)
		_, err := fleet.Kubectl(ctx, "patch", "site", site, "-n", ns, "--type", "merge", "-p", patch)
		Expect(err).NotTo(HaveOccurred())
	}
	// bootstrap is the BPA's report on the site's cluster (nil until there is one).
	bootstrap := func(g Gomega, ctx context.Context) *sitev1.BootstrapStatus {
		ac := &sitev1.ApplicationCluster{}
		g.Expect(siteD.Get(ctx, client.ObjectKey{Namespace: sitev1.InfoNamespace, Name: site}, ac)).To(Succeed())
		return ac.Status.Bootstrap
	}
	// appClient is a client of the application cluster through the kubeconfig the BPA gave
	// Cluster-API, held in memory only.
	appClient := func(ctx context.Context) kubernetes.Interface {
		GinkgoHelper()
		secret := &corev1.Secret{}
		Expect(siteD.Get(ctx, client.ObjectKey{Namespace: sitev1.InfoNamespace, Name: site + "-kubeconfig"}, secret)).To(Succeed())
		cfg, err := clientcmd.RESTConfigFromKubeConfig(secret.Data["value"])
		Expect(err).NotTo(HaveOccurred())
		cs, err := kubernetes.NewForConfig(cfg)
		Expect(err).NotTo(HaveOccurred())
		return cs
	}
	// installed is a package's installed state on a host: "<current> <active>".
	installed := func(ctx context.Context, h *testenv.Host, pkg string) string {
		GinkgoHelper()
		out, _ := h.Exec(ctx, "sh", "-c", fmt.Sprintf("basename \"$(readlink /opt/edgefleet/packages/%[1]s/current)\"; cat /opt/edgefleet/packages/%[1]s/.active", pkg))
		return strings.Join(strings.Fields(string(out)), " ")
	}

	BeforeAll(func(ctx context.Context) {
		hn = testenv.NewHosts(GinkgoTB(), 5, testenv.HostOptions{})
		vault = testenv.StartVault(GinkgoTB())
		store = secrets.NewVault(vault.Client, "secret", "edgefleet/bpa")
		scheme, err := setup.Scheme()
		Expect(err).NotTo(HaveOccurred())
		siteD, err = client.New(fleet.Sites[site].Config, client.Options{Scheme: scheme})
		Expect(err).NotTo(HaveOccurred())

		Expect(fleet.StartSiteMetal3(ctx, site)).To(Succeed())
		_, err = fleet.StartLocalController(ctx, site, "--node-bootstrap=bpa")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() error { return fleet.StopLocalController(site) })
		_, err = fleet.StartBPA(ctx, site, vault)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() error { return fleet.StopBPA(site) })
		stop := hn.PlayIronic(context.Background(), siteD, sitev1.InfoNamespace, func(err error) {
			GinkgoWriter.Println("ironic:", err)
		})
		DeferCleanup(stop)

		dir = GinkgoT().TempDir()
		image, imageDigest := testenv.RandomContent(1<<20, 11)
		Expect(os.WriteFile(filepath.Join(dir, "edge-os.img"), image, 0o600)).To(Succeed())
		Expect(upload(ctx, filepath.Join(dir, "edge-os.img"), "os-image", "edge-os", "1.0.0")).To(Equal(imageDigest))
		digest["os"] = imageDigest
		digest["etcd"] = uploadPackage(ctx, testenv.BuildPackage(GinkgoTB(), "etcd", "3.6.16", nil))
		digest["kube-apiserver"] = uploadPackage(ctx, testenv.BuildPackage(GinkgoTB(), "kube-apiserver", "1.36.3", nil))
		digest["node-agent"] = uploadPackage(ctx, testenv.BuildPackage(GinkgoTB(), "node-agent", "0.1.0", nil))
		digest["node-agent 0.2.0"] = uploadPackage(ctx, testenv.BuildPackage(GinkgoTB(), "node-agent", "0.2.0", nil))
		digest["node-agent 0.3.0 broken"] = uploadPackage(ctx, testenv.BuildPackage(GinkgoTB(), "node-agent", "0.3.0", func(dir string) {
			Expect(os.WriteFile(filepath.Join(dir, "hooks", "health-check"), []byte("#!/bin/sh\necho 'node agent 0.3.0 is broken' >&2\nexit 1\n"), 0o755)).To(Succeed())
		}))
		chart := testenv.BuildChart(GinkgoTB(), "hello", "0.1.0", nil)
		Expect(os.WriteFile(filepath.Join(dir, "hello.tgz"), chart.Archive, 0o600)).To(Succeed())
		digest["chart"] = upload(ctx, filepath.Join(dir, "hello.tgz"), "helm-chart", "hello", "0.1.0")

		// The site and its hosts, with the real hosts' boot MACs and addresses.
		manifest := fmt.Sprintf(`apiVersion: fleet.edgefleet.io/v1alpha1
kind: Site
metadata: {name: %s, namespace: %s}
spec:
  kubeconfigSecretRef: {name: %[1]s-kubeconfig}
  artifactAPIURL: %[3]s
`, site, ns, fleet.APIURL)
		for i, h := range hn.Hosts {
			role := "control-plane"
			if i >= 3 {
				role = "worker"
			}
			manifest += fmt.Sprintf(`---
apiVersion: fleet.edgefleet.io/v1alpha1
kind: Host
metadata: {name: %s, namespace: %s}
spec:
  siteRef: {name: %s}
  role: %s
  bootMACAddress: "%s"
  address: %s
  bmc:
    address: redfish+http://192.0.2.%d/redfish/v1/Systems/1
    credentialsSecretRef: {name: %[1]s-bmc}
`, h.Name, ns, site, role, h.MAC, h.IP, 60+i)
		}
		file := filepath.Join(dir, "site-d.yaml")
		Expect(os.WriteFile(file, []byte(manifest), 0o600)).To(Succeed())
		Expect(fleet.Apply(ctx, file)).To(Succeed())
		patch := fmt.Sprintf(`{"spec":{"cluster":{"network":{"podCIDRs":["10.244.0.0/16"],"serviceCIDRs":["10.96.0.0/12"],`+
			`"controlPlaneEndpoint":{"host":%q}}}}}`, hn.Hosts[0].IP)
		_, err = fleet.Kubectl(ctx, "patch", "site", site, "-n", ns, "--type", "merge", "-p", patch)
		Expect(err).NotTo(HaveOccurred())
		release(ctx, "bpa-1", "etcd", "kube-apiserver", "node-agent")
	})

	ReportAfterEach(func(r SpecReport) {
		if r.Failed() {
			AddReportEntry("logs", fleet.LocalController(site).Log+" "+filepath.Join(fleet.Dir, site+"-bpa.log"))
		}
	})

	It("finishes an install the BPA was killed in, without redoing what was done", func(ctx context.Context) {
		// Wait until etcd is active on some control-plane host, then kill the BPA.
		var done []*testenv.Host
		Eventually(func(g Gomega) {
			done = nil
			for _, h := range hn.Hosts[:3] {
				if h.Running() && installed(ctx, h, "etcd") == "3.6.16 3.6.16" {
					done = append(done, h)
				}
			}
			g.Expect(done).NotTo(BeEmpty(), "bootstrap: %+v", bootstrap(g, ctx))
		}).WithContext(ctx).WithTimeout(4 * time.Minute).WithPolling(200 * time.Millisecond).Should(Succeed())
		Expect(fleet.KillBPA(site)).To(Succeed())
		// etcd's service on those hosts: the same run of it must serve after the restart.
		invocation := map[string]string{}
		for _, h := range done {
			out, err := h.Exec(ctx, "systemctl", "show", "-p", "InvocationID", "--value", "etcd.service")
			Expect(err).NotTo(HaveOccurred())
			invocation[h.Name] = strings.TrimSpace(string(out))
		}
		Expect(bootstrap(Default, ctx).Phase).NotTo(Equal(sitev1.BootstrapInstalled), "the kill must come before the end")
		_, err := fleet.StartBPA(ctx, site, vault)
		Expect(err).NotTo(HaveOccurred())

		Eventually(func(g Gomega) {
			b := bootstrap(g, ctx)
			g.Expect(b).NotTo(BeNil())
			g.Expect(b.Phase).To(Equal(sitev1.BootstrapInstalled), "bootstrap says: %s", b.Message)
		}).WithContext(ctx).WithTimeout(5 * time.Minute).WithPolling(time.Second).Should(Succeed())
		for _, h := range done {
			out, err := h.Exec(ctx, "systemctl", "show", "-p", "InvocationID", "--value", "etcd.service")
			Expect(err).NotTo(HaveOccurred())
			Expect(strings.TrimSpace(string(out))).To(Equal(invocation[h.Name]), "etcd on %s was started again after the restart", h.Name)
		}
	})

	It("builds 3 control-plane and 2 worker nodes, installs the chart, and the global Site shows it", func(ctx context.Context) {
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
		b := s.Status.Cluster.Bootstrap
		Expect(b.Nodes).To(Equal(int32(5)))
		Expect(b.Packages).To(ConsistOf(
			sitev1.InstalledPackage{Name: "etcd", Version: "3.6.16", SHA256: digest["etcd"]},
			sitev1.InstalledPackage{Name: "kube-apiserver", Version: "1.36.3", SHA256: digest["kube-apiserver"]},
			sitev1.InstalledPackage{Name: "node-agent", Version: "0.1.0", SHA256: digest["node-agent"]}))
		Expect(b.Charts).To(HaveLen(1))
		Expect(b.Charts[0]).To(MatchFields(IgnoreExtras, Fields{"Name": Equal("hello"), "Namespace": Equal("hello"),
			"Version": Equal("0.1.0"), "Revision": Equal(int32(1)), "State": Equal("deployed")}))

		// The application cluster answers through the kubeconfig the BPA gave Cluster-API.
		cs := appClient(ctx)
		nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		Expect(err).NotTo(HaveOccurred())
		ready := map[string]string{}
		for _, n := range nodes.Items {
			for _, c := range n.Status.Conditions {
				if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
					ready[n.Name] = n.Spec.ProviderID
				}
			}
		}
		want := map[string]string{}
		for _, h := range hn.Hosts {
			want[h.Name] = "metal3://" + sitev1.InfoNamespace + "/" + h.Name
		}
		Expect(ready).To(Equal(want))
		cm, err := cs.CoreV1().ConfigMaps("hello").Get(ctx, "hello-hello", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(cm.Data).To(HaveKeyWithValue("greeting", "hello"))

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
		for _, h := range hn.Hosts {
			dirs = append(dirs, filepath.Join(h.Dir, "upper"))
		}
		found, scanned, err := testenv.FindSecrets(dirs, secret)
		Expect(err).NotTo(HaveOccurred())
		Expect(found).To(BeEmpty())
		Expect(scanned).To(BeNumerically(">", 100))
		// The scan looks where keys would be: each host's own etcd key is found there.
		serverKey, err := os.ReadFile(filepath.Join(hn.Hosts[0].Dir, "upper", "etc/kubernetes/pki/etcd/server.key"))
		Expect(err).NotTo(HaveOccurred())
		found, _, err = testenv.FindSecrets(dirs[len(dirs)-5:], map[string][]byte{"host-0's etcd key": serverKey})
		Expect(err).NotTo(HaveOccurred())
		Expect(found).NotTo(BeEmpty())
	})

	It("patches the node agent through a new release, node by node", func(ctx context.Context) {
		release(ctx, "bpa-2", "etcd", "kube-apiserver", "node-agent 0.2.0")
		Eventually(func(g Gomega) {
			b := bootstrap(g, ctx)
			g.Expect(b).NotTo(BeNil())
			g.Expect(b.Phase).To(Equal(sitev1.BootstrapInstalled), "bootstrap says: %s", b.Message)
			g.Expect(b.Packages).To(ContainElement(sitev1.InstalledPackage{Name: "node-agent", Version: "0.2.0", SHA256: digest["node-agent 0.2.0"]}))
		}).WithContext(ctx).WithTimeout(5 * time.Minute).WithPolling(time.Second).Should(Succeed())
		for _, h := range hn.Hosts {
			Expect(installed(ctx, h, "node-agent")).To(Equal("0.2.0 0.2.0"), h.Name)
		}
		nodes, err := appClient(ctx).CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		Expect(err).NotTo(HaveOccurred())
		for _, n := range nodes.Items {
			Expect(n.Spec.Unschedulable).To(BeFalse(), n.Name)
		}
	})

	It("stops a patch whose health check fails, rolls that node back, and says so", func(ctx context.Context) {
		release(ctx, "bpa-3", "etcd", "kube-apiserver", "node-agent 0.3.0 broken")
		var b *sitev1.BootstrapStatus
		Eventually(func(g Gomega) {
			b = bootstrap(g, ctx)
			g.Expect(b).NotTo(BeNil())
			g.Expect(b.Phase).To(Equal(sitev1.BootstrapFailed), "bootstrap says: %s", b.Message)
		}).WithContext(ctx).WithTimeout(5 * time.Minute).WithPolling(time.Second).Should(Succeed())
		Expect(b.FailedPackage).To(Equal(digest["node-agent 0.3.0 broken"]))
		Expect(b.Message).To(ContainSubstring("stopped at node host-0"))
		Expect(b.Message).To(ContainSubstring("node agent 0.3.0 is broken"))
		Expect(b.Packages).To(ContainElement(sitev1.InstalledPackage{Name: "node-agent", Version: "0.2.0", SHA256: digest["node-agent 0.2.0"]}))
		for _, h := range hn.Hosts {
			Expect(installed(ctx, h, "node-agent")).To(Equal("0.2.0 0.2.0"), h.Name)
		}
		// The cluster still serves, every node Ready and schedulable.
		nodes, err := appClient(ctx).CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(nodes.Items).To(HaveLen(5))
		for _, n := range nodes.Items {
			Expect(n.Spec.Unschedulable).To(BeFalse(), n.Name)
		}
		// The global Site says it too.
		s := &fleetv1.Site{}
		Eventually(func(g Gomega) {
			g.Expect(fleet.Global.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: site}, s)).To(Succeed())
			g.Expect(s.Status.Cluster.Bootstrap.Phase).To(Equal(sitev1.BootstrapFailed))
		}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())
	})
})
