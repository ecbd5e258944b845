// Command demo runs edgefleet on this machine: a global control plane and two site control
// planes (kube-apiserver + etcd from bin/), the global controller binary, each site's local
// controller, and the sites and hosts of deploy/samples/fleet.yaml, site-b through zero-touch
// enrollment (a one-time token and local-controller enroll). It uploads a sample package
// and caches it at both sites; then it builds site-a's application cluster for real: two real
// Debian hosts (test hosts: systemd and sshd in namespaces of their own; needs root) stand for
// site-a's bare metal, Metal3 (fixture provisioner) provisions them and the harness boots them
// with their first-boot data as Ironic would, and site-a's BPA installs the real node stack
// (etcd, kube-apiserver, the API server proxy, kube-controller-manager, kube-scheduler, containerd, the pod network,
// kubelet, kube-proxy) over SSH from a Release uploaded to the artifact store, imports the
// release's images into containerd and installs its chart. It ends with kubectl get nodes and
// get pods on that cluster, keeps everything running until Ctrl-C and stops all it started. The
// global controller serves the admission webhooks, registered on the global cluster: a Release
// with a mistyped digest is refused. Run it with `make demo`.
package main

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap/zapcore"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
	"github.com/edgefleet/edgefleet/local-controller/sitecache"
	"github.com/edgefleet/edgefleet/test/builders"
	"github.com/edgefleet/edgefleet/test/metal3"
	"github.com/edgefleet/edgefleet/test/testfleet"
	"github.com/edgefleet/edgefleet/test/testhosts"
	"github.com/edgefleet/edgefleet/test/testutil"
	"github.com/edgefleet/edgefleet/test/testvault"
)

const manifest = "deploy/samples/fleet.yaml"

