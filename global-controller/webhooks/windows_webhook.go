package webhooks

import (
	"context"
	"errors"
	"fmt"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
	"github.com/edgefleet/edgefleet/global-controller/reconcilers/campaign/plan"
)

// +kubebuilder:webhook:path=/validate-fleet-edgefleet-io-v1alpha1-site,mutating=false,failurePolicy=fail,sideEffects=None,groups=fleet.edgefleet.io,resources=sites,verbs=create;update,versions=v1alpha1,name=vsite.fleet.edgefleet.io,admissionReviewVersions=v1
// +kubebuilder:webhook:path=/validate-fleet-edgefleet-io-v1alpha1-campaign,mutating=false,failurePolicy=fail,sideEffects=None,groups=fleet.edgefleet.io,resources=campaigns,verbs=create;update,versions=v1alpha1,name=vcampaign.fleet.edgefleet.io,admissionReviewVersions=v1

// SetupWindowValidators registers the webhooks that refuse a Site (spec.maintenanceWindows) or
// a Campaign (spec.strategy.maintenanceWindows) whose maintenance window can never open: a
// schedule that names no real date (30 February) or a time zone that does not exist. The CRDs'
// CEL rules check the rest; these two need cron and the time zone database. now is the clock
// schedules are checked against.
func SetupWindowValidators(mgr ctrl.Manager, now func() time.Time) error {
	if now == nil {
		return errors.New("maintenance window webhooks: now is required")
	}
	site := &windowsValidator[*fleetv1.Site]{
		kind: "Site", path: field.NewPath("spec", "maintenanceWindows"), now: now,
		windows: func(s *fleetv1.Site) []fleetv1.MaintenanceWindow { return s.Spec.MaintenanceWindows },
	}
	if err := ctrl.NewWebhookManagedBy(mgr, &fleetv1.Site{}).WithValidator(site).Complete(); err != nil {
		return fmt.Errorf("site webhook: %w", err)
	}
	campaign := &windowsValidator[*fleetv1.Campaign]{
		kind: "Campaign", path: field.NewPath("spec", "strategy", "maintenanceWindows"), now: now,
		windows: func(c *fleetv1.Campaign) []fleetv1.MaintenanceWindow { return c.Spec.Strategy.MaintenanceWindows },
	}
	if err := ctrl.NewWebhookManagedBy(mgr, &fleetv1.Campaign{}).WithValidator(campaign).Complete(); err != nil {
		return fmt.Errorf("campaign webhook: %w", err)
	}
	return nil
}

// windowsValidator checks the maintenance windows of one kind, found at path.
type windowsValidator[T client.Object] struct {
	kind    string
	path    *field.Path
	windows func(T) []fleetv1.MaintenanceWindow
	now     func() time.Time
}

// ValidateCreate checks the object's windows.
func (v *windowsValidator[T]) ValidateCreate(_ context.Context, obj T) (admission.Warnings, error) {
	return nil, v.check(obj)
}

// ValidateUpdate checks the windows when they change: an object admitted before this webhook
// existed can still have its metadata and other fields updated (and be deleted).
func (v *windowsValidator[T]) ValidateUpdate(_ context.Context, old, obj T) (admission.Warnings, error) {
	if apiequality.Semantic.DeepEqual(v.windows(old), v.windows(obj)) {
		return nil, nil
	}
	return nil, v.check(obj)
}

// ValidateDelete admits every deletion.
func (v *windowsValidator[T]) ValidateDelete(context.Context, T) (admission.Warnings, error) {
	return nil, nil
}

// check returns an Invalid error with one field error per window that cannot open.
func (v *windowsValidator[T]) check(obj T) error {
	var errs field.ErrorList
	w, now := plan.NewWindows(), v.now()
	for i, mw := range v.windows(obj) {
		if err := w.Check(mw, now); err != nil {
			p, value := v.path.Index(i).Child("schedule"), mw.Schedule
			var tzErr *plan.TimeZoneError
			if errors.As(err, &tzErr) {
				p, value = v.path.Index(i).Child("timeZone"), mw.TimeZone
			}
			errs = append(errs, field.Invalid(p, value, err.Error()))
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(fleetv1.GroupVersion.WithKind(v.kind).GroupKind(), obj.GetName(), errs)
}
