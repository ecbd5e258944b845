package webhooks_test

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
)

func windows(schedule, tz string) []fleetv1.MaintenanceWindow {
	return []fleetv1.MaintenanceWindow{
		{Schedule: "0 2 * * 6", Duration: metav1.Duration{Duration: 4 * time.Hour}},
		{Schedule: schedule, Duration: metav1.Duration{Duration: time.Hour}, TimeZone: tz},
	}
}

func site(ns string, w []fleetv1.MaintenanceWindow) *fleetv1.Site {
	return &fleetv1.Site{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "paris-1"},
		Spec: fleetv1.SiteSpec{
			KubeconfigSecretRef: &fleetv1.SecretKeyReference{Name: "paris-1-kubeconfig"},
			MaintenanceWindows:  w,
		},
	}
}

func campaign(ns string, w []fleetv1.MaintenanceWindow) *fleetv1.Campaign {
	return &fleetv1.Campaign{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "patch-1"},
		Spec: fleetv1.CampaignSpec{
			Action: fleetv1.ActionPatch, Release: "edge-1.36.3",
			Targets:  fleetv1.CampaignTargets{Names: []string{"paris-1"}},
			Strategy: fleetv1.CampaignStrategy{MaintenanceWindows: w},
		},
	}
}

// TestWindowsThatCannotOpenAreRefused checks that a Site or Campaign whose maintenance window
// names no real date (30 February, 31 April), an unknown time zone or Local (the controller's
// zone, not an IANA one) is refused when created and when its windows are changed, with an
// error naming the field; that good windows are admitted; and that an object is still updated
// when its windows do not change.
func TestWindowsThatCannotOpenAreRefused(t *testing.T) {
	ns := global.Namespace(t)
	for _, tt := range []struct {
		name     string
		obj      func(w []fleetv1.MaintenanceWindow) client.Object
		path     string
		schedule string
		tz       string
		want     string
	}{
		{"site, 30 February", func(w []fleetv1.MaintenanceWindow) client.Object { return site(ns, w) }, "spec.maintenanceWindows[1].schedule", "0 2 30 2 *", "", "never fires"},
		{"site, unknown time zone", func(w []fleetv1.MaintenanceWindow) client.Object { return site(ns, w) }, "spec.maintenanceWindows[1].timeZone", "0 2 * * *", "Mars/Olympus", "Mars/Olympus"},
		{"site, Local (not an IANA zone)", func(w []fleetv1.MaintenanceWindow) client.Object { return site(ns, w) }, "spec.maintenanceWindows[1].timeZone", "0 2 * * *", "Local", "not an IANA time zone"},
		{"campaign, 31 April", func(w []fleetv1.MaintenanceWindow) client.Object { return campaign(ns, w) }, "spec.strategy.maintenanceWindows[1].schedule", "0 0 31 4 *", "", "never fires"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := t.Context()
			err := global.Client.Create(ctx, tt.obj(windows(tt.schedule, tt.tz)))
			if err == nil || !strings.Contains(err.Error(), tt.path) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("create: got %v, want refused naming %s (%s)", err, tt.path, tt.want)
			}
			good := tt.obj(windows("0 3 * * 0", "Europe/Paris"))
			if err := global.Client.Create(ctx, good); err != nil {
				t.Fatalf("create with good windows: %v", err)
			}
			t.Cleanup(func() { _ = global.Client.Delete(context.WithoutCancel(ctx), good) })
			// No controller runs here: plain updates do not conflict.
			bad := good.DeepCopyObject().(client.Object)
			switch o := bad.(type) {
			case *fleetv1.Site:
				o.Spec.MaintenanceWindows = windows(tt.schedule, tt.tz)
			case *fleetv1.Campaign:
				o.Spec.Strategy.MaintenanceWindows = windows(tt.schedule, tt.tz)
			}
			if err := global.Client.Update(ctx, bad); err == nil || !strings.Contains(err.Error(), tt.path) {
				t.Fatalf("update to a window that cannot open: got %v, want refused naming %s", err, tt.path)
			}
			good.SetLabels(map[string]string{"tier": "gold"})
			if err := global.Client.Update(ctx, good); err != nil {
				t.Fatalf("update leaving the windows alone: %v", err)
			}
		})
	}
}
