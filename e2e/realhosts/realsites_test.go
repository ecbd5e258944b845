package realhosts_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	metal3api "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
	"github.com/edgefleet/edgefleet/local-controller/setup"
	"github.com/edgefleet/edgefleet/pkg/siteimage/siteimagetest"
	"github.com/edgefleet/edgefleet/test/builders"
	"github.com/edgefleet/edgefleet/test/testfleet"
	"github.com/edgefleet/edgefleet/test/testhosts"
	"github.com/edgefleet/edgefleet/test/testutil"
	"github.com/edgefleet/edgefleet/test/testvault"
)

// Helpers of the specs that run sites on real hosts (needs root): the global controller pushes
// each site's cluster, Metal3 (fixture provisioner) provisions the hosts, the harness boots
// each real host with its first-boot data as Ironic would, and the site's BPA builds the
// application cluster over SSH from the packages the site cached.

// upload puts a file into the artifact store with the CLI and returns its sha256; the artifact
// is deleted when the container's specs are done.
func upload(ctx context.Context, file, kind, name, version string) string {
	GinkgoHelper()
	a, err := fleet.Upload(ctx, file, kind, name, version)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func(ctx context.Context) error {
		_, err := fleet.Edgefleet(ctx, "artifact", "delete", a.ID)
		return err
	})
	return a.SHA256
}

// uploadPackage uploads a built package.
func uploadPackage(ctx context.Context, b builders.BuiltPackage) string {
	GinkgoHelper()
	return upload(ctx, b.Path, "binary-package", b.Manifest.Name, b.Manifest.Version)
}

// stackWith is the names (digest keys) of the real node stack's packages with others: one
// "NAME …" key replaces the stack's package NAME ("kubelet 1.36.3-2"), any other is added.
func stackWith(others ...string) []string {
	var names []string
	for _, p := range builders.StackPackages(builders.KubernetesVersion) { // their names
		names = append(names, p.Name)
	}
	for _, o := range others {
		if i := slices.IndexFunc(names, func(n string) bool { return strings.Fields(n)[0] == strings.Fields(o)[0] }); i >= 0 {
			names[i] = o
			continue
		}
		names = append(names, o)
	}
	return names
}

// uploadBase uploads what every real site's cluster at Kubernetes version kube needs, built
// into dir, and records the digests by name: "os", the stack's packages by name, its images as
// "image NAME" and its charts as "chart NAME" (builders.BuildStack).
func uploadBase(ctx context.Context, dir, kube string, digest map[string]string) {
	GinkgoHelper()
	osImage, osDigest := testutil.RandomContent(1<<20, 11)
	Expect(os.WriteFile(filepath.Join(dir, "edge-os.img"), osImage, 0o600)).To(Succeed())
	Expect(upload(ctx, filepath.Join(dir, "edge-os.img"), "os-image", "edge-os", "1.0.0")).To(Equal(osDigest))
	digest["os"] = osDigest
	built, err := builders.BuildStack(ctx, dir, kube)
	Expect(err).NotTo(HaveOccurred())
	for _, a := range built {
		key := a.Name
		switch a.Kind {
		case "container-image-archive":
			key = "image " + a.Name
		case "helm-chart":
			key = "chart " + a.Name
		}
		digest[key] = upload(ctx, a.Path, a.Kind, a.Name, a.Version)
	}
}

// uploadKubernetes uploads the stack's Kubernetes packages (builders.KubernetesPackages) at
// version kube and records their digests as "NAME kube"; kubernetesAt lists those keys, for
// stackWith.
func uploadKubernetes(ctx context.Context, kube string, digest map[string]string) {
	GinkgoHelper()
	for _, name := range builders.KubernetesPackages() {
		digest[name+" "+kube] = uploadPackage(ctx, builders.BuildPackage(GinkgoTB(), name, kube, nil))
	}
}

func kubernetesAt(kube string, others ...string) []string {
	var keys []string
	for _, name := range builders.KubernetesPackages() {
		keys = append(keys, name+" "+kube)
	}
	return append(keys, others...)
}