func main() {
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.ErrorLevel)))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) (err error) {
	root, err := testutil.RepoRoot()
	if err != nil {
		return err
	}
	dir := filepath.Join(root, "bin", "demo")
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	step("Starting a global control plane and two site control planes (site-a, site-b), then the global controller")
	fleet, err := testfleet.StartFleet(ctx, testfleet.FleetOptions{
		Sites:          []string{"site-a", "site-b"},
		Dir:            dir,
		ControllerArgs: []string{"--site-heartbeat-interval=10s"},
		SiteTokens:     true,
		TLS:            true, // enrollment pins the API's CA
	})
	if err != nil {
		return err
	}
	defer func() {
		step("Stopping the global controller and the three control planes")
		err = errors.Join(err, fleet.Stop())
	}()

	step("Starting site-a's Metal3 (baremetal-operator, fixture provisioner), a Vault dev server and site-a's BPA")
	if err := fleet.StartSiteMetal3(ctx, "site-a"); err != nil {
		return err
	}
	vault, err := testvault.StartVaultIn(ctx, filepath.Join(dir, "vault"))
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, vault.Stop()) }()
	bpa, err := fleet.StartBPA(ctx, "site-a", vault)
	if err != nil {
		return err
	}
	step("Making site-a's two bare-metal hosts: real Debian hosts (systemd, sshd) in namespaces of their own, powered off; they boot when Metal3 provisions them")
	hosts, err := testhosts.NewHostNet(2, testhosts.HostOptions{Dir: filepath.Join(dir, "hosts"), Names: []string{"site-a-cp-0", "site-a-worker-0"}})
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, hosts.Close()) }()
	siteA, err := client.New(fleet.Sites["site-a"].Config, client.Options{Scheme: metal3.Scheme()})
	if err != nil {
		return err
	}
	defer hosts.PlayIronic(ctx, siteA, sitev1.HostsNamespace, fleet.LocalController("site-a").CacheCAFile, func(err error) { fmt.Fprintln(os.Stderr, "ironic:", err) })()

	step("Starting the local controllers of site-a (its nodes made by its BPA) and site-b (its nodes simulated: bin/local-controller-simulated; the global controller gives each its own token for the artifact API once registered)")
	local := map[string]testfleet.LocalController{}
	if local["site-a"], err = fleet.StartLocalController(ctx, "site-a"); err != nil {
		return err
	}
	if local["site-b"], err = fleet.StartSimulatedLocalController(ctx, "site-b"); err != nil {
		return err
	}

	step("Registering the sites and hosts of " + manifest + " (site-a's kubeconfig and the BMC Secrets are generated; site-b enrolls)")
	if err := fleet.Apply(ctx, manifest, "site-b"); err != nil {
		return err
	}
	step("Enrolling site-b as its bootstrap machine does at first boot, no kubeconfig handled by anyone: edgefleet site token create site-b -n fleet (a one-time token, into a 0600 file), then on the site: local-controller enroll --global-url " +
		fleet.APIURL + " --global-ca-file <the API's CA> --token-file <file> --site fleet/site-b")
	enrolled, err := fleet.Enroll(ctx, "fleet", "site-b", "demo-b")
	if err != nil {
		return err
	}
	fmt.Print(string(enrolled))
	step("Waiting for the global controller to reach both sites")
	if err := fleet.WaitSitesReady(ctx, "fleet", "site-a", "site-b"); err != nil {
		return err
	}

	step("kubectl get sites,hosts -n fleet")
	out, err := fleet.Kubectl(ctx, "get", "sites,hosts", "-n", "fleet")
	fmt.Print(string(out))
	if err != nil {
		return err
	}

	// A sample package: edge-hello (hack/packages), a small service the BPA has never heard of.
	sample, err := builders.BuildPackageIn(dir, "edge-hello", "1.0.0", nil)
	if err != nil {
		return err
	}
	digest := sample.Digest
	step("edgefleet artifact upload " + filepath.Base(sample.Path) + " --kind binary-package --name edge-hello --version 1.0.0 --label edgefleet.io/component=demo")
	if out, err = fleet.Edgefleet(ctx, "artifact", "upload", sample.Path, "--kind", "binary-package", "--name", "edge-hello",
		"--version", "1.0.0", "--label", "edgefleet.io/component=demo"); err != nil {
		return err
	}
	fmt.Print(string(out))
	step("edgefleet artifact list -o wide")
	if out, err = fleet.Edgefleet(ctx, "artifact", "list", "-o", "wide"); err != nil {
		return err
	}
	fmt.Print(string(out))

	step("Caching the package at both sites: an ArtifactSet on each site cluster")
	for _, site := range []string{"site-a", "site-b"} {
		if err := cacheAtSite(ctx, fleet.Sites[site].Client, digest); err != nil {
			return err
		}
	}
	step("kubectl --kubeconfig " + fleet.SiteKubeconfig("site-a") + " get artifactsets -n edgefleet-system -o wide")
	if out, err = fleet.SiteKubectl(ctx, "site-a", "get", "artifactsets", "-n", sitev1.InfoNamespace, "-o", "wide"); err != nil {
		return err
	}
	fmt.Print(string(out))
	pkgURL := strings.TrimSuffix(local["site-b"].CacheURL, "/") + sitecache.PathPrefix + digest // unsigned: the reader's credential decides
	step("GET " + pkgURL + " (site-b's cache over HTTPS, with the site admin's client certificate, as the BPA reads it with its own): the files in the package")
	cacheClient, err := fleet.SiteCacheClient("site-b")
	if err != nil {
		return err
	}
	if err := listPackage(ctx, cacheClient, pkgURL); err != nil {
		return err
	}
	if err := provisionSite(ctx, fleet, dir, "site-a", hosts); err != nil {
		return err
	}
	fmt.Printf(`
Everything keeps running until you press Ctrl-C. In another terminal:

  export KUBECONFIG=%[1]s
  bin/kubectl get sites,hosts -n fleet -o wide     # more columns: region, local controller, heartbeat, BMC
  bin/kubectl describe site site-a -n fleet        # conditions with reasons, events
  bin/kubectl get events -n fleet                  # one event per condition change
  curl -s %[2]s | grep edgefleet_site              # Prometheus metrics

  export EDGEFLEET_API_SERVER=%[4]s EDGEFLEET_API_CA_FILE=%[10]s
  bin/edgefleet --kubeconfig %[5]s artifact list
  bin/edgefleet --kubeconfig %[5]s artifact upload FILE --kind os-image --name NAME --version V

  bin/kubectl --kubeconfig %[6]s get artifactsets -A -o yaml   # what site-a caches, with URLs

  # the web UI: open %[4]s/ui/ (its certificate is %[10]s) and sign in with the operator's
  # token (a fleet admin):
  bin/kubectl config view --kubeconfig %[5]s --raw -o jsonpath='{.users[0].user.token}'

  # site-a's application cluster, its kubeconfig read from the site and never written to a file:
  bin/kubectl --kubeconfig %[6]s get secret site-a-kubeconfig -n edgefleet-system -o jsonpath='{.data.value}' \
    | base64 -d | bin/kubectl --kubeconfig /dev/stdin get nodes -o wide

Global controller log: %[3]s; local controller logs: %[7]s, %[8]s; site-a's BPA: %[9]s
`, fleet.Kubeconfig(), fleet.MetricsURL, fleet.ControllerLog(), fleet.APIURL, fleet.OperatorKubeconfig(),
		fleet.SiteKubeconfig("site-a"), local["site-a"].Log, local["site-b"].Log, bpa.Log, fleet.APICAFile)
	<-ctx.Done()
	fmt.Println()
	return nil
}

func step(s string) { fmt.Printf("\n==> %s\n", s) }

