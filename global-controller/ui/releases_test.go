package ui

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
	restv1 "github.com/edgefleet/edgefleet/api/rest/v1"
	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
	"github.com/edgefleet/edgefleet/pkg/artifacts"
)

var (
	osDigest      = strings.Repeat("a", 64)
	kubeletDigest = strings.Repeat("b", 64)
)

// testRelease names an OS image the fake store holds and a package it lacks.
func testRelease() *fleetv1.Release {
	return &fleetv1.Release{
		ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "r1"},
		Spec: fleetv1.ReleaseSpec{KubernetesVersion: "v1.36.3", OSImage: sitev1.OSImage{SHA256: osDigest},
			Packages: []sitev1.ArtifactRef{{SHA256: kubeletDigest, Name: "kubelet"}}},
		Status: fleetv1.ReleaseStatus{Conditions: []metav1.Condition{{Type: fleetv1.ReleaseReadyCondition, Status: metav1.ConditionFalse,
			Reason: "ArtifactsMissing", Message: "the artifact store lacks kubelet", LastTransitionTime: metav1.NewTime(t0)}}},
	}
}

// fakeArtifactStore is a fake of the artifact store: one artifact, one upload whose offset the
// test moves.
type fakeArtifactStore struct {
	mu     sync.Mutex
	offset int64
}

func newFakeArtifactStore() *fakeArtifactStore { return &fakeArtifactStore{offset: 400 << 10} }

func (f *fakeArtifactStore) setOffset(n int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.offset = n
}

func (f *fakeArtifactStore) List(context.Context, artifacts.Filter, int64, string) (restv1.ArtifactList, error) {
	return restv1.ArtifactList{Items: []restv1.Artifact{{ID: "1", SHA256: osDigest, Size: 3 << 20, Created: t0, Creator: "admin",
		ArtifactSpec: restv1.ArtifactSpec{Kind: "os-image", Name: "debian", Version: "12", Architecture: "amd64"}}}}, nil
}

func (f *fakeArtifactStore) ListUploads(context.Context, int64) ([]restv1.Upload, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	size := int64(1 << 20)
	return []restv1.Upload{{ID: "u1", Artifact: restv1.ArtifactSpec{Kind: "package", Name: "kubelet", Version: "1.36.3"},
		Size: &size, Offset: f.offset, Creator: "admin", Created: t0, Expires: t0.Add(time.Hour)}}, nil
}

func TestReleasesPage(t *testing.T) {
	b := newBed(t, Limits{})
	for _, tc := range []struct {
		name, token, path string
		wantStatus        int
		want, wantNot     []string
	}{
		{name: "readiness, artifacts present and missing, an upload's progress", token: "viewer-token", path: "/ui/releases", wantStatus: http.StatusOK,
			want: []string{`data-release="r1"`, "Kubernetes v1.36.3", `data-ready="False"`, "ArtifactsMissing", "the artifact store lacks kubelet",
				`data-sha256="` + osDigest + `" data-stored="yes"`, "3.0 MiB", `data-sha256="` + kubeletDigest + `" data-stored="no"`,
				`<progress max="100" value="39">`, "400 KiB of 1.0 MiB", `class="artifact"`, `href="/ui/releases"`}},
		{name: "who may not list artifacts sees the releases alone", token: "team-token", path: "/ui/releases?namespace=fleet", wantStatus: http.StatusOK,
			want:    []string{`data-release="r1"`, "team may not list artifacts.fleet.edgefleet.io", `data-stored="no"`},
			wantNot: []string{`class="upload"`, `class="artifact"`}},
		{name: "who may not list releases gets 403", token: "nobody-token", path: "/ui/releases", wantStatus: http.StatusForbidden,
			want: []string{"nobody may not list releases.fleet.edgefleet.io in all namespaces"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := b.do(t, http.MethodGet, tc.path, tc.token, "", nil)
			if a.status != tc.wantStatus {
				t.Fatalf("status %d, want %d:\n%s", a.status, tc.wantStatus, a.body)
			}
			for _, w := range tc.want {
				if !strings.Contains(a.body, w) {
					t.Errorf("body lacks %q:\n%s", w, a.body)
				}
			}
			for _, w := range tc.wantNot {
				if strings.Contains(a.body, w) {
					t.Errorf("body has %q", w)
				}
			}
		})
	}

	t.Run("a live releases page follows an upload without any informer event", func(t *testing.T) {
		status, _, next := b.stream(t, "/ui/releases", "admin-token")
		if status != http.StatusOK {
			t.Fatalf("status %d", status)
		}
		if ev, data := next(); ev != eventUpdate || !strings.Contains(data, `value="39"`) {
			t.Fatalf("first event %q: want an update at 39%%:\n%s", ev, data)
		}
		b.store.setOffset(900 << 10)
		if ev, data := next(); ev != eventUpdate || !strings.Contains(data, `value="87"`) {
			t.Fatalf("next event %q: want an update at 87%%:\n%s", ev, data)
		}
	})
}