// createRelease creates a Release of Kubernetes version kube (1.36.3) of the OS image, the named
// packages (keys of digest; see stackWith), and every image and chart of digest; it is deleted
// when the container's specs are done, before the artifacts it references (cleanups run last
// in, first out).
func createRelease(ctx context.Context, ns, name, kube string, digest map[string]string, pkgs ...string) {
	GinkgoHelper()
	r := &fleetv1.Release{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: fleetv1.ReleaseSpec{
		KubernetesVersion: "v" + kube,
		OSImage:           sitev1.OSImage{SHA256: digest["os"]},
	}}
	for _, key := range slices.Sorted(maps.Keys(digest)) {
		if n, ok := strings.CutPrefix(key, "image "); ok {
			r.Spec.Images = append(r.Spec.Images, sitev1.ArtifactRef{SHA256: digest[key], Name: "container-image-archive " + n})
		}
		if n, ok := strings.CutPrefix(key, "chart "); ok {
			r.Spec.Charts = append(r.Spec.Charts, sitev1.ArtifactRef{SHA256: digest[key], Name: "helm-chart " + n})
		}
	}
	for _, p := range pkgs {
		Expect(digest).To(HaveKey(p))
		r.Spec.Packages = append(r.Spec.Packages, sitev1.ArtifactRef{SHA256: digest[p], Name: "binary-package " + p})
	}
	Expect(fleet.Global.Client.Create(ctx, r)).To(Succeed())
	DeferCleanup(func(ctx context.Context) error { return client.IgnoreNotFound(fleet.Global.Client.Delete(ctx, r)) })
}

// realSite is a site of the fleet whose hosts are real.
type realSite struct {
	name, ns string
	hosts    *testhosts.HostNet
	vault    *testvault.Vault
	// client of the site's cluster, with the site kinds.
	client client.Client
	// opts it was started with.
	opts testfleet.RealSiteOptions
}

