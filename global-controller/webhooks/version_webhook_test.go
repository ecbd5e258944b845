package webhooks_test

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
	restv1 "github.com/edgefleet/edgefleet/api/rest/v1"
	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
)

// versionedRelease is a Release at a Kubernetes version whose artifacts the store holds.
func versionedRelease(ns, name, version string) *fleetv1.Release {
	img := strings.Repeat("d", 64)
	store.set(func(d *digests) { d.have[img] = []restv1.ArtifactKind{restv1.KindOSImage} })
	return &fleetv1.Release{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       fleetv1.ReleaseSpec{KubernetesVersion: version, OSImage: sitev1.OSImage{SHA256: img}},
	}
}

// runningSite creates a Site whose spec.cluster is what set gives it and whose status says
// every node of its cluster runs running ("" : nodes on different versions; none at all when
// never installed).
func runningSite(t *testing.T, ns, name string, set func(*fleetv1.SiteCluster), running *string) *fleetv1.Site {
	t.Helper()
	ctx := t.Context()
	s := site(ns, nil)
	s.Name = name
	s.Spec.Cluster = &fleetv1.SiteCluster{Network: sitev1.ClusterNetwork{
		PodCIDRs: []string{"10.244.0.0/16"}, ServiceCIDRs: []string{"10.96.0.0/12"},
		ControlPlaneEndpoint: sitev1.APIEndpoint{Host: "10.0.0.10"},
	}}
	set(s.Spec.Cluster)
	if err := global.Client.Create(ctx, s); err != nil {
		t.Fatalf("create site %s: %v", name, err)
	}
	t.Cleanup(func() { _ = global.Client.Delete(context.WithoutCancel(ctx), s) })
	if running != nil {
		s.Status.Cluster = &fleetv1.ClusterSummary{Phase: sitev1.ClusterProvisioned, KubernetesVersion: *running}
		if err := global.Client.Status().Update(ctx, s); err != nil {
			t.Fatalf("site %s status: %v", name, err)
		}
	}
	return s
}

// TestSiteVersionSkewIsRefused checks the anchors of issue 35 at admission: with a site whose
// cluster runs v1.36.3, Releases at v1.34.0, v1.35.8, v1.36.2 and v1.38.0 are admitted (a
// Release is bound to no site), but setting the Site's spec.cluster.release, or its
// spec.cluster.kubernetesVersion, to any of them is refused with an error naming the field,
// the running version, the target and the rule; v1.36.3, v1.36.4 and v1.37.0 are admitted.
func TestSiteVersionSkewIsRefused(t *testing.T) {
	ns := global.Namespace(t)
	ctx := t.Context()
	for _, v := range []string{"v1.34.0", "v1.35.8", "v1.36.2", "v1.36.3", "v1.36.4", "v1.37.0", "v1.38.0"} {
		if err := global.Client.Create(ctx, versionedRelease(ns, "edge-"+strings.ReplaceAll(v, ".", "-"), v)); err != nil {
			t.Fatalf("Release at %s: %v, want admitted (a Release is bound to no site)", v, err)
		}
	}
	running := "v1.36.3"
	for _, tt := range []struct {
		target string
		rule   string // "" when admitted
	}{
		{"v1.34.0", "no control-plane downgrade"},
		{"v1.35.8", "no control-plane downgrade"},
		{"v1.36.2", "no control-plane downgrade"},
		{"v1.38.0", "at most one minor version per upgrade"},
		{"v1.36.3", ""},
		{"v1.36.4", ""},
		{"v1.37.0", ""},
	} {
		for _, field := range []string{"spec.cluster.release", "spec.cluster.kubernetesVersion"} {
			t.Run(field+" "+tt.target, func(t *testing.T) {
				name := "s-" + strings.ReplaceAll(tt.target, ".", "-") + "-" + strings.ToLower(field[len("spec.cluster."):])
				var s *fleetv1.Site
				if field == "spec.cluster.release" {
					s = runningSite(t, ns, name, func(c *fleetv1.SiteCluster) { c.Release = "edge-v1-36-3" }, &running)
					s.Spec.Cluster.Release = "edge-" + strings.ReplaceAll(tt.target, ".", "-")
				} else {
					s = runningSite(t, ns, name, func(c *fleetv1.SiteCluster) {
						c.KubernetesVersion, c.OSImage = "v1.36.3", &sitev1.OSImage{SHA256: strings.Repeat("d", 64)}
					}, &running)
					s.Spec.Cluster.KubernetesVersion = tt.target
				}
				err := global.Client.Update(ctx, s)
				if tt.rule == "" {
					if err != nil {
						t.Fatalf("v1.36.3 -> %s: %v, want admitted", tt.target, err)
					}
					return
				}
				if err == nil {
					t.Fatalf("v1.36.3 -> %s admitted, want refused by %q", tt.target, tt.rule)
				}
				for _, want := range []string{field, "runs v1.36.3", tt.target, tt.rule} {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error %q does not name %q", err, want)
					}
				}
			})
		}
	}
}

