package webhooks

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
	restv1 "github.com/edgefleet/edgefleet/api/rest/v1"
)

// Artifacts is what the artifact store holds.
type Artifacts interface {
	// KindsOf lists the kinds of the artifacts whose content has this sha256: none when the
	// store does not hold it.
	KindsOf(ctx context.Context, sha256 string) ([]restv1.ArtifactKind, error)
}

// ReleaseValidator admits a Release only when every artifact it names is in the store, as an
// artifact of the kind its field takes.
type ReleaseValidator struct {
	// Artifacts is the artifact store.
	Artifacts Artifacts
}

// +kubebuilder:webhook:path=/validate-fleet-edgefleet-io-v1alpha1-release,mutating=false,failurePolicy=fail,sideEffects=None,groups=fleet.edgefleet.io,resources=releases,verbs=create,versions=v1alpha1,name=vrelease.fleet.edgefleet.io,admissionReviewVersions=v1

// SetupWithManager registers the webhook on the manager's webhook server.
func (v *ReleaseValidator) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewWebhookManagedBy(mgr, &fleetv1.Release{}).WithValidator(v).Complete()
}

// ValidateCreate refuses a release naming a digest the store does not hold, or holds only as
// artifacts of another kind than its field takes (a chart's digest among the packages), with one
// field error per digest. A store that does not answer refuses the release too (fail closed).
// What the packages' manifests say is checked by the release reconciler, which reads them.
func (v *ReleaseValidator) ValidateCreate(ctx context.Context, rel *fleetv1.Release) (admission.Warnings, error) {
	var errs field.ErrorList
	for _, a := range rel.Spec.ArtifactFields() {
		path, d := a.Path.Child("sha256"), a.Ref.SHA256
		kinds, err := v.Artifacts.KindsOf(ctx, d)
		switch {
		case err != nil:
			return nil, apierrors.NewServiceUnavailable(fmt.Sprintf("check %s sha256:%s in the artifact store: %v", path, d, err))
		case len(kinds) == 0:
			errs = append(errs, field.NotFound(path, "sha256:"+d+" (not in the artifact store: upload it first)"))
		case a.KindMismatch(kinds) != "":
			errs = append(errs, field.Invalid(path, "sha256:"+d, fmt.Sprintf("%s: name a %s's digest (edgefleet artifact list --kind %s)", a.KindMismatch(kinds), a.Kind, a.Kind)))
		}
	}
	if len(errs) > 0 {
		return nil, apierrors.NewInvalid(fleetv1.GroupVersion.WithKind("Release").GroupKind(), rel.Name, errs)
	}
	return nil, nil
}

// ValidateUpdate admits every update: the spec is immutable (a CEL rule), and status and
// metadata changes do not touch the artifacts.
func (v *ReleaseValidator) ValidateUpdate(context.Context, *fleetv1.Release, *fleetv1.Release) (admission.Warnings, error) {
	return nil, nil
}

// ValidateDelete admits every deletion.
func (v *ReleaseValidator) ValidateDelete(context.Context, *fleetv1.Release) (admission.Warnings, error) {
	return nil, nil
}