// provisionSite uploads an OS image and the real node stack's packages, images and charts
// (builders.BuildStack), makes them a Release, gives the site's hosts their addresses and
// the site a cluster of that Release, and follows it until the site's BPA built the cluster;
// then it asks the application cluster for its nodes and pods.
func provisionSite(ctx context.Context, fleet *testfleet.Fleet, dir, site string, hosts *testhosts.HostNet) error {
	image := filepath.Join(dir, "edge-os-1.0.img")
	data, imageDigest := testutil.RandomContent(4<<20, 1)
	if err := os.WriteFile(image, data, 0o600); err != nil {
		return err
	}
	upload := func(file, kind, name, version string) (string, error) {
		step(fmt.Sprintf("edgefleet artifact upload %s --kind %s --name %s --version %s", filepath.Base(file), kind, name, version))
		a, err := fleet.Upload(ctx, file, kind, name, version)
		if err != nil {
			return "", err
		}
		fmt.Printf("%s %s %s  sha256:%s  %d bytes\n", a.Kind, a.Name, a.Version, a.SHA256, a.Size)
		return a.SHA256, nil
	}
	if _, err := upload(image, "os-image", "edge-os", "1.0"); err != nil {
		return err
	}
	release := fmt.Sprintf(`apiVersion: fleet.edgefleet.io/v1alpha1
kind: Release
metadata: {name: edge-1.0, namespace: fleet}
spec:
  kubernetesVersion: v%s
  osImage: {sha256: %s}
  packages:
`, builders.KubernetesVersion, imageDigest)
	built, err := builders.BuildStack(ctx, dir, builders.KubernetesVersion)
	if err != nil {
		return err
	}
	sections := map[string]string{}
	for _, a := range built {
		digest, err := upload(a.Path, a.Kind, a.Name, a.Version)
		if err != nil {
			return err
		}
		sections[a.Kind] += fmt.Sprintf("  - {sha256: %s, name: %s %s %s}\n", digest, a.Kind, a.Name, a.Version)
	}
	release += sections["binary-package"] + "  images:\n" + sections["container-image-archive"] + "  charts:\n" + sections["helm-chart"]
	step("kubectl apply -f - (a Release: Kubernetes version, OS image, packages, images and charts, by digest)")
	fmt.Print(release)
	out, err := fleet.KubectlStdin(ctx, release, "apply", "-f", "-")
	if err != nil {
		return err
	}
	fmt.Print(string(out))
	// The same Release with the OS image's digest mistyped (its last digit changed).
	mistyped := imageDigest[:len(imageDigest)-1] + map[bool]string{true: "1", false: "0"}[strings.HasSuffix(imageDigest, "0")]
	typo := strings.Replace(release, "name: edge-1.0", "name: edge-1.0-typo", 1)
	typo = strings.Replace(typo, "sha256: "+imageDigest, fmt.Sprintf("sha256: %q", mistyped), 1)
	step("kubectl apply -f - (the same Release with the OS image's digest mistyped: the admission webhook refuses it, naming the field)")
	out, err = fleet.KubectlStdin(ctx, typo, "apply", "-f", "-")
	if err == nil || !strings.Contains(string(out), "not in the artifact store") {
		return fmt.Errorf("a Release naming an OS image the store does not hold was not refused by the admission webhook (kubectl: %w):\n%s", err, out)
	}
	fmt.Println(strings.TrimSpace(string(out)))

	for _, h := range hosts.Hosts {
		patch := fmt.Sprintf(`{"spec":{"address":%q}}`, h.IP)
		step("kubectl patch host " + h.Name + " -n fleet --type merge -p '" + patch + "' (where the BPA reaches it once provisioned)")
		if out, err = fleet.Kubectl(ctx, "patch", "host", h.Name, "-n", "fleet", "--type", "merge", "-p", patch); err != nil {
			return err
		}
		fmt.Print(string(out))
	}
	network, err := json.Marshal(hosts.ClusterNetwork())
	if err != nil {
		return err
	}
	patch := fmt.Sprintf(`{"spec":{"cluster":{"release":"edge-1.0","network":%s}}}`, network)
	step("kubectl patch site " + site + " -n fleet --type merge -p '" + patch + "'")
	if out, err = fleet.Kubectl(ctx, "patch", "site", site, "-n", "fleet", "--type", "merge", "-p", patch); err != nil {
		return err
	}
	fmt.Print(string(out))

	step("Following " + site + ": the global controller pushes the cluster, the site caches the image and packages, Metal3 provisions, the hosts boot, the BPA installs over SSH, Cluster-API sees the nodes")
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	last := ""
	for {
		hs := &fleetv1.HostList{}
		s := &fleetv1.Site{}
		if err := fleet.Global.Client.Get(ctx, client.ObjectKey{Namespace: "fleet", Name: site}, s); err != nil {
			return err
		}
		if err := fleet.Global.Client.List(ctx, hs, client.InNamespace("fleet")); err != nil {
			return err
		}
		line := "cluster: pending"
		if c := s.Status.Cluster; c != nil {
			line = fmt.Sprintf("cluster: %s, control plane %d/%d, workers %d/%d", c.Phase, c.ControlPlane.Ready, c.ControlPlane.Total, c.Workers.Ready, c.Workers.Total)
			if b := c.Bootstrap; b != nil {
				line += fmt.Sprintf(" | BPA: %s, %s", b.Phase, b.Message)
			}
		}
		for _, h := range hs.Items {
			if h.Spec.SiteRef.Name == site && h.Status.Cluster != nil {
				line += fmt.Sprintf(" | %s %s", h.Name, h.Status.Cluster.ProvisioningState)
			}
		}
		if line != last {
			fmt.Printf("%s  %s\n", time.Now().Format("15:04:05"), line)
			last = line
		}
		if c := s.Status.Cluster; c != nil && c.Phase == sitev1.ClusterProvisioned && c.Bootstrap != nil && c.Bootstrap.Phase == sitev1.BootstrapInstalled && chartsReady(c.Bootstrap) {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not provisioned: %w", site, ctx.Err())
		case <-time.After(time.Second):
		}
	}
	step("kubectl get hosts -n fleet")
	if out, err = fleet.Kubectl(ctx, "get", "hosts", "-n", "fleet"); err != nil {
		return err
	}
	fmt.Print(string(out))
	step("kubectl --kubeconfig " + fleet.SiteKubeconfig(site) + " get applicationclusters,baremetalhosts,machines -A")
	if out, err = fleet.SiteKubectl(ctx, site, "get", "applicationclusters,baremetalhosts,machines", "-A"); err != nil {
		return err
	}
	fmt.Print(string(out))
	step("kubectl --kubeconfig /dev/stdin get nodes -o wide   (" + site + "'s application cluster, its kubeconfig from the site's Secret " + site + "-kubeconfig)")
	if out, err = fleet.ApplicationKubectl(ctx, site, "get", "nodes", "-o", "wide"); err != nil {
		return err
	}
	fmt.Print(string(out))
	step("kubectl --kubeconfig /dev/stdin get pods -A -o wide   (the pods of " + site + "'s application cluster, on its real kubelets and containerd)")
	if out, err = fleet.ApplicationKubectl(ctx, site, "get", "pods", "-A", "-o", "wide"); err != nil {
		return err
	}
	fmt.Print(string(out))
	ip, err := fleet.ApplicationKubectl(ctx, site, "get", "service", "webapp", "-n", "webapp", "-o", "jsonpath={.spec.clusterIP}")
	if err != nil {
		return err
	}
	url := "http://" + strings.TrimSpace(string(ip)) + "/"
	h := hosts.Hosts[0]
	step("curl " + url + " three times, on " + h.Name + " (the test application's Service, through kube-proxy)")
	for range 3 {
		if out, err = h.Exec(ctx, "curl", "-sS", "--max-time", "5", url); err != nil {
			return fmt.Errorf("the test application's Service %s from %s: %w: %s", url, h.Name, err, out)
		}
		fmt.Println(strings.TrimSpace(string(out)))
	}
	return nil
}