// TestSiteVersionWithoutARunningVersionIsAdmitted checks that a Site whose cluster runs no
// single version (never installed, or nodes on different versions while a move is under way
// or after one failed part way: the case of a campaign's rollback) may be set to any release;
// that a release that does not exist yet is not judged; and that a Site whose release is
// already one the rule forbids can still have its other fields updated.
func TestSiteVersionWithoutARunningVersionIsAdmitted(t *testing.T) {
	ns := global.Namespace(t)
	ctx := t.Context()
	for _, v := range []string{"v1.34.0", "v1.36.3"} {
		if err := global.Client.Create(ctx, versionedRelease(ns, "edge-"+strings.ReplaceAll(v, ".", "-"), v)); err != nil {
			t.Fatalf("Release at %s: %v", v, err)
		}
	}
	mixed := ""
	for name, running := range map[string]*string{"never-installed": nil, "nodes-mixed": &mixed} {
		s := runningSite(t, ns, name, func(c *fleetv1.SiteCluster) { c.Release = "edge-v1-36-3" }, running)
		s.Spec.Cluster.Release = "edge-v1-34-0"
		if err := global.Client.Update(ctx, s); err != nil {
			t.Errorf("%s: set to v1.34.0: %v, want admitted (no running version)", name, err)
		}
	}
	v1363 := "v1.36.3"
	s := runningSite(t, ns, "release-missing", func(c *fleetv1.SiteCluster) { c.Release = "edge-v1-36-3" }, &v1363)
	s.Spec.Cluster.Release = "edge-not-yet"
	if err := global.Client.Update(ctx, s); err != nil {
		t.Fatalf("set to a release that does not exist: %v, want admitted (the site reports ReleaseNotFound)", err)
	}
	// A site on a release the rule forbids (set before the webhook existed).
	s = runningSite(t, ns, "old-spec", func(c *fleetv1.SiteCluster) { c.Release = "edge-v1-34-0" }, &v1363)
	s.Labels = map[string]string{"tier": "gold"}
	if err := global.Client.Update(ctx, s); err != nil {
		t.Fatalf("label a site whose release is unchanged: %v, want admitted", err)
	}
}

// TestSiteVersionOfTheAPIServersIsJudged checks that where the site's BPA reports the
// kube-apiserver package rolled out to every control-plane node, that version is the one
// judged: after an upgrade to v1.36.3 that failed at the first kubelet (every node still
// reports v1.35.8), going back to a release at v1.35.8 is refused as the downgrade of the API
// servers, naming where their version was read, and going on to v1.36.3 is admitted.
func TestSiteVersionOfTheAPIServersIsJudged(t *testing.T) {
	ns := global.Namespace(t)
	ctx := t.Context()
	for _, v := range []string{"v1.35.8", "v1.36.3"} {
		if err := global.Client.Create(ctx, versionedRelease(ns, "edge-"+strings.ReplaceAll(v, ".", "-"), v)); err != nil {
			t.Fatalf("Release at %s: %v", v, err)
		}
	}
	kubelets := "v1.35.8"
	s := runningSite(t, ns, "failed-at-first-kubelet", func(c *fleetv1.SiteCluster) { c.Release = "edge-v1-36-3" }, &kubelets)
	s.Status.Cluster.Bootstrap = &sitev1.BootstrapStatus{Phase: sitev1.BootstrapFailed, Packages: []sitev1.InstalledPackage{
		{Name: "kube-apiserver", Version: "1.36.3"}, {Name: "kubelet", Version: "1.35.8"},
	}}
	if err := global.Client.Status().Update(ctx, s); err != nil {
		t.Fatalf("site status: %v", err)
	}
	back := s.DeepCopy()
	back.Spec.Cluster.Release = "edge-v1-35-8"
	err := global.Client.Update(ctx, back)
	if err == nil || !strings.Contains(err.Error(), "spec.cluster.release") || !strings.Contains(err.Error(), "control plane runs v1.36.3 (status.cluster.bootstrap.packages[kube-apiserver])") ||
		!strings.Contains(err.Error(), "no control-plane downgrade") {
		t.Fatalf("back to v1.35.8 with the API servers on v1.36.3: got %v, want refused naming the field, the API servers' version and the rule", err)
	}
	// The site is unchanged: it goes on to a release at v1.36.3 (the same one, relabelled).
	s.Labels = map[string]string{"retry": "1"}
	if err := global.Client.Update(ctx, s); err != nil {
		t.Fatalf("stay on v1.36.3: %v", err)
	}
}
