package release_test

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
	restv1 "github.com/edgefleet/edgefleet/api/rest/v1"
	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
	"github.com/edgefleet/edgefleet/global-controller/reconcilers/release"
	"github.com/edgefleet/edgefleet/pkg/packages"
)

func TestCheck(t *testing.T) {
	os, etcd, apiserver, hello, chart, image := digest('a'), digest('b'), digest('c'), digest('d'), digest('e'), digest('f')
	pkg := func(name, version string, hosts packages.HostSelector, after ...string) release.Stored {
		return release.Stored{Kinds: []restv1.ArtifactKind{restv1.KindBinaryPackage}, Manifest: &packages.Manifest{Name: name, Version: version, Hosts: hosts, After: after}}
	}
	kind := func(k ...restv1.ArtifactKind) release.Stored { return release.Stored{Kinds: k} }
	// all is a store holding every artifact of spec as its kind.
	all := func() map[string]release.Stored {
		return map[string]release.Stored{
			os:        kind(restv1.KindOSImage),
			etcd:      pkg("etcd", "3.6.16", packages.HostsControlPlane),
			apiserver: pkg("kube-apiserver", "1.36.3", packages.HostsControlPlane, "etcd"),
			chart:     kind(restv1.KindHelmChart),
			image:     kind(restv1.KindContainerImageArchive),
		}
	}
	spec := func() *fleetv1.ReleaseSpec {
		return &fleetv1.ReleaseSpec{
			KubernetesVersion: "v1.36.3",
			OSImage:           sitev1.OSImage{SHA256: os},
			Packages:          []sitev1.ArtifactRef{{SHA256: etcd, Name: "etcd"}, {SHA256: apiserver, Name: "kube-apiserver"}},
			Charts:            []sitev1.ArtifactRef{{SHA256: chart, Name: "cni"}},
			Images:            []sitev1.ArtifactRef{{SHA256: image, Name: "pause"}},
		}
	}
	for _, tc := range []struct {
		name   string
		spec   func(*fleetv1.ReleaseSpec)
		stored func(map[string]release.Stored)
		status metav1.ConditionStatus
		reason string
		want   []string
		not    string
	}{
		{"ready", nil, nil, metav1.ConditionTrue, fleetv1.ReasonArtifactsFound, []string{"every artifact of the release is in the artifact store"}, "worker"},
		{"a package for worker hosts only", func(s *fleetv1.ReleaseSpec) {
			s.Packages = append(s.Packages, sitev1.ArtifactRef{SHA256: hello})
		}, func(st map[string]release.Stored) {
			st[hello] = pkg("edge-hello", "1.0.0", packages.HostsWorker, "kube-apiserver")
		},
			metav1.ConditionTrue, fleetv1.ReasonArtifactsFound, []string{"package(s) edge-hello run on worker hosts only: a site without a worker Host fails this release"}, ""},
		{"missing", nil, func(st map[string]release.Stored) { delete(st, chart); delete(st, os) }, metav1.ConditionFalse, fleetv1.ReasonArtifactsMissing,
			[]string{"not in the artifact store: sha256:" + os + ", sha256:" + chart + "; upload them"}, ""},
		{"missing before the wrong kind", nil, func(st map[string]release.Stored) { delete(st, os); st[chart] = kind(restv1.KindOSImage) },
			metav1.ConditionFalse, fleetv1.ReasonArtifactsMissing, []string{"sha256:" + os}, chart},
		{"a chart among the packages, a package as the OS image", nil, func(st map[string]release.Stored) {
			st[os] = kind(restv1.KindBinaryPackage, restv1.KindHelmChart)
			st[apiserver] = kind(restv1.KindHelmChart)
		}, metav1.ConditionFalse, fleetv1.ReasonWrongArtifactKind, []string{
			"spec.osImage sha256:" + os + " is stored as binary-package and helm-chart, not as os-image",
			"spec.packages[1] (kube-apiserver) sha256:" + apiserver + " is stored as helm-chart, not as binary-package",
			"create a new Release naming an artifact of that kind",
		}, "spec.charts"},
		{"an image among the charts", func(s *fleetv1.ReleaseSpec) { s.Charts[0].SHA256 = image }, nil, metav1.ConditionFalse, fleetv1.ReasonWrongArtifactKind,
			[]string{"spec.charts[0] (cni) sha256:" + image + " is stored as container-image-archive, not as helm-chart"}, "spec.images"},
		{"also stored as another kind", nil, func(st map[string]release.Stored) {
			st[chart] = kind(restv1.KindContainerImageArchive, restv1.KindHelmChart)
		},
			metav1.ConditionTrue, fleetv1.ReasonArtifactsFound, nil, ""},
		{"after a package the release lacks", func(s *fleetv1.ReleaseSpec) { s.Packages = s.Packages[1:] }, nil, metav1.ConditionFalse, fleetv1.ReasonPackagesConflict,
			[]string{"spec.packages: kube-apiserver comes after etcd, which is not among the packages", "every site's BPA would refuse them; create a new Release"}, ""},
		{"two versions of one package", func(s *fleetv1.ReleaseSpec) {
			s.Packages = append(s.Packages, sitev1.ArtifactRef{SHA256: hello})
		}, func(st map[string]release.Stored) { st[hello] = pkg("etcd", "3.6.15", packages.HostsControlPlane) },
			metav1.ConditionFalse, fleetv1.ReasonPackagesConflict, []string{"two etcd packages (3.6.16 and 3.6.15)"}, ""},
		{"an invalid package", nil, func(st map[string]release.Stored) {
			st[apiserver] = release.Stored{Kinds: []restv1.ArtifactKind{restv1.KindBinaryPackage}, Invalid: "not a binary package (docs/packages.md): package: not gzip-compressed"}
		}, metav1.ConditionFalse, fleetv1.ReasonPackageInvalid, []string{
			"spec.packages[1] (kube-apiserver) sha256:" + apiserver + " is not a binary package (docs/packages.md): package: not gzip-compressed; upload valid packages and create a new Release naming them",
		}, "spec.packages[0]"},
		{"a cycle", nil, func(st map[string]release.Stored) {
			st[etcd] = pkg("etcd", "3.6.16", packages.HostsControlPlane, "kube-apiserver")
		},
			metav1.ConditionFalse, fleetv1.ReasonPackagesConflict, []string{"etcd, kube-apiserver come after each other in a cycle"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, st := spec(), all()
			if tc.spec != nil {
				tc.spec(s)
			}
			if tc.stored != nil {
				tc.stored(st)
			}
			v := release.Check(s, st)
			if v.Status != tc.status || v.Reason != tc.reason {
				t.Fatalf("verdict %+v, want %s/%s", v, tc.status, tc.reason)
			}
			for _, w := range tc.want {
				if !strings.Contains(v.Message, w) {
					t.Errorf("message %q, want it to hold %q", v.Message, w)
				}
			}
			if tc.not != "" && strings.Contains(v.Message, tc.not) {
				t.Errorf("message %q names %q", v.Message, tc.not)
			}
		})
	}
}
