package cmd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
	"github.com/edgefleet/edgefleet/test/builders"
	"github.com/edgefleet/edgefleet/test/testfleet"
	"github.com/edgefleet/edgefleet/test/testutil"
)

// TestReleaseWithTheController creates releases from artifacts uploaded to the artifact store
// of a real global controller (bin/global-controller: run 'make build' first), which reports
// them Ready, or not, as it does in production; --wait follows it.
func TestReleaseWithTheController(t *testing.T) {
	// No webhook: the API server stores a Release naming a digest the store lacks, as it did
	// one admitted before the webhooks were registered, whose --wait is checked below.
	fleet, err := testfleet.StartFleet(t.Context(), testfleet.FleetOptions{Dir: t.TempDir(), NoWebhooks: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := fleet.Stop(); err != nil {
			t.Errorf("stop the fleet: %v", err)
		}
	})
	ns := fleet.Global.Namespace(t)
	cli := func(args ...string) (string, error) {
		t.Helper()
		return runAs(t, fleet.OperatorKubeconfig(), append([]string{"--api-server", fleet.APIURL, "--quiet", "-n", ns}, args...)...)
	}
	dir := t.TempDir()
	uploads := uint64(0)
	upload := func(kind, name, version, arch string) string {
		t.Helper()
		path := filepath.Join(dir, kind+"-"+name+"-"+arch)
		uploads++
		data, digest := testutil.RandomContent(1024, uploads)
		if kind == "binary-package" {
			var err error
			if data, digest, err = builders.StandInPackage(name, version, arch, 1024, uploads); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if out, err := cli("artifact", "upload", path, "--kind", kind, "--name", name, "--version", version, "--arch", arch); err != nil {
			t.Fatalf("upload %s: %v\n%s", path, err, out)
		}
		return digest
	}
	image := upload("os-image", "edge-os", "1.0", "amd64")
	kubelet := upload("binary-package", "kubelet", "1.36.3", "amd64")
	upload("binary-package", "kubelet", "1.36.3", "arm64")
	coredns := upload("helm-chart", "coredns", "1.12.0", "noarch")
	pause := upload("container-image-archive", "pause", "3.10", "amd64")

	// NAME@VERSION is looked up for --arch (amd64) or noarch; a digest is taken as it is.
	out, err := cli("release", "create", "edge-1", "--kubernetes-version", "v1.36.3", "--os-image", "edge-os@1.0",
		"--package", "kubelet@1.36.3", "--chart", "coredns@1.12.0", "--image", "sha256:"+pause, "--wait", "--timeout", "60s")
	if err != nil {
		t.Fatalf("release create --wait: %v\n%s", err, out)
	}
	if !strings.Contains(out, "release "+ns+"/edge-1 created") {
		t.Errorf("release create: %s", out)
	}
	rel := &fleetv1.Release{}
	if err := fleet.Global.Client.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: "edge-1"}, rel); err != nil {
		t.Fatal(err)
	}
	s := rel.Spec
	switch {
	case s.KubernetesVersion != "v1.36.3" || s.OSImage.SHA256 != image:
		t.Errorf("spec %+v", s)
	case len(s.Packages) != 1 || s.Packages[0].SHA256 != kubelet || s.Packages[0].Name != "binary-package kubelet 1.36.3":
		t.Errorf("packages %+v: want the amd64 kubelet, sha256 %s", s.Packages, kubelet)
	case len(s.Charts) != 1 || s.Charts[0].SHA256 != coredns || s.Charts[0].Name != "helm-chart coredns 1.12.0":
		t.Errorf("charts %+v", s.Charts)
	case len(s.Images) != 1 || s.Images[0].SHA256 != pause:
		t.Errorf("images %+v", s.Images)
	case !meta.IsStatusConditionTrue(rel.Status.Conditions, fleetv1.ReleaseReadyCondition):
		t.Errorf("--wait returned before the release was Ready: %+v", rel.Status)
	}

	// Without --quiet, --wait shows each state it sees.
	out, err = runAs(t, fleet.OperatorKubeconfig(), "--api-server", fleet.APIURL, "-n", ns, "release", "create", "edge-1b",
		"--kubernetes-version", "v1.36.3", "--os-image", "sha256:"+image, "--wait", "--timeout", "60s")
	if err != nil || len(lines(out, "release "+ns+"/edge-1b: Ready=True ArtifactsFound")) != 1 {
		t.Errorf("release create --wait shows no progress: %v\n%s", err, out)
	}

	// An artifact the store lacks is named, and nothing is created.
	out, err = cli("release", "create", "edge-x", "--kubernetes-version", "v1.36.3", "--os-image", "edge-os@1.0", "--package", "kubelet@9.9.9")
	if err == nil || !strings.Contains(err.Error(), `--package kubelet@9.9.9: no binary-package "kubelet" version "9.9.9" for amd64 (or noarch) in the artifact store`) {
		t.Errorf("release create with an artifact the store lacks: %v\n%s", err, out)
	}
	if err := fleet.Global.Client.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: "edge-x"}, &fleetv1.Release{}); !apierrors.IsNotFound(err) {
		t.Errorf("release edge-x: %v, want not found", err)
	}

	// --wait gives up after --timeout, naming what is not Ready and why: here a digest the
	// store lacks (no webhook runs in this fleet, so the API server stored it).
	missing := strings.Repeat("0e", 32)
	out, err = cli("release", "create", "edge-2", "--kubernetes-version", "v1.36.3", "--os-image", "sha256:"+image,
		"--package", "sha256:"+missing, "--wait", "--timeout", "10s")
	want := "timed out after 10s waiting for release " + ns + "/edge-2 to be Ready; last seen: release " + ns + "/edge-2: Ready=False ArtifactsMissing: not in the artifact store: sha256:" + missing
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("release create --wait of a release that cannot be Ready: %v, want %q\n%s", err, want, out)
	}

	// A manifest, with an artifact added by a flag; -o yaml prints the release once Ready.
	manifest := filepath.Join(dir, "release.yaml")
	if err := os.WriteFile(manifest, []byte("apiVersion: fleet.edgefleet.io/v1alpha1\nkind: Release\nmetadata: {name: edge-3}\n"+
		"spec:\n  kubernetesVersion: v1.36.3\n  osImage: {sha256: "+image+"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err = cli("release", "create", "-f", manifest, "--package", "kubelet@1.36.3", "--wait", "-o", "yaml")
	if err != nil {
		t.Fatalf("release create -f: %v\n%s", err, out)
	}
	got := &fleetv1.Release{}
	if err := yaml.UnmarshalStrict([]byte(out), got); err != nil {
		t.Fatalf("release create -o yaml: %v\n%s", err, out)
	}
	if got.Kind != "Release" || got.Namespace != ns || got.Name != "edge-3" || len(got.Spec.Packages) != 1 || got.Spec.Packages[0].SHA256 != kubelet || !meta.IsStatusConditionTrue(got.Status.Conditions, fleetv1.ReleaseReadyCondition) {
		t.Errorf("release create -f -o yaml:\n%s", out)
	}

	out, err = cli("release", "list")
	if err != nil {
		t.Fatalf("release list: %v\n%s", err, out)
	}
	if index(out, "NAME", "KUBERNETES", "READY", "AGE") != 0 || len(lines(out, "edge-1 ", "v1.36.3", "True")) != 1 || len(lines(out, "edge-2", "v1.36.3", "False")) != 1 {
		t.Errorf("release list:\n%s", out)
	}
	out, err = cli("release", "describe", "edge-2")
	if err != nil {
		t.Fatalf("release describe: %v\n%s", err, out)
	}
	t.Logf("release describe edge-2:\n%s", out)
	for _, want := range [][]string{
		{"Release/edge-2", "NotReady", "Kubernetes v1.36.3"},
		{"Ready", "False", "ArtifactsMissing: not in the artifact store: sha256:" + missing},
		{"OSImage", "sha256:" + image},
		{"Packages", "1"},
		{"─sha256:" + missing[:12] + " ", "sha256:" + missing},
	} {
		if len(lines(out, want...)) != 1 {
			t.Errorf("no one line with %q", want)
		}
	}
	out, err = cli("release", "describe", "edge-1")
	if err != nil {
		t.Fatalf("release describe: %v\n%s", err, out)
	}
	for _, want := range [][]string{
		{"Release/edge-1", "Ready"},
		{"binary-package kubelet 1.36.3", "sha256:" + kubelet},
		{"helm-chart coredns 1.12.0", "sha256:" + coredns},
		{"Images", "1"},
	} {
		if len(lines(out, want...)) != 1 {
			t.Errorf("release describe edge-1: no one line with %q\n%s", want, out)
		}
	}
	if strings.Contains(out, "ArtifactsFound") {
		t.Errorf("release describe shows a True condition without -o wide:\n%s", out)
	}
}

// TestReleaseCreateRefusesBadInput checks the errors of input that cannot make a release.
func TestReleaseCreateRefusesBadInput(t *testing.T) {
	ns := global.Namespace(t)
	digest := "sha256:" + strings.Repeat("ab", 32)
	manifest := filepath.Join(t.TempDir(), "campaign.yaml")
	if err := os.WriteFile(manifest, []byte("apiVersion: fleet.edgefleet.io/v1alpha1\nkind: Campaign\nmetadata: {name: c}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--kubernetes-version", "v1.36.3", "--os-image", digest}, "name the release: release create NAME, or metadata.name in -f FILE"},
		{[]string{"r", "--kubernetes-version", "v1.36.3", "--os-image", digest, "--package", "kubelet"}, `--package "kubelet": give NAME@VERSION or sha256: and 64 lower-case hex digits`},
		{[]string{"r", "--kubernetes-version", "v1.36.3", "--os-image", "sha256:ABC"}, `--os-image "sha256:ABC": give NAME@VERSION`},
		{[]string{"r", "--kubernetes-version", "v1.36.3", "--os-image", "edge-os@1.0"}, "--os-image edge-os@1.0: no artifact API given: set --api-server or EDGEFLEET_API_SERVER"},
		{[]string{"r", "--kubernetes-version", "1.36", "--os-image", digest}, "spec.kubernetesVersion"},
		{[]string{"-f", manifest}, "holds a fleet.edgefleet.io/v1alpha1, Kind=Campaign, not a fleet.edgefleet.io/v1alpha1, Kind=Release"},
	} {
		out, err := run(t, append([]string{"release", "create", "-n", ns, "--api-server", ""}, c.args...)...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("release create %v: %v, want %q\n%s", c.args, err, c.want, out)
		}
	}
	list := &fleetv1.ReleaseList{}
	if err := global.Client.List(t.Context(), list, client.InNamespace(ns)); err != nil || len(list.Items) != 0 {
		t.Errorf("releases after bad input: %v %+v", err, list.Items)
	}
}
