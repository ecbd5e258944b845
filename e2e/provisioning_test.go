package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	metal3api "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	capiconditions "sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
	restv1 "github.com/edgefleet/edgefleet/api/rest/v1"
	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
	"github.com/edgefleet/edgefleet/local-controller/setup"
	"github.com/edgefleet/edgefleet/test/testutil"
)

var _ = Describe("Site provisioning from the global inventory", Ordered, func() {
	const site = "site-c"
	var (
		siteC   client.Client
		imageID string
	)

	BeforeAll(func(ctx context.Context) {
		Expect(fleet.StartSiteProvisioning(ctx, site)).To(Succeed())
		_, err := fleet.StartSimulatedLocalController(ctx, site)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() error { return fleet.StopLocalController(site) })
		scheme, err := setup.Scheme()
		Expect(err).NotTo(HaveOccurred())
		siteC, err = client.New(fleet.Sites[site].Config, client.Options{Scheme: scheme})
		Expect(err).NotTo(HaveOccurred())

		// The OS image goes into the artifact store; the site caches it by its digest.
		data, digest := testutil.RandomContent(1<<20+3, 7)
		file := filepath.Join(GinkgoT().TempDir(), "edge-os.img")
		Expect(os.WriteFile(file, data, 0o600)).To(Succeed())
		out, err := fleet.Edgefleet(ctx, "artifact", "upload", file, "--kind", "os-image", "--name", "edge-os", "--version", "1.0.0", "-o", "json")
		Expect(err).NotTo(HaveOccurred())
		var a restv1.Artifact
		Expect(json.Unmarshal(out, &a)).To(Succeed(), string(out))
		imageID = a.ID
		DeferCleanup(func(ctx context.Context) error {
			_, err := fleet.Edgefleet(ctx, "artifact", "delete", imageID)
			return err
		})

		Expect(fleet.Apply(ctx, "e2e/testdata/site-c.yaml")).To(Succeed())
		// The global controller gives the site its own token for the artifact API at this URL.
		patch := fmt.Sprintf(`{"spec":{"artifactAPIURL":%q,"cluster":{"kubernetesVersion":"v1.36.3","osImage":{"sha256":%q},`+
			`"network":{"podCIDRs":["10.244.0.0/16"],"serviceCIDRs":["10.96.0.0/12"],"controlPlaneEndpoint":{"host":"192.0.2.30"}}}}}`, fleet.APIURL, digest)
		_, err = fleet.Kubectl(ctx, "patch", "site", site, "-n", "provisioning", "--type", "merge", "-p", patch)
		Expect(err).NotTo(HaveOccurred())
	})

	ReportAfterEach(func(r SpecReport) {
		if r.Failed() {
			AddReportEntry(site+" local controller log", fleet.LocalController(site).Log)
		}
	})

	It("survives a crash of the local controller in the middle of provisioning", func(ctx context.Context) {
		// Wait until machines exist and some host is on its way, then kill the controller.
		Eventually(func(g Gomega) {
			machines := &clusterv1.MachineList{}
			g.Expect(siteC.List(ctx, machines, client.InNamespace(sitev1.InfoNamespace))).To(Succeed())
			g.Expect(len(machines.Items)).To(BeNumerically(">=", 3))
		}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(200 * time.Millisecond).Should(Succeed())
		ac := &sitev1.ApplicationCluster{}
		Expect(siteC.Get(ctx, client.ObjectKey{Namespace: sitev1.InfoNamespace, Name: site}, ac)).To(Succeed())
		Expect(ac.Status.Phase).NotTo(Equal(sitev1.ClusterProvisioned), "the kill must come before the end")
		Expect(fleet.KillLocalController(site)).To(Succeed())
		_, err := fleet.StartSimulatedLocalController(ctx, site)
		Expect(err).NotTo(HaveOccurred())
	})

	It("provisions 3 control-plane and 2 worker hosts, and the global Site shows the summary", func(ctx context.Context) {
		s := &fleetv1.Site{}
		Eventually(func(g Gomega) {
			g.Expect(fleet.Global.Client.Get(ctx, client.ObjectKey{Namespace: "provisioning", Name: site}, s)).To(Succeed())
			g.Expect(s.Status.Cluster).NotTo(BeNil())
			g.Expect(s.Status.Cluster.Phase).To(Equal(sitev1.ClusterProvisioned), "site says: %s %s", s.Status.Cluster.Message, s.Status.Cluster.LastError)
			g.Expect(s.Status.Cluster.ControlPlane).To(Equal(sitev1.NodeCounts{Ready: 3, Total: 3}))
			g.Expect(s.Status.Cluster.Workers).To(Equal(sitev1.NodeCounts{Ready: 2, Total: 2}))
			g.Expect(s.Status.Cluster.KubernetesVersion).To(Equal("v1.36.3"))
		}).WithContext(ctx).WithTimeout(5 * time.Minute).WithPolling(time.Second).Should(Succeed())

		// Nothing duplicated by the crash: one Machine and one claim per host.
		machines := &clusterv1.MachineList{}
		Expect(siteC.List(ctx, machines, client.InNamespace(sitev1.InfoNamespace))).To(Succeed())
		Expect(machines.Items).To(HaveLen(5))
		bmhs := &metal3api.BareMetalHostList{}
		Expect(siteC.List(ctx, bmhs, client.InNamespace(sitev1.HostsNamespace))).To(Succeed())
		Expect(bmhs.Items).To(HaveLen(5))
		consumers := map[string]string{}
		for _, b := range bmhs.Items {
			Expect(b.Status.Provisioning.State).To(Equal(metal3api.StateProvisioned), b.Name)
			Expect(b.Spec.ConsumerRef).NotTo(BeNil(), b.Name)
			Expect(consumers).NotTo(HaveKey(b.Spec.ConsumerRef.Name), "two hosts claimed by one machine")
			consumers[b.Spec.ConsumerRef.Name] = b.Name
		}
		nodes := &corev1.NodeList{}
		Expect(fleet.Applications[site].Client.List(ctx, nodes)).To(Succeed())
		Expect(nodes.Items).To(HaveLen(5))

		// Each global Host shows its state at the site.
		hosts := &fleetv1.HostList{}
		Expect(fleet.Global.Client.List(ctx, hosts, client.InNamespace("provisioning"))).To(Succeed())
		Expect(hosts.Items).To(HaveLen(5))
		for _, h := range hosts.Items {
			Expect(h.Status.Cluster).NotTo(BeNil(), h.Name)
			Expect(h.Status.Cluster.ProvisioningState).To(Equal("provisioned"), h.Name)
			Expect(h.Status.Cluster.Ready).To(BeTrue(), h.Name)
		}
	})

	It("reaches the site with the kubeconfig kept in Vault, and carries Vault-held BMC credentials and their rotation to Metal3", func(ctx context.Context) {
		const where = "secret/edgefleet/global/provisioning"
		s := &fleetv1.Site{}
		Expect(fleet.Global.Client.Get(ctx, client.ObjectKey{Namespace: "provisioning", Name: site}, s)).To(Succeed())
		valid := meta.FindStatusCondition(s.Status.Conditions, fleetv1.SiteKubeconfigValidCondition)
		Expect(valid).NotTo(BeNil())
		Expect(valid.Status).To(Equal(metav1.ConditionTrue))
		Expect(valid.Message).To(Equal(`kubeconfig from Vault entry ` + where + `/sites/site-c key "kubeconfig" loaded`))

		// Only Vault holds cp-1's credentials on the global side; the site's copy is Metal3's.
		const host = "site-c-cp-1"
		Expect(apierrors.IsNotFound(fleet.Global.Client.Get(ctx, client.ObjectKey{Namespace: "provisioning", Name: host + "-bmc"}, &corev1.Secret{}))).To(BeTrue())
		entries, err := fleet.VaultEntries()
		Expect(err).NotTo(HaveOccurred())
		entry, err := entries.Read(ctx, "provisioning", "bmc/"+host)
		Expect(err).NotTo(HaveOccurred())
		copyOnSite := &corev1.Secret{}
		Expect(siteC.Get(ctx, client.ObjectKey{Namespace: sitev1.HostsNamespace, Name: host + sitev1.BMCSecretSuffix}, copyOnSite)).To(Succeed())
		Expect(copyOnSite.Annotations).To(HaveKeyWithValue(sitev1.SourceAnnotation, "Vault "+where+"/bmc/"+host))
		Expect(string(copyOnSite.Data["password"])).To(Equal(entry.Data["password"]))
		bmh := &metal3api.BareMetalHost{}
		Expect(siteC.Get(ctx, client.ObjectKey{Namespace: sitev1.HostsNamespace, Name: host}, bmh)).To(Succeed())
		Expect(bmh.Spec.BMC.CredentialsName).To(Equal(copyOnSite.Name))

		// The password rotated in Vault reaches the site within a heartbeat, with no event.
		rotated, err := fleet.NewBMCPassword(host)
		Expect(err).NotTo(HaveOccurred())
		_, err = entries.Write(ctx, "provisioning", "bmc/"+host, map[string]string{"username": "admin", "password": rotated})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func(g Gomega) {
			g.Expect(siteC.Get(ctx, client.ObjectKeyFromObject(copyOnSite), copyOnSite)).To(Succeed())
			g.Expect(string(copyOnSite.Data["password"])).To(Equal(rotated))
		}).WithContext(ctx).WithTimeout(30 * time.Second).WithPolling(250 * time.Millisecond).Should(Succeed())
		// Metal3 keeps the host provisioned with the new credentials.
		Consistently(func(g Gomega) {
			g.Expect(siteC.Get(ctx, client.ObjectKeyFromObject(bmh), bmh)).To(Succeed())
			g.Expect(bmh.Status.Provisioning.State).To(Equal(metal3api.StateProvisioned))
			g.Expect(bmh.Status.ErrorMessage).To(BeEmpty())
		}).WithContext(ctx).WithTimeout(5 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
	})

	// siteSummary waits until the global Site's status.cluster says Provisioned with these ready
	// nodes, all of version, and returns the Site.
	siteSummary := func(ctx context.Context, cp, workers int32, version string, timeout time.Duration) *fleetv1.Site {
		GinkgoHelper()
		s := &fleetv1.Site{}
		Eventually(func(g Gomega) {
			g.Expect(fleet.Global.Client.Get(ctx, client.ObjectKey{Namespace: "provisioning", Name: site}, s)).To(Succeed())
			g.Expect(s.Status.Cluster).NotTo(BeNil())
			g.Expect(s.Status.Cluster.Phase).To(Equal(sitev1.ClusterProvisioned), "site says: %s %s", s.Status.Cluster.Message, s.Status.Cluster.LastError)
			g.Expect(s.Status.Cluster.ControlPlane).To(Equal(sitev1.NodeCounts{Ready: cp, Total: cp}))
			g.Expect(s.Status.Cluster.Workers).To(Equal(sitev1.NodeCounts{Ready: workers, Total: workers}))
			g.Expect(s.Status.Cluster.KubernetesVersion).To(Equal(version))
		}).WithContext(ctx).WithTimeout(timeout).WithPolling(time.Second).Should(Succeed())
		return s
	}
	// globalHosts checks that the global Hosts are exactly these, each a ready, provisioned node
	// of version at the site (their status.cluster).
	globalHosts := func(ctx context.Context, version string, names ...string) {
		GinkgoHelper()
		Eventually(func(g Gomega) {
			hosts := &fleetv1.HostList{}
			g.Expect(fleet.Global.Client.List(ctx, hosts, client.InNamespace("provisioning"))).To(Succeed())
			var got []string
			for _, h := range hosts.Items {
				got = append(got, h.Name)
				g.Expect(h.Status.Cluster).NotTo(BeNil(), h.Name)
				g.Expect(*h.Status.Cluster).To(Equal(fleetv1.HostClusterStatus{ProvisioningState: "provisioned", Ready: true, Version: version}), h.Name)
			}
			g.Expect(got).To(ConsistOf(names))
		}).WithContext(ctx).WithTimeout(30 * time.Second).WithPolling(time.Second).Should(Succeed())
	}

	It("scales out when a worker Host is added on the global cluster", func(ctx context.Context) {
		start := time.Now()
		Expect(fleet.Apply(ctx, "e2e/testdata/site-c-worker-2.yaml")).To(Succeed())
		siteSummary(ctx, 3, 3, "v1.36.3", 3*time.Minute)
		globalHosts(ctx, "v1.36.3", "site-c-cp-0", "site-c-cp-1", "site-c-cp-2", "site-c-worker-0", "site-c-worker-1", "site-c-worker-2")
		nodes := &corev1.NodeList{}
		Expect(fleet.Applications[site].Client.List(ctx, nodes)).To(Succeed())
		Expect(nodes.Items).To(HaveLen(6))
		GinkgoWriter.Printf("scale out took %s\n", time.Since(start).Round(time.Second))
	})

	It("scales in when a worker Host is deleted on the global cluster, and powers the wiped host off", func(ctx context.Context) {
		start := time.Now()
		const removed = "site-c-worker-0"
		history := watchSite(ctx, site, &metal3api.BareMetalHostList{}, client.MatchingFields{"metadata.name": removed})
		_, err := fleet.Kubectl(ctx, "delete", "host", removed, "-n", "provisioning")
		Expect(err).NotTo(HaveOccurred())
		siteSummary(ctx, 3, 2, "v1.36.3", 3*time.Minute)
		globalHosts(ctx, "v1.36.3", "site-c-cp-0", "site-c-cp-1", "site-c-cp-2", "site-c-worker-1", "site-c-worker-2")

		// Deprovision (the default): Metal3 wiped the host, the provider released it powered
		// off, and the site deleted its BareMetalHost.
		Eventually(func(g Gomega) {
			err := siteC.Get(ctx, client.ObjectKey{Namespace: sitev1.HostsNamespace, Name: removed}, &metal3api.BareMetalHost{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "BareMetalHost %s: %v", removed, err)
		}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())
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
		Expect(versions).NotTo(BeEmpty())
		Expect(versions[0].Spec.ConsumerRef).NotTo(BeNil(), "the host was in use before")
		released := slices.IndexFunc(versions, func(b metal3api.BareMetalHost) bool { return b.Spec.ConsumerRef == nil })
		Expect(released).To(BeNumerically(">", 0), "BareMetalHost %s deleted without being released", removed)
		for _, b := range versions[released:] {
			Expect(b.Spec.Online).To(BeFalse(), "BareMetalHost %s released online (resourceVersion %s)", removed, b.ResourceVersion)
			Expect(b.Spec.Image).To(BeNil(), "BareMetalHost %s released with an image", removed)
		}
		Expect(versions[len(versions)-1].Status.PoweredOn).To(BeFalse(), "BareMetalHost %s deleted powered on", removed)
		GinkgoWriter.Printf("scale in took %s\n", time.Since(start).Round(time.Second))
	})

	It("rolls a new Kubernetes version set on the global Site, control plane before workers", func(ctx context.Context) {
		start := time.Now()
		events := watchSite(ctx, site, &clusterv1.MachineList{}, client.InNamespace(sitev1.InfoNamespace))
		_, err := fleet.Kubectl(ctx, "patch", "site", site, "-n", "provisioning", "--type", "merge",
			"-p", `{"spec":{"cluster":{"kubernetesVersion":"v1.36.4"}}}`)
		Expect(err).NotTo(HaveOccurred())
		siteSummary(ctx, 3, 2, "v1.36.4", 8*time.Minute)
		globalHosts(ctx, "v1.36.4", "site-c-cp-0", "site-c-cp-1", "site-c-cp-2", "site-c-worker-1", "site-c-worker-2")
		Eventually(func(g Gomega) {
			nodes := &corev1.NodeList{}
			g.Expect(fleet.Applications[site].Client.List(ctx, nodes)).To(Succeed())
			g.Expect(nodes.Items).To(HaveLen(5))
			for _, n := range nodes.Items {
				g.Expect(n.Status.NodeInfo.KubeletVersion).To(Equal("v1.36.4"), n.Name)
				g.Expect(n.Status.Conditions).To(ContainElement(And(
					HaveField("Type", corev1.NodeReady), HaveField("Status", corev1.ConditionTrue))), n.Name)
			}
		}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())

		// Replayed in the order the site's API server wrote them: when the first worker Machine of
		// the new version appeared, all three control-plane Machines ran it and were ready.
		newWorker := func(ev watch.Event) bool {
			m, ok := ev.Object.(*clusterv1.Machine)
			if !ok || ev.Type != watch.Added {
				return false
			}
			_, isCP := m.Labels[clusterv1.MachineControlPlaneLabel]
			return !isCP && m.Spec.Version == "v1.36.4"
		}
		var evs []watch.Event
		Eventually(func(g Gomega) {
			evs = events(g)
			g.Expect(slices.ContainsFunc(evs, newWorker)).To(BeTrue(), "the watch has not seen a worker Machine of v1.36.4 yet")
		}).WithContext(ctx).WithTimeout(30 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
		latest := map[string]*clusterv1.Machine{}
		firstWorker := ""
		for _, ev := range evs {
			m := ev.Object.(*clusterv1.Machine)
			if ev.Type == watch.Deleted {
				delete(latest, m.Name)
				continue
			}
			if newWorker(ev) && firstWorker == "" {
				firstWorker = m.Name
				var cps []string
				for _, o := range latest {
					if _, cp := o.Labels[clusterv1.MachineControlPlaneLabel]; cp {
						Expect(o.Spec.Version).To(Equal("v1.36.4"), "control-plane Machine %s when worker %s came", o.Name, m.Name)
						// Ready as the site's controller counts it: a node, and NodeReady.
						Expect(o.Status.NodeRef.IsDefined() && capiconditions.IsTrue(o, clusterv1.MachineNodeReadyCondition)).To(BeTrue(),
							"control-plane Machine %s not ready when worker %s came", o.Name, m.Name)
						cps = append(cps, o.Name)
					}
				}
				Expect(cps).To(HaveLen(3), "control-plane Machines when worker %s came", m.Name)
			}
			latest[m.Name] = m
		}
		Expect(firstWorker).NotTo(BeEmpty(), "no worker Machine of v1.36.4 seen")
		GinkgoWriter.Printf("version roll took %s\n", time.Since(start).Round(time.Second))
	})
})

// watchSite watches objects of list's kind on the site from now on, until the spec ends. The
// returned function gives the events seen so far, failing on a watch error.
func watchSite(ctx context.Context, site string, list client.ObjectList, opts ...client.ListOption) func(Gomega) []watch.Event {
	GinkgoHelper()
	scheme, err := setup.Scheme()
	Expect(err).NotTo(HaveOccurred())
	wc, err := client.NewWithWatch(fleet.Sites[site].Config, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	w, err := wc.Watch(ctx, list, opts...)
	Expect(err).NotTo(HaveOccurred())
	var (
		mu     sync.Mutex
		events []watch.Event
		done   = make(chan struct{})
	)
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			mu.Lock()
			events = append(events, ev)
			mu.Unlock()
		}
	}()
	DeferCleanup(func() {
		w.Stop()
		<-done
	})
	return func(g Gomega) []watch.Event {
		mu.Lock()
		defer mu.Unlock()
		for _, ev := range events {
			g.Expect(ev.Type).NotTo(Equal(watch.Error), "watch error: %v", ev.Object)
		}
		return slices.Clone(events)
	}
}
