package setup

import (
	"context"
	"fmt"
	"net/http"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/edgefleet/edgefleet/global-controller/ui"
	"github.com/edgefleet/edgefleet/pkg/kubeauth"
	"github.com/edgefleet/edgefleet/pkg/recorder"
)

// UI returns the web UI's handler: pages read the manager's cache, live pages follow its
// informers, users are checked by auth; store (nil: none) is the artifact store the releases
// page shows; kubeconfigs (nil: none) issues cluster users' kubeconfigs from the site page; logs
// (nil: none) reads site components' logs for its Logs panel. The controller serves it on the
// artifact API's server;
// hack/bench/ui measures it.
func UI(ctx context.Context, mgr manager.Manager, auth *kubeauth.Reviewer, store ui.ArtifactStore, kubeconfigs ui.Kubeconfigs, logs ui.SiteLogs) (http.Handler, error) {
	hub := ui.NewHub()
	if err := hub.Watch(ctx, mgr.GetCache()); err != nil {
		return nil, err
	}
	srv, err := ui.New(ui.Config{
		Cache:     mgr.GetCache(),
		Events:    mgr.GetAPIReader(),
		Campaigns: mgr.GetClient(),
		Recorder:  recorder.Bounded(mgr.GetEventRecorder("web-ui")),
		Auth:      auth,
		Changes:   hub,
		Log:       ctrl.Log.WithName("ui"),

		Artifacts:   store,
		Rules:       ui.NewRulesReviewer(mgr.GetConfig()),
		Kubeconfigs: kubeconfigs,
		Logs:        logs,
	})
	if err != nil {
		return nil, fmt.Errorf("set up the web UI: %w", err)
	}
	return srv.Handler(), nil
}

// withUI serves the web UI under ui.Prefix and api elsewhere; / leads to the UI.
func withUI(api, web http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle(ui.Prefix, web)
	mux.Handle("GET /{$}", http.RedirectHandler(ui.Prefix, http.StatusFound))
	mux.Handle("/", api)
	return mux
}
