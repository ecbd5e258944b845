package webhooks

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
	"github.com/edgefleet/edgefleet/global-controller/reconcilers/campaign/plan"
	"github.com/edgefleet/edgefleet/pkg/versionskew"
)

// siteVersionPath is where SiteVersionValidator is served: the Site's maintenance window
// webhook has the default path.
const siteVersionPath = "/validate-fleet-edgefleet-io-v1alpha1-site-version"

// Releases reads the Release a Site names.
type Releases interface {
	Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error
}

// SiteVersionValidator refuses a Site update that would move its application cluster to a
// Kubernetes version the version-skew policy forbids (pkg/versionskew): a control-plane
// downgrade, minor or patch, or more than one minor version up.
//
// Only the Site knows the version its cluster runs, so only the Site is checked here. A
// Release is bound to no site: one at v1.34.0 is admitted (it is what a site still on
// v1.33 or v1.34 goes to), and the move to it is judged where the cluster's version is known:
// here, when a Site is set to it, and by the campaign planner, which skips a site it may not
// move with the reason.
type SiteVersionValidator struct {
	// Releases resolves spec.cluster.release in the Site's namespace. Read it from the API
	// server, not a cache: a Release created just before the Site is changed must be found.
	Releases Releases
}

// +kubebuilder:webhook:path=/validate-fleet-edgefleet-io-v1alpha1-site-version,mutating=false,failurePolicy=fail,sideEffects=None,groups=fleet.edgefleet.io,resources=sites,verbs=update,versions=v1alpha1,name=vsiteversion.fleet.edgefleet.io,admissionReviewVersions=v1

// SetupWithManager registers the webhook on the manager's webhook server.
func (v *SiteVersionValidator) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewWebhookManagedBy(mgr, &fleetv1.Site{}).WithValidator(v).WithValidatorCustomPath(siteVersionPath).Complete()
}

// ValidateCreate admits every new Site: it runs nothing yet.
func (v *SiteVersionValidator) ValidateCreate(context.Context, *fleetv1.Site) (admission.Warnings, error) {
	return nil, nil
}

// ValidateDelete admits every deletion.
func (v *SiteVersionValidator) ValidateDelete(context.Context, *fleetv1.Site) (admission.Warnings, error) {
	return nil, nil
}

// ValidateUpdate refuses a change of spec.cluster.release or spec.cluster.kubernetesVersion
// whose Kubernetes version the cluster may not move to from the one it runs.
//
// The version the cluster runs is its control plane's, as the campaign planner reads it
// (plan.ControlPlaneVersion): the kube-apiserver package the BPA rolled out to every
// control-plane node, else the version every node reports. With none (never installed, or
// nodes on different versions and no BPA report) there is no running version to hold to, and
// any target is admitted. A campaign's rollback of an upgrade whose control plane never
// finished moving goes back to the version it still reports: a return, admitted. Once the
// control plane finished moving, going back is a downgrade Kubernetes does not support and is
// refused, whoever asks; the campaign planner does not dispatch that rollback, and says why. A
// release that does not exist is admitted: the site reports ReleaseNotFound and pushes nothing
// until it does.
func (v *SiteVersionValidator) ValidateUpdate(ctx context.Context, old, site *fleetv1.Site) (admission.Warnings, error) {
	c := site.Spec.Cluster
	running, source := plan.ControlPlaneVersion(old)
	if c == nil || running == "" {
		return nil, nil
	}
	var before fleetv1.SiteCluster
	if old.Spec.Cluster != nil {
		before = *old.Spec.Cluster
	}
	cluster := field.NewPath("spec", "cluster")
	var path *field.Path
	var target, what string
	switch {
	case c.Release != "" && c.Release != before.Release:
		rel := &fleetv1.Release{}
		err := v.Releases.Get(ctx, types.NamespacedName{Namespace: site.Namespace, Name: c.Release}, rel)
		switch {
		case apierrors.IsNotFound(err):
			return nil, nil
		case err != nil:
			return nil, apierrors.NewServiceUnavailable(fmt.Sprintf("read Release %s/%s (spec.cluster.release) to check its Kubernetes version: %v", site.Namespace, c.Release, err))
		}
		path, target, what = cluster.Child("release"), rel.Spec.KubernetesVersion, fmt.Sprintf("release %q runs Kubernetes %s", c.Release, rel.Spec.KubernetesVersion)
	case c.KubernetesVersion != "" && c.KubernetesVersion != before.KubernetesVersion:
		path, target, what = cluster.Child("kubernetesVersion"), c.KubernetesVersion, "Kubernetes "+c.KubernetesVersion
	default:
		return nil, nil
	}
	if err := versionskew.Check(running, target); err != nil {
		msg := fmt.Sprintf("%s, and the cluster's control plane runs %s (%s): %v", what, running, source, err)
		return nil, apierrors.NewInvalid(fleetv1.GroupVersion.WithKind("Site").GroupKind(), site.Name,
			field.ErrorList{field.Forbidden(path, msg)})
	}
	return nil, nil
}