// startRealSite starts a real site (testfleet.Fleet.StartRealSite: Metal3, the local controller with
// the BPA as bootstrap provider, the BPA with its secrets in vault under edgefleet/<site>, the
// harness's Ironic for hn's hosts) and registers the Site and the Hosts of the first registered
// of hn's hosts (0: all; realSite.register registers another one later): the first
// controlPlanes hosts are control plane, the rest workers; the Site has a cluster network but no
// release (a campaign or the spec sets it); with, when given, changes its options
// (testfleet.RealSiteOptions.FleetVault). Everything stops when the container's specs are
// done.
func startRealSite(ctx context.Context, name, ns string, hn *testhosts.HostNet, controlPlanes, registered int, vault *testvault.Vault, labels map[string]string,
	with ...func(*testfleet.RealSiteOptions)) *realSite {
	GinkgoHelper()
	scheme, err := setup.Scheme()
	Expect(err).NotTo(HaveOccurred())
	s := &realSite{name: name, ns: ns, hosts: hn, vault: vault}
	s.client, err = client.New(fleet.Sites[name].Config, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	s.opts = testfleet.RealSiteOptions{
		Name: name, Namespace: ns, Labels: labels, Hosts: hn, ControlPlanes: controlPlanes, Registered: registered, Vault: vault, Network: true,
		Report: func(err error) { GinkgoWriter.Println(name, "ironic:", err) },
	}
	for _, w := range with {
		w(&s.opts)
	}
	stop, err := fleet.StartRealSite(ctx, s.opts)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(stop)
	return s
}

// register registers the Host of the site's i-th host with role (a host it was started
// without, or one taken off the site since).
func (s *realSite) register(ctx context.Context, i int, role fleetv1.HostRole) {
	GinkgoHelper()
	Expect(fleet.RegisterRealHost(ctx, s.opts, i, role)).To(Succeed())
}

// startBPA (re)starts the site's BPA, with args added to its command line.
func (s *realSite) startBPA(ctx context.Context, args ...string) error {
	_, err := fleet.StartRealSiteBPA(ctx, s.name, s.vault, args...)
	return err
}

// startBPAPassed (re)starts the site's BPA like startBPA and waits until its first pass over the
// cluster has ended: a change of the cluster made after it starts a pass at once, not once
// that first pass is over (minutes under load).
func (s *realSite) startBPAPassed(ctx context.Context, args ...string) {
	GinkgoHelper()
	b, err := fleet.StartRealSiteBPA(ctx, s.name, s.vault, args...)
	Expect(err).NotTo(HaveOccurred())
	Eventually(func(g Gomega) {
		n, err := b.Reconciles(ctx, "bpa-applicationcluster")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(n).To(BeNumerically(">=", 1), "passes of the restarted BPA over the cluster")
	}).WithContext(ctx).WithTimeout(10 * time.Minute).WithPolling(time.Second).Should(Succeed())
}

// watch watches objects of list's kind on the site from now on, until the spec ends: the first
// events are the objects there now (Added). The returned function gives the events seen so far,
// failing on a watch error.
func (s *realSite) watch(ctx context.Context, list client.ObjectList, opts ...client.ListOption) func(Gomega) []watch.Event {
	GinkgoHelper()
	wc, err := client.NewWithWatch(fleet.Sites[s.name].Config, client.Options{Scheme: s.client.Scheme()})
	Expect(err).NotTo(HaveOccurred())
	w, err := wc.Watch(ctx, list, opts...)
	Expect(err).NotTo(HaveOccurred())
	seen := testutil.RecordWatch(w)
	DeferCleanup(seen.Stop)
	return func(g Gomega) []watch.Event {
		events, err := seen.Events()
		g.Expect(err).NotTo(HaveOccurred())
		return events
	}
}

// hostsAre checks that the site's global Hosts are exactly names, each a ready, provisioned
// node of version ("v1.36.3") at the site, with the hardware its BareMetalHost's inspection
// found there (their status.cluster).
func (s *realSite) hostsAre(g Gomega, ctx context.Context, version string, names ...string) {
	hosts := &fleetv1.HostList{}
	g.Expect(fleet.Global.Client.List(ctx, hosts, client.InNamespace(s.ns))).To(Succeed())
	var got []string
	for _, h := range hosts.Items {
		got = append(got, h.Name)
		g.Expect(h.Status.Cluster).NotTo(BeNil(), h.Name)
		c := *h.Status.Cluster
		bmh := &metal3api.BareMetalHost{}
		g.Expect(s.client.Get(ctx, client.ObjectKey{Namespace: sitev1.HostsNamespace, Name: h.Name}, bmh)).To(Succeed())
		g.Expect(bmh.Status.HardwareDetails).NotTo(BeNil(), h.Name)
		g.Expect(c.Hardware).NotTo(BeNil(), h.Name)
		g.Expect([]any{c.Hardware.CPUs, c.Hardware.CPUModel, c.Hardware.MemoryMiB, len(c.Hardware.Disks)}).To(Equal([]any{int32(bmh.Status.HardwareDetails.CPU.Count),
			bmh.Status.HardwareDetails.CPU.Model, int64(bmh.Status.HardwareDetails.RAMMebibytes), len(bmh.Status.HardwareDetails.Storage)}), h.Name)
		c.Hardware = nil
		g.Expect(c).To(Equal(fleetv1.HostClusterStatus{ProvisioningState: "provisioned", Ready: true, Version: version}), h.Name)
	}
	g.Expect(got).To(ConsistOf(names))
}

// bootstrap is the BPA's report on the site's cluster (nil until there is one).
func (s *realSite) bootstrap(g Gomega, ctx context.Context) *sitev1.BootstrapStatus {
	ac := &sitev1.ApplicationCluster{}
	g.Expect(s.client.Get(ctx, client.ObjectKey{Namespace: sitev1.InfoNamespace, Name: s.name}, ac)).To(Succeed())
	return ac.Status.Bootstrap
}

// bedLabel marks a spec that builds what the later specs of its ordered container use (the
// cluster, the installed sites).
const bedLabel = "bed"

// skipAfterFailedBed registers, in an Ordered, ContinueOnFailure container, that a failed spec
// does not hide the independent checks after it, while those that need what a failed bed spec
// (bedLabel) builds are skipped, the skip naming that spec.
func skipAfterFailedBed() {
	var failed string
	ReportAfterEach(func(r SpecReport) {
		if failed == "" && r.Failed() && slices.Contains(r.Labels(), bedLabel) {
			failed = r.LeafNodeText
		}
	})
	BeforeEach(func() {
		if failed != "" && !slices.Contains(CurrentSpecReport().Labels(), bedLabel) {
			Skip(fmt.Sprintf("it needs what the failed spec %q builds", failed))
		}
	})
}

// installed is a package's installed state on a host: "<current> <active>".
func installed(ctx context.Context, h *testhosts.Host, pkg string) string {
	GinkgoHelper()
	out, _ := h.Exec(ctx, "sh", "-c", fmt.Sprintf("basename \"$(readlink /opt/edgefleet/packages/%[1]s/current)\"; cat /opt/edgefleet/packages/%[1]s/.active 2>/dev/null", pkg))
	return strings.Join(strings.Fields(string(out)), " ")
}

// runCampaign creates a campaign in namespace ns with the CLI and watches it to its end with the
// CLI (each site given 15 minutes); watch exits non-zero unless the campaign succeeded.
func runCampaign(ctx context.Context, ns, name string, args ...string) string {
	GinkgoHelper()
	_, err := fleet.Edgefleet(ctx, append([]string{"campaign", "create", name, "-n", ns, "--site-timeout", "15m"}, args...)...)
	Expect(err).NotTo(HaveOccurred())
	watchCtx, cancel := context.WithTimeout(ctx, 15*time.Minute)
	defer cancel()
	out, err := fleet.Edgefleet(watchCtx, "campaign", "watch", name, "-n", ns)
	Expect(err).NotTo(HaveOccurred(), "campaign %s: %s", name, out)
	return string(out)
}

// crash is a crash of a site's BPA or local controller at a step of an operation, and the
// restart after it: SIGKILL when at(status) first holds, then a start again.
type crash struct {
	what string // "BPA" or "local controller"
	at   func(b *sitev1.BootstrapStatus) bool
	// step names what at waits for, for the record; the status's step or message when empty.
	step string
	// before runs just before the kill, with the status that matched (to note what must not
	// be done again).
	before func(b *sitev1.BootstrapStatus)
}

// crashes kills and restarts per each of cs, in order, while an operation runs on the site:
// polled every 200 ms until every crash happened or ctx ends. wait returns what happened, each
// crash as "<what> at <step>", and the first error.
func (s *realSite) crashes(ctx context.Context, cs ...crash) (wait func() ([]string, error)) {
	ctx, cancel := context.WithCancel(ctx)
	type result struct {
		done []string
		err  error
	}
	out := make(chan result, 1)
	go func() {
		var r result
		defer func() { out <- r }()
		for len(cs) > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(200 * time.Millisecond):
			}
			ac := &sitev1.ApplicationCluster{}
			if err := s.client.Get(ctx, client.ObjectKey{Namespace: sitev1.InfoNamespace, Name: s.name}, ac); err != nil || ac.Status.Bootstrap == nil || !cs[0].at(ac.Status.Bootstrap) {
				continue
			}
			c, b := cs[0], ac.Status.Bootstrap
			cs = cs[1:]
			if c.before != nil {
				c.before(b)
			}
			step := c.step
			switch {
			case step != "":
			case b.Step == nil:
				step = b.Message
			default:
				step = fmt.Sprintf("%s %s on %s (%d of %d): %s", b.Step.Package, b.Step.Version, b.Step.Node, b.Step.Index, b.Step.Of, b.Step.Step)
			}
			r.done = append(r.done, c.what+" at "+step)
			switch c.what {
			case "BPA":
				r.err = errors.Join(fleet.KillBPA(s.name), s.startBPA(ctx))
			default:
				r.err = fleet.KillLocalController(s.name)
				if r.err == nil {
					_, r.err = fleet.StartLocalController(ctx, s.name)
				}
			}
			if r.err != nil {
				return
			}
		}
	}()
	return func() ([]string, error) {
		cancel()
		r := <-out
		return r.done, r.err
	}
}

