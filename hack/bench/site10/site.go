package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
	"github.com/edgefleet/edgefleet/bpa/cluster"
	"github.com/edgefleet/edgefleet/pkg/secrets"
	"github.com/edgefleet/edgefleet/test/builders"
	"github.com/edgefleet/edgefleet/test/metal3"
	"github.com/edgefleet/edgefleet/test/testfleet"
	"github.com/edgefleet/edgefleet/test/testhosts"
	"github.com/edgefleet/edgefleet/test/testutil"
	"github.com/edgefleet/edgefleet/test/testvault"
)

// kubernetesVersion is the version of the stack's Kubernetes packages.
const kubernetesVersion = "v" + builders.KubernetesVersion

// stackFile is an artifact of the site's Release: built, uploaded, its sha256 known.
type stackFile struct {
	builders.StackArtifact
	SHA256 string
	Size   int64
}

// siteResult is what the site's install measured.
type siteResult struct {
	// stack is what the Release ships besides its OS image: the anchor installs it too.
	stack []stackFile
	// milestones in the order they were reached, each since spec.cluster was set.
	milestones []milestone
	// booted, ssh and ready: when each host booted, answered SSH, and was first a Ready node.
	booted, ssh, ready map[string]time.Duration
	// total is from setting spec.cluster to every node Ready and the application serving.
	total time.Duration
	// levels are the BPA's log lines of the install's levels.
	levels []bpaLevel
	// hosts: the memory and CPU time of each host once the application served, in host order.
	hosts []hostUsage
	// serving is the application's answer.
	serving string
}

type milestone struct {
	name string
	at   time.Duration
}

// hostUsage is a host's memory once the application served, and the CPU time it used since it
// booted.
type hostUsage struct {
	name            string
	controlPlane    bool
	usage, resident int64
	cpu             time.Duration
}

// runSite starts the fleet and the site, makes the Release, sets the Site's spec.cluster and
// follows the install until every node is Ready and the application serves; everything it
// started is stopped when it returns.
func runSite(ctx context.Context, dir string, timeout time.Duration) (_ *siteResult, err error) {
	logf("starting a global control plane, the site's control plane (%s) and bin/global-controller", siteName)
	fleet, err := testfleet.StartFleet(ctx, testfleet.FleetOptions{
		Sites: []string{siteName}, Dir: filepath.Join(dir, "fleet"),
		// The global Site follows the site's status at each heartbeat: every 10 s, as in the demo.
		ControllerArgs: []string{"--site-heartbeat-interval=10s"},
	})
	if err != nil {
		return nil, err
	}
	defer func() {
		logf("stopping the global controller, Metal3 and the control planes")
		err = errors.Join(err, fleet.Stop())
	}()
	vault, err := testvault.StartVaultIn(ctx, filepath.Join(dir, "vault"))
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, vault.Stop()) }()
	logf("making the site's %d hosts (%d control plane, %d workers): powered off, they boot when Metal3 provisions them", controlPlanes+workers, controlPlanes, workers)
	hostsDir := filepath.Join(dir, "hosts")
	hn, err := testhosts.NewHostNet(controlPlanes+workers, testhosts.HostOptions{Dir: hostsDir, Names: hostNames()})
	if err != nil {
		return nil, err
	}
	defer func() {
		logf("stopping the site's hosts")
		err = errors.Join(err, hn.Close(), os.RemoveAll(hostsDir))
	}()
	logf("starting the site: Metal3 (fixture provisioner), the local controller, the BPA, the harness's Ironic; registering the Site and its Hosts")
	stopSite, err := fleet.StartRealSite(ctx, testfleet.RealSiteOptions{
		Name: siteName, Namespace: siteNamespace, Hosts: hn, ControlPlanes: controlPlanes, Vault: vault,
		Report: func(err error) { logf("ironic: %v", err) },
	})
	if err != nil {
		return nil, err
	}
	defer func() {
		logf("stopping the site's local controller and BPA")
		err = errors.Join(err, stopSite())
	}()

	res := &siteResult{}
	logf("building the real node stack and uploading it and an OS image through the artifact API")
	if res.stack, err = uploadStack(ctx, fleet, filepath.Join(dir, "stack")); err != nil {
		return nil, err
	}
	if err := createRelease(ctx, fleet, res.stack); err != nil {
		return nil, err
	}
	if err := fleet.WaitSitesReady(ctx, siteNamespace, siteName); err != nil {
		return nil, err
	}
	if !slices.ContainsFunc(res.stack, func(a stackFile) bool { return a.Kind == "helm-chart" && a.Name == appChart }) {
		return nil, fmt.Errorf("the real node stack (builders.StackCharts) has no chart %s, the test application", appChart)
	}

	siteClient, err := client.New(fleet.Sites[siteName].Config, client.Options{Scheme: metal3.Scheme()})
	if err != nil {
		return nil, err
	}
	store := secrets.NewVault(vault.Client, "secret", "edgefleet/"+siteName) // the BPA's (testfleet.Fleet.StartRealSiteBPA)
	w := &watcher{fleet: fleet, site: siteClient, hosts: hn, res: res,
		adminKubeconfig: func(ctx context.Context) ([]byte, error) {
			data, err := store.Get(ctx, cluster.AdminKubeconfigSecret(siteName))
			return data["value"], err
		}}
	s := &fleetv1.Site{}
	if err := fleet.Global.Client.Get(ctx, client.ObjectKey{Namespace: siteNamespace, Name: siteName}, s); err != nil {
		return nil, err
	}
	before := s.DeepCopy()
	s.Spec.Cluster = &fleetv1.SiteCluster{Release: releaseName, Network: hn.ClusterNetwork()}
	logf("setting Site %s/%s spec.cluster: release %s, network %v; the clock starts", siteNamespace, siteName, releaseName, s.Spec.Cluster.Network)
	w.t0 = time.Now()
	if err := fleet.Global.Client.Patch(ctx, s, client.MergeFrom(before)); err != nil {
		return nil, fmt.Errorf("set spec.cluster of Site %s/%s: %w", siteNamespace, siteName, err)
	}
	if err := w.follow(ctx, timeout); err != nil {
		return nil, err
	}
	if res.levels, err = readBPALevels(filepath.Join(fleet.Dir, siteName+"-bpa.log"), w.t0); err != nil {
		return nil, err
	}
	return res, nil
}