// chartsReady tells whether every chart's pods are ready.
func chartsReady(b *sitev1.BootstrapStatus) bool {
	for _, c := range b.Charts {
		if c.PodsReady < c.PodsDesired {
			return false
		}
	}
	return true
}

// listPackage prints the names of the files in the tar.gz at url.
func listPackage(ctx context.Context, c *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	gz, err := gzip.NewReader(resp.Body)
	if err != nil {
		return fmt.Errorf("GET %s: %w", url, err)
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("GET %s: %w", url, err)
		}
		fmt.Printf("%s  %s  %d bytes  (ETag %s)\n", os.FileMode(h.Mode), h.Name, h.Size, resp.Header.Get("ETag"))
	}
}

// cacheAtSite creates an ArtifactSet listing digest on a site cluster and waits until the
// site's cache holds it.
func cacheAtSite(ctx context.Context, c client.Client, digest string) error {
	set := &sitev1.ArtifactSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: sitev1.InfoNamespace, Name: "demo"},
		Spec:       sitev1.ArtifactSetSpec{Artifacts: []sitev1.ArtifactRef{{SHA256: digest, Name: "binary-package edge-hello 1.0.0"}}},
	}
	if err := c.Create(ctx, set); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for !meta.IsStatusConditionTrue(set.Status.Conditions, sitev1.ArtifactSetReadyCondition) {
		select {
		case <-ctx.Done():
			return fmt.Errorf("package not cached at the site: %w", ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
		if err := c.Get(ctx, client.ObjectKeyFromObject(set), set); err != nil {
			return err
		}
	}
	return nil
}
