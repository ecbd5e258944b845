package setup

import (
	"crypto/rand"
	"time"

	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/edgefleet/edgefleet/global-controller/enrollment"
	"github.com/edgefleet/edgefleet/pkg/kubeauth"
	"github.com/edgefleet/edgefleet/pkg/recorder"
	"github.com/edgefleet/edgefleet/pkg/siteclient"
	"github.com/edgefleet/edgefleet/pkg/vaultref"
	"github.com/edgefleet/edgefleet/pkg/version"
)

// enrollmentServer issues sites' enrollment tokens and enrolls their machines, on the artifact
// API's server (same address, TLS and reviewer).
func enrollmentServer(mgr manager.Manager, opts Options, auth *kubeauth.Reviewer, vault vaultref.Store) *enrollment.Server {
	return &enrollment.Server{
		Vault:       vault,
		Client:      mgr.GetClient(),
		Reader:      mgr.GetAPIReader(),
		Sites:       mgr.GetClient(),
		Auth:        auth,
		Access:      enrollment.SelfReviews{Timeout: opts.SiteTimeout, UserAgent: "edgefleet-global-controller/" + version.Version},
		Recorder:    recorder.Bounded(mgr.GetEventRecorder("enrollment")),
		Log:         ctrl.Log.WithName("enrollment"),
		Clock:       clock.RealClock{},
		Random:      rand.Reader,
		DefaultTTL:  opts.EnrollmentTokenTTL,
		MaxTTL:      opts.EnrollmentTokenMaxTTL,
		Addresses:   siteclient.AddressPolicy{Allowed: opts.EnrollmentAllowedNetworks},
		MaxFailures: opts.EnrollmentTokenMaxFailures,
		// A request reads and writes a few objects of the global cluster and asks the site a
		// few reviews, each of which --site-timeout bounds.
		Timeout: opts.SiteTimeout + 20*time.Second,
	}
}