// appChart is the test application's chart (hack/charts/webapp): a Deployment of webapp with a
// ClusterIP Service, in the namespace of the chart's name.
const appChart = "webapp"

// releaseName is the site's Release.
const releaseName = "site10-1"

// osImageSize is the size of the Release's OS image: random bytes, as Metal3's fixture
// provisioner writes nothing; only the site cache takes it in.
const osImageSize = 4 << 20

// uploadStack builds the real node stack (builders.BuildStack) and an OS image into dir and uploads
// them through the artifact API; the OS image comes first.
func uploadStack(ctx context.Context, fleet *testfleet.Fleet, dir string) ([]stackFile, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	image := filepath.Join(dir, "edge-os-1.0.img")
	data, _ := testutil.RandomContent(osImageSize, 10)
	if err := os.WriteFile(image, data, 0o600); err != nil {
		return nil, err
	}
	built, err := builders.BuildStack(ctx, dir, builders.KubernetesVersion)
	if err != nil {
		return nil, err
	}
	var out []stackFile
	for _, a := range append([]builders.StackArtifact{{Path: image, Kind: "os-image", Name: "edge-os", Version: "1.0"}}, built...) {
		stored, err := fleet.Upload(ctx, a.Path, a.Kind, a.Name, a.Version)
		if err != nil {
			return nil, err
		}
		out = append(out, stackFile{StackArtifact: a, SHA256: stored.SHA256, Size: stored.Size})
	}
	return out, nil
}

// createRelease makes the stack a Release and waits until the global controller says it is
// Ready (every artifact stored).
func createRelease(ctx context.Context, fleet *testfleet.Fleet, stack []stackFile) error {
	r := &fleetv1.Release{ObjectMeta: metav1.ObjectMeta{Namespace: siteNamespace, Name: releaseName},
		Spec: fleetv1.ReleaseSpec{KubernetesVersion: kubernetesVersion}}
	for _, a := range stack {
		ref := sitev1.ArtifactRef{SHA256: a.SHA256, Name: a.Kind + " " + a.Name + " " + a.Version}
		switch a.Kind {
		case "os-image":
			r.Spec.OSImage = sitev1.OSImage{SHA256: a.SHA256}
		case "binary-package":
			r.Spec.Packages = append(r.Spec.Packages, ref)
		case "container-image-archive":
			r.Spec.Images = append(r.Spec.Images, ref)
		case "helm-chart":
			r.Spec.Charts = append(r.Spec.Charts, ref)
		}
	}
	c := fleet.Global.Client
	if err := c.Create(ctx, r); err != nil {
		return fmt.Errorf("create Release %s/%s: %w", r.Namespace, r.Name, err)
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for {
		if err := c.Get(ctx, client.ObjectKeyFromObject(r), r); err != nil {
			return fmt.Errorf("release %s/%s not Ready: %w", r.Namespace, r.Name, err)
		}
		if meta.IsStatusConditionTrue(r.Status.Conditions, fleetv1.ReleaseReadyCondition) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("release %s/%s not Ready: %w (conditions: %v)", r.Namespace, r.Name, ctx.Err(), r.Status.Conditions)
		case <-time.After(250 * time.Millisecond):
		}
	}
}
