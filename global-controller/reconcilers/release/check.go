package release

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
	restv1 "github.com/edgefleet/edgefleet/api/rest/v1"
	"github.com/edgefleet/edgefleet/pkg/packages"
)

// Stored is what the artifact store holds with one sha256.
type Stored struct {
	// Kinds of the artifacts with this content; none when the store does not hold it.
	Kinds []restv1.ArtifactKind
	// Manifest is the binary package's manifest, read from the content when Kinds holds
	// binary-package; Invalid says why it could not be, when the content is no valid package.
	Manifest *packages.Manifest
	Invalid  string
}

// Verdict is what Check decides: the release's Ready condition.
type Verdict struct {
	Status          metav1.ConditionStatus
	Reason, Message string
}

// Check decides whether a release can be rolled out from what the store holds of each of its
// digests (stored, by sha256; for every binary-package the release names as a package, its
// manifest or why it is invalid): every digest stored (else ArtifactsMissing), each an artifact
// of the kind its field names (else WrongArtifactKind), each package valid (else
// PackageInvalid: stored before the store checked packages), and packages that go together on
// any cluster — their manifests' after lists name only packages of the release, one version of
// each, without a cycle (else PackagesConflict: every site's BPA would refuse them). Which hosts
// run the packages is known only at a site; a Ready release's message names the packages that
// need worker hosts. The same inputs give the same verdict.
func Check(spec *fleetv1.ReleaseSpec, stored map[string]Stored) Verdict {
	if v, ok := checkKinds(spec, stored); !ok {
		return v
	}
	var invalid []string
	ms := make([]*packages.Manifest, len(spec.Packages))
	for i, p := range spec.Packages {
		st := stored[p.SHA256]
		if st.Invalid != "" {
			invalid = append(invalid, fmt.Sprintf("spec.packages[%d]%s sha256:%s is %s", i, named(p.Name), p.SHA256, st.Invalid))
		}
		ms[i] = st.Manifest
	}
	if len(invalid) > 0 {
		return Verdict{metav1.ConditionFalse, fleetv1.ReasonPackageInvalid,
			strings.Join(invalid, "; ") + "; upload valid packages and create a new Release naming them"}
	}
	if _, err := packages.Levels(ms); err != nil {
		return Verdict{metav1.ConditionFalse, fleetv1.ReasonPackagesConflict,
			fmt.Sprintf("spec.packages: %v: every site's BPA would refuse them; create a new Release whose packages' after lists name only packages it holds, with one version of each and no cycle", err)}
	}
	msg := "every artifact of the release is in the artifact store"
	var workers []string
	for _, m := range ms {
		if m.Hosts == packages.HostsWorker {
			workers = append(workers, m.Name)
		}
	}
	if len(workers) > 0 {
		msg += fmt.Sprintf("; package(s) %s run on worker hosts only: a site without a worker Host fails this release", strings.Join(workers, ", "))
	}
	return Verdict{metav1.ConditionTrue, fleetv1.ReasonArtifactsFound, msg}
}

// checkKinds is Check's verdict on the kinds alone: not ok when a digest is missing or no
// artifact of its field's kind; then the manifests are not needed.
func checkKinds(spec *fleetv1.ReleaseSpec, stored map[string]Stored) (Verdict, bool) {
	var missing []string
	for _, a := range spec.Artifacts() {
		if len(stored[a.SHA256].Kinds) == 0 {
			missing = append(missing, "sha256:"+a.SHA256)
		}
	}
	if len(missing) > 0 {
		return Verdict{metav1.ConditionFalse, fleetv1.ReasonArtifactsMissing,
			fmt.Sprintf("not in the artifact store: %s; upload them (edgefleet artifact upload)", strings.Join(missing, ", "))}, false
	}
	if wrong := wrongKinds(spec, stored); len(wrong) > 0 {
		return Verdict{metav1.ConditionFalse, fleetv1.ReasonWrongArtifactKind,
			strings.Join(wrong, "; ") + "; upload the artifact as its kind (edgefleet artifact upload --kind) or create a new Release naming an artifact of that kind (edgefleet artifact list --kind)"}, false
	}
	return Verdict{}, true
}

// wrongKinds names, field by field, the digests no artifact of the field's kind has.
func wrongKinds(spec *fleetv1.ReleaseSpec, stored map[string]Stored) []string {
	var wrong []string
	for _, a := range spec.ArtifactFields() {
		mismatch := a.KindMismatch(stored[a.Ref.SHA256].Kinds)
		if mismatch == "" {
			continue
		}
		name := ""
		if a.Kind != restv1.KindOSImage {
			name = named(a.Ref.Name)
		}
		wrong = append(wrong, fmt.Sprintf("%s%s sha256:%s is %s", a.Path, name, a.Ref.SHA256, mismatch))
	}
	return wrong
}

// named is " (name)" for a reference's name, "" without one.
func named(name string) string {
	if name == "" {
		return ""
	}
	return " (" + name + ")"
}
