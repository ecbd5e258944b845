package setup

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/edgefleet/edgefleet/global-controller/artifactapi"
	"github.com/edgefleet/edgefleet/pkg/artifacts"
	"github.com/edgefleet/edgefleet/pkg/httpserver"
	"github.com/edgefleet/edgefleet/pkg/kubeauth"
	"github.com/edgefleet/edgefleet/pkg/mongodb"
)

// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// setupArtifactAPI opens the artifact store (starting the embedded FerretDB when no MongoDB URI
// is given) and adds the REST API server and the upload janitor to mgr. The returned function
// disconnects and stops the database once the manager has stopped. refs tells the store which
// releases reference an artifact, so that it refuses to delete those.
func setupArtifactAPI(ctx context.Context, mgr manager.Manager, cfg *rest.Config, opts Options, refs artifacts.References) (*artifacts.Store, func(), error) {
	log := ctrl.Log.WithName("artifacts")
	db := mongodb.External(opts.MongoURI)
	if opts.MongoURI == "" {
		var err error
		dir := filepath.Join(opts.DataDir, "ferretdb")
		if db, err = mongodb.StartEmbedded(dir, nil); err != nil {
			return nil, nil, err
		}
		log.Info("started embedded FerretDB", "dir", dir)
	}
	client, err := mongodb.Connect(ctx, db.URI)
	if err != nil {
		return nil, nil, errors.Join(err, db.Stop())
	}
	stop := func() {
		if err := errors.Join(client.Disconnect(context.Background()), db.Stop()); err != nil {
			log.Error(err, "stop the artifact store's database")
		}
	}
	store, err := artifacts.Open(ctx, client.Database(opts.MongoDatabase), artifacts.Options{UploadTTL: opts.UploadTTL, References: refs})
	if err != nil {
		stop()
		return nil, nil, fmt.Errorf("open artifact store: %w", err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		stop()
		return nil, nil, fmt.Errorf("client for token and access reviews: %w", err)
	}
	api := &artifactapi.Server{
		Store: store,
		Auth:  kubeauth.NewReviewer(kubeauth.Config{Client: cs, Group: "fleet.edgefleet.io", Resource: "artifacts"}),
		Log:   log,

		BodyReadTimeout: opts.APIBodyReadTimeout,
	}
	if opts.APITLSCertFile == "" {
		log.Info("the artifact API serves plain HTTP: give --api-tls-cert-file/--api-tls-key-file unless it is only reachable on loopback")
	}
	srv := &httpserver.Server{Name: "artifact API", Addr: opts.APIAddr, CertFile: opts.APITLSCertFile, KeyFile: opts.APITLSKeyFile, Handler: api.Handler(), Log: log}
	janitor := manager.RunnableFunc(func(ctx context.Context) error {
		t := time.NewTicker(opts.JanitorInterval)
		defer t.Stop()
		for {
			if n, err := store.ExpireUploads(ctx); err != nil {
				log.Error(err, "expire upload sessions")
			} else if n > 0 {
				log.Info("expired upload sessions", "count", n)
			}
			select {
			case <-ctx.Done():
				return nil
			case <-t.C:
			}
		}
	})
	if err := mgr.AddReadyzCheck("artifact-api", srv.Ready); err != nil {
		stop()
		return nil, nil, fmt.Errorf("add artifact API ready check: %w", err)
	}
	for _, r := range []manager.Runnable{srv, janitor} {
		if err := mgr.Add(r); err != nil {
			stop()
			return nil, nil, fmt.Errorf("add artifact API to the manager: %w", err)
		}
	}
	return store, stop, nil
}
