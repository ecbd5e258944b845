package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
	restv1 "github.com/edgefleet/edgefleet/api/rest/v1"
	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
	"github.com/edgefleet/edgefleet/local-controller/setup"
	"github.com/edgefleet/edgefleet/pkg/testenv"
)

// Helpers of the specs that run sites on real hosts (needs root): the global controller pushes
// each site's cluster, Metal3 (fixture provisioner) provisions the hosts, the harness boots
// each real host with its first-boot data as Ironic would, and the site's BPA builds the
// application cluster over SSH from the packages the site cached.

// upload puts a file into the artifact store with the CLI and returns its sha256; the artifact
// is deleted when the container's specs are done.
func upload(ctx context.Context, file, kind, name, version string) string {
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

// uploadPackage uploads a built package.
func uploadPackage(ctx context.Context, b testenv.BuiltPackage) string {
	GinkgoHelper()
	return upload(ctx, b.Path, "binary-package", b.Manifest.Name, b.Manifest.Version)
}

// stackWith is the names (digest keys) of the real node stack's packages with others: one
// "NAME …" key replaces the stack's package NAME ("kubelet 1.36.3-2"), any other is added.
func stackWith(others ...string) []string {
	var names []string
	for _, p := range testenv.StackPackages() {
		names = append(names, p.Name)
	}
	for _, o := range others {
		if i := slices.Index(names, strings.Fields(o)[0]); i >= 0 {
			names[i] = o
			continue
		}
		names = append(names, o)
	}
	return names
}

// uploadBase uploads what every real site's cluster needs, built into dir, and records the
// digests by name: "os", the stack's packages by name, its images as "image NAME" and its
// charts as "chart NAME" (testenv.BuildStack).
func uploadBase(ctx context.Context, dir string, digest map[string]string) {
	GinkgoHelper()
	osImage, osDigest := testenv.RandomContent(1<<20, 11)
	Expect(os.WriteFile(filepath.Join(dir, "edge-os.img"), osImage, 0o600)).To(Succeed())
	Expect(upload(ctx, filepath.Join(dir, "edge-os.img"), "os-image", "edge-os", "1.0.0")).To(Equal(osDigest))
	digest["os"] = osDigest
	built, err := testenv.BuildStack(ctx, dir)
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

// createRelease creates a Release of the OS image, the named packages (keys of digest; see
// stackWith), and every image and chart of digest; it is deleted when the container's specs
// are done, before the artifacts it references (cleanups run last in, first out).
func createRelease(ctx context.Context, ns, name string, digest map[string]string, pkgs ...string) {
	GinkgoHelper()
	r := &fleetv1.Release{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: fleetv1.ReleaseSpec{
		KubernetesVersion: "v1.36.3",
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
	hosts    *testenv.HostNet
	vault    *testenv.Vault
	// client of the site's cluster, with the site kinds.
	client client.Client
}

// startRealSite starts a site's Metal3, local controller (the BPA as bootstrap provider), BPA
// (its secrets in vault under edgefleet/<site>) and the harness's Ironic for hn's hosts, and
// applies the Site and its Hosts to the global cluster: the first controlPlanes hosts are
// control plane, the rest workers, the first host's address is the API endpoint, and the Site
// has a cluster network but no release (a campaign or the spec sets it). Everything stops when
// the container's specs are done.
func startRealSite(ctx context.Context, name, ns string, hn *testenv.HostNet, controlPlanes int, vault *testenv.Vault, labels map[string]string, dir string) *realSite {
	GinkgoHelper()
	scheme, err := setup.Scheme()
	Expect(err).NotTo(HaveOccurred())
	s := &realSite{name: name, ns: ns, hosts: hn, vault: vault}
	s.client, err = client.New(fleet.Sites[name].Config, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())

	Expect(fleet.StartSiteMetal3(ctx, name)).To(Succeed())
	_, err = fleet.StartLocalController(ctx, name, "--node-bootstrap=bpa")
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() error { return fleet.StopLocalController(name) })
	Expect(s.startBPA(ctx)).To(Succeed())
	DeferCleanup(func() error { return fleet.StopBPA(name) })
	stop := hn.PlayIronic(context.Background(), s.client, sitev1.InfoNamespace, func(err error) {
		GinkgoWriter.Println(name, "ironic:", err)
	})
	DeferCleanup(stop)

	labelsJSON, err := json.Marshal(labels)
	Expect(err).NotTo(HaveOccurred())
	manifest := fmt.Sprintf(`apiVersion: fleet.edgefleet.io/v1alpha1
kind: Site
metadata: {name: %s, namespace: %s, labels: %s}
spec:
  kubeconfigSecretRef: {name: %[1]s-kubeconfig}
  artifactAPIURL: %[4]s
  cluster:
    network:
      podCIDRs: ["10.244.0.0/16"]
      serviceCIDRs: ["10.96.0.0/12"]
      controlPlaneEndpoint: {host: "%s"}
`, name, ns, labelsJSON, fleet.APIURL, hn.Hosts[0].IP)
	for i, h := range hn.Hosts {
		role := "control-plane"
		if i >= controlPlanes {
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
`, h.Name, ns, name, role, h.MAC, h.IP, 60+i)
	}
	file := filepath.Join(dir, name+".yaml")
	Expect(os.WriteFile(file, []byte(manifest), 0o600)).To(Succeed())
	Expect(fleet.Apply(ctx, file)).To(Succeed())
	return s
}

// startBPA (re)starts the site's BPA, its secrets in Vault under edgefleet/<site>.
func (s *realSite) startBPA(ctx context.Context) error {
	_, err := fleet.StartBPA(ctx, s.name, s.vault, "--vault-prefix", "edgefleet/"+s.name)
	return err
}

// bootstrap is the BPA's report on the site's cluster (nil until there is one).
func (s *realSite) bootstrap(g Gomega, ctx context.Context) *sitev1.BootstrapStatus {
	ac := &sitev1.ApplicationCluster{}
	g.Expect(s.client.Get(ctx, client.ObjectKey{Namespace: sitev1.InfoNamespace, Name: s.name}, ac)).To(Succeed())
	return ac.Status.Bootstrap
}

// installed is a package's installed state on a host: "<current> <active>".
func installed(ctx context.Context, h *testenv.Host, pkg string) string {
	GinkgoHelper()
	out, _ := h.Exec(ctx, "sh", "-c", fmt.Sprintf("basename \"$(readlink /opt/edgefleet/packages/%[1]s/current)\"; cat /opt/edgefleet/packages/%[1]s/.active", pkg))
	return strings.Join(strings.Fields(string(out)), " ")
}
