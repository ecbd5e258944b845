package ui

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
	restv1 "github.com/edgefleet/edgefleet/api/rest/v1"
	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
	"github.com/edgefleet/edgefleet/pkg/artifacts"
)

// What the releases page reads of the artifact store.
const (
	// maxArtifactsRead bounds the artifacts the page reads (and shows): the store lists them by
	// id, so beyond it the page says there are more.
	maxArtifactsRead = 1000
	// maxUploadsRead bounds the upload sessions shown.
	maxUploadsRead = 100
	// releasesRefresh is how often a live releases page reads the store again: uploads move
	// without an informer event.
	releasesRefresh = 2 * time.Second
)

// ArtifactStore is what the releases page reads of the artifact store (*artifacts.Store).
type ArtifactStore interface {
	List(ctx context.Context, f artifacts.Filter, limit int64, cont string) (restv1.ArtifactList, error)
	ListUploads(ctx context.Context, limit int64) ([]restv1.Upload, error)
}

var releaseListPage = page{
	template: "releases",
	title:    func(*request) string { return "Releases and artifacts" },
	load:     (*Server).loadReleases,
	watch:    func(req *request) func(Change) bool { return inNamespace(req.Namespace, KindRelease) },
	refresh:  releasesRefresh,
}

// releasesData is the releases page: the releases of the namespace, and what the artifact
// store holds and is receiving.
type releasesData struct {
	Releases []releaseRow
	// Artifacts in the store, by id; More when there are more than maxArtifactsRead.
	Artifacts []restv1.Artifact
	More      bool
	// Uploads in progress, oldest first.
	Uploads []uploadRow
	// StoreProblem says why the store's part is missing: the user may not list artifacts, or
	// the store could not be read.
	StoreProblem string
}

// releaseRow is one release with its readiness and artifacts.
type releaseRow struct {
	Namespace, Name, KubernetesVersion string
	// Ready is the Ready condition's status, Reason and Message its reason and message.
	Ready           metav1.ConditionStatus
	Reason, Message string
	Artifacts       []releaseArtifact
}

// releaseArtifact is an artifact a release names, and what the store holds of it.
type releaseArtifact struct {
	// Role is os-image, package, chart or image.
	Role, Name, SHA256 string
	// Stored is the store's artifact of this digest; nil when the store lacks it (or was not
	// read: see releasesData.StoreProblem).
	Stored *restv1.Artifact
}

// uploadRow is an upload session and its progress.
type uploadRow struct {
	restv1.Upload
	// Percent of Size received; -1 when the size is not known.
	Percent int
}

func (s *Server) loadReleases(ctx context.Context, req *request) (any, error) {
	ns := req.Namespace
	if err := s.authorize(ctx, req.User, fleetAccess("list", "releases", ns, "")); err != nil {
		return nil, err
	}
	list := &fleetv1.ReleaseList{}
	if err := s.cfg.Cache.List(ctx, list, client.InNamespace(ns), client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("list releases: %w", err)
	}
	d := &releasesData{}
	stored := s.readStore(ctx, req, d)
	for i := range list.Items {
		d.Releases = append(d.Releases, newReleaseRow(&list.Items[i], stored))
	}
	slices.SortFunc(d.Releases, func(a, b releaseRow) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return d, nil
}

// readStore fills the store's part of d when the user may list artifacts (the artifact API's
// own check: list on the cluster-wide virtual resource artifacts) and returns the stored
// artifacts by digest.
func (s *Server) readStore(ctx context.Context, req *request, d *releasesData) map[string]*restv1.Artifact {
	switch {
	case s.cfg.Artifacts == nil:
		d.StoreProblem = "this controller serves no artifact store"
		return nil
	case !s.allowed(ctx, req.User, fleetAccess("list", "artifacts", "", "")):
		d.StoreProblem = fmt.Sprintf("%s may not list artifacts.fleet.edgefleet.io: the artifacts and uploads are not shown", req.User.Name)
		return nil
	}
	arts, err := s.cfg.Artifacts.List(ctx, artifacts.Filter{}, maxArtifactsRead, "")
	if err != nil {
		s.cfg.Log.Error(err, "list artifacts for the releases page")
		d.StoreProblem = "the artifact store could not be read: " + err.Error()
		return nil
	}
	uploads, err := s.cfg.Artifacts.ListUploads(ctx, maxUploadsRead)
	if err != nil {
		s.cfg.Log.Error(err, "list uploads for the releases page")
		d.StoreProblem = "the artifact store's uploads could not be read: " + err.Error()
	}
	d.Artifacts, d.More = arts.Items, arts.Continue != ""
	byDigest := make(map[string]*restv1.Artifact, len(d.Artifacts))
	for i := range d.Artifacts {
		byDigest[d.Artifacts[i].SHA256] = &d.Artifacts[i]
	}
	for _, u := range uploads {
		r := uploadRow{Upload: u, Percent: -1}
		if u.Size != nil && *u.Size > 0 {
			r.Percent = int(min(100, u.Offset*100 / *u.Size))
		}
		d.Uploads = append(d.Uploads, r)
	}
	return byDigest
}

func newReleaseRow(r *fleetv1.Release, stored map[string]*restv1.Artifact) releaseRow {
	row := releaseRow{Namespace: r.Namespace, Name: r.Name, KubernetesVersion: r.Spec.KubernetesVersion, Ready: metav1.ConditionUnknown,
		Reason: "NotChecked", Message: "the release controller has not checked the artifacts yet"}
	if c := apimeta.FindStatusCondition(r.Status.Conditions, fleetv1.ReleaseReadyCondition); c != nil {
		row.Ready, row.Reason, row.Message = c.Status, c.Reason, c.Message
	}
	add := func(role string, refs []sitev1.ArtifactRef) {
		for _, a := range refs {
			row.Artifacts = append(row.Artifacts, releaseArtifact{Role: role, Name: a.Name, SHA256: a.SHA256, Stored: stored[a.SHA256]})
		}
	}
	add("os-image", []sitev1.ArtifactRef{{SHA256: r.Spec.OSImage.SHA256, Name: "OS image"}})
	add("package", r.Spec.Packages)
	add("chart", r.Spec.Charts)
	add("image", r.Spec.Images)
	return row
}
