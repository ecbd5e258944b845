package webhooks

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
)

// Artifacts tells whether content is in the artifact store.
type Artifacts interface {
	// HasDigest reports whether the store holds content with this sha256.
	HasDigest(ctx context.Context, sha256 string) (bool, error)
}

// ReleaseValidator admits a Release only when every artifact it names is in the store.
type ReleaseValidator struct {
	// Artifacts is the artifact store.
	Artifacts Artifacts
}

// +kubebuilder:webhook:path=/validate-fleet-edgefleet-io-v1alpha1-release,mutating=false,failurePolicy=fail,sideEffects=None,groups=fleet.edgefleet.io,resources=releases,verbs=create,versions=v1alpha1,name=vrelease.fleet.edgefleet.io,admissionReviewVersions=v1

// SetupWithManager registers the webhook on the manager's webhook server.
func (v *ReleaseValidator) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewWebhookManagedBy(mgr, &fleetv1.Release{}).WithValidator(v).Complete()
}

// ValidateCreate refuses a release naming a digest the store does not hold, with one field
// error per digest. A store that does not answer refuses the release too (fail closed).
func (v *ReleaseValidator) ValidateCreate(ctx context.Context, rel *fleetv1.Release) (admission.Warnings, error) {
	spec := field.NewPath("spec")
	refs := []struct {
		path   *field.Path
		digest string
	}{{spec.Child("osImage", "sha256"), rel.Spec.OSImage.SHA256}}
	for _, list := range []struct {
		name string
		refs []sitev1.ArtifactRef
	}{{"packages", rel.Spec.Packages}, {"charts", rel.Spec.Charts}, {"images", rel.Spec.Images}} {
		for i, a := range list.refs {
			refs = append(refs, struct {
				path   *field.Path
				digest string
			}{spec.Child(list.name).Index(i).Child("sha256"), a.SHA256})
		}
	}
	var errs field.ErrorList
	for _, r := range refs {
		ok, err := v.Artifacts.HasDigest(ctx, r.digest)
		if err != nil {
			return nil, apierrors.NewServiceUnavailable(fmt.Sprintf("check %s sha256:%s in the artifact store: %v", r.path, r.digest, err))
		}
		if !ok {
			errs = append(errs, field.NotFound(r.path, "sha256:"+r.digest+" (not in the artifact store: upload it first)"))
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