// airGap is a site cut off from the global artifact API: its Site's spec.artifactAPIURL names a
// loopback port where every connection is closed at once (as a firewall's reject would), and
// the connections tried are counted.
type airGap struct {
	url   string
	tries atomic.Int32
}

// cutOff points the site's artifact API URL at a closing port, waits until the site's access
// Secret holds it, and fills the site's cache from a site pack of release: the image
// `edgefleet site image --with-release` writes, imported by `local-controller pack-import` as
// the bootstrap machine's boot does. uplink gives the site its artifact API back.
func (s *realSite) cutOff(ctx context.Context, release, dir string) *airGap {
	GinkgoHelper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	Expect(err).NotTo(HaveOccurred())
	gap := &airGap{url: "http://" + l.Addr().String()}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			gap.tries.Add(1)
			_ = c.Close()
		}
	}()
	DeferCleanup(l.Close)

	Eventually(func(g Gomega) {
		r := &fleetv1.Release{}
		g.Expect(fleet.Global.Client.Get(ctx, client.ObjectKey{Namespace: s.ns, Name: release}, r)).To(Succeed())
		g.Expect(meta.IsStatusConditionTrue(r.Status.Conditions, fleetv1.ReleaseReadyCondition)).To(BeTrue(), "release %s: %+v", release, r.Status.Conditions)
	}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(250 * time.Millisecond).Should(Succeed())
	// The identity (URL, CA, token) is never used here: the pack is the point.
	ca := filepath.Join(dir, "unused-ca.crt")
	Expect(os.WriteFile(ca, siteimagetest.CA(GinkgoTB()), 0o600)).To(Succeed())
	image := filepath.Join(dir, s.name+".iso")
	out, err := fleet.Edgefleet(ctx, "site", "image", s.name, "-n", s.ns, "-o", image, "--base", siteimagetest.Base(GinkgoTB()),
		"--url", "https://global.invalid:8443", "--ca-file", ca, "--with-release", release)
	Expect(err).NotTo(HaveOccurred(), "site image --with-release: %s", out)
	root, err := testutil.RepoRoot()
	Expect(err).NotTo(HaveOccurred())
	start := time.Now()
	out, err = exec.CommandContext(ctx, filepath.Join(root, "bin", "local-controller"), "pack-import",
		"--from", image, "--cache-dir", fleet.LocalController(s.name).CacheDir).Output()
	Expect(err).NotTo(HaveOccurred(), "pack-import: %s", out)
	GinkgoWriter.Printf("site pack of %s imported into %s's cache in %s: %s", release, s.name, time.Since(start).Round(time.Millisecond), out)
	Expect(string(out)).To(MatchRegexp(`^EDGEFLEET-PACK release=%s/%s artifacts=(\d+) imported=\d+ `, s.ns, release))
	Expect(os.Remove(image)).To(Succeed())

	s.setArtifactAPI(ctx, gap.url)
	return gap
}

// uplink gives the site the fleet's artifact API back (its URL in the Site, as registered).
func (s *realSite) uplink(ctx context.Context) {
	GinkgoHelper()
	s.setArtifactAPI(ctx, fleet.APIURL)
}

// setArtifactAPI sets the Site's spec.artifactAPIURL and waits until the global controller has
// pushed it to the site.
func (s *realSite) setArtifactAPI(ctx context.Context, url string) {
	GinkgoHelper()
	_, err := fleet.Kubectl(ctx, "patch", "site", s.name, "-n", s.ns, "--type", "merge", "-p", fmt.Sprintf(`{"spec":{"artifactAPIURL":%q}}`, url))
	Expect(err).NotTo(HaveOccurred())
	Eventually(func(g Gomega) {
		secret := &corev1.Secret{}
		g.Expect(s.client.Get(ctx, client.ObjectKey{Namespace: sitev1.HostsNamespace, Name: sitev1.GlobalAPISecretName}, secret)).To(Succeed())
		g.Expect(string(secret.Data[sitev1.GlobalAPIURLKey])).To(Equal(url), "the artifact API URL pushed to the site")
	}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(250 * time.Millisecond).Should(Succeed())
}
