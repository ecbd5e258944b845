package setup

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/edgefleet/edgefleet/global-controller/artifactapi"
	"github.com/edgefleet/edgefleet/global-controller/enrollment"
	"github.com/edgefleet/edgefleet/global-controller/kubeconfigapi"
	"github.com/edgefleet/edgefleet/global-controller/problem"
	"github.com/edgefleet/edgefleet/global-controller/sitelogapi"
	"github.com/edgefleet/edgefleet/pkg/artifacts"
	"github.com/edgefleet/edgefleet/pkg/httpserver"
	"github.com/edgefleet/edgefleet/pkg/kubeauth"
	"github.com/edgefleet/edgefleet/pkg/mongodb"
	"github.com/edgefleet/edgefleet/pkg/recorder"
)

// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// serveAPI serves, beside the artifact API, site enrollment (enrollment.EnrollPath and the
// tokens under enrollment.TokensPrefix), cluster users' kubeconfigs (kubeconfigapi.Path) and
// site components' logs (sitelogapi.Path), the more specific patterns under that prefix; the
// other methods of those two paths are answered 405.
func serveAPI(api http.Handler, enroll *enrollment.Server, kubeconfigs, logs http.Handler) http.Handler {
	mux := http.NewServeMux()
	h := enroll.Handler()
	mux.Handle(enrollment.EnrollPath, h)
	mux.Handle(enrollment.TokensPrefix, h)
	mux.Handle(kubeconfigapi.Path, kubeconfigs)
	mux.Handle(kubeconfigapi.Route, problem.MethodNotAllowed(http.MethodPost))
	mux.Handle(sitelogapi.Path, logs)
	mux.Handle(sitelogapi.Route, problem.MethodNotAllowed(http.MethodGet, http.MethodHead))
	mux.Handle("/", api)
	return mux
}

// setupArtifactAPI opens the artifact store (starting the embedded FerretDB when no MongoDB URI
// is given) and adds the REST API server and the upload janitor to mgr. The returned function
// disconnects and stops the database once the manager has stopped. refs tells the store which
// releases reference an artifact, so that it refuses to delete those; auth checks callers.
// With opts.UI the same server serves the web UI. deps give the sites' clients and Vault.
func setupArtifactAPI(ctx context.Context, mgr manager.Manager, opts Options, refs artifacts.References, auth *kubeauth.Reviewer, deps Dependencies) (*artifacts.Store, func(), error) {
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
	// The embedded database's size on disk, for the metrics and the janitor's compaction (an
	// external MongoDB gives dropped collections' space back by itself), and its volume's free
	// space, for the space check of new uploads (an external MongoDB's disk is not to be seen).
	var disk, free func() (int64, error)
	if opts.MongoURI == "" {
		disk = func() (int64, error) { return db.DiskBytes(opts.MongoDatabase) }
		free = db.FreeBytes
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
	store, err := artifacts.Open(ctx, client.Database(opts.MongoDatabase), artifacts.Options{
		UploadTTL: opts.UploadTTL, References: refs, Budget: artifacts.NewBudget(opts.APITransferMemory),
		MaxArtifactSize: opts.MaxArtifactSize, FreeSpace: free, SpaceReserve: opts.ArtifactSpaceReserve,
	})
	if err != nil {
		stop()
		return nil, nil, fmt.Errorf("open artifact store: %w", err)
	}
	if err := artifacts.RegisterMetrics(metrics.Registry, store, disk); err != nil {
		stop()
		return nil, nil, fmt.Errorf("register artifact store metrics: %w", err)
	}
	api := &artifactapi.Server{
		Store: store,
		Auth:  auth,
		Log:   log,

		BodyReadTimeout: opts.APIBodyReadTimeout,
	}
	if opts.APITLSCertFile == "" {
		log.Info("the artifact API serves plain HTTP: give --api-tls-cert-file/--api-tls-key-file unless it is only reachable on loopback")
	}
	kubeconfigs := &kubeconfigapi.Server{
		Auth: auth, Reader: mgr.GetClient(), Sites: deps.Sites, Recorder: recorder.Bounded(mgr.GetEventRecorder("kubeconfig-api")),
		Clock: clock.RealClock{}, MaxTTL: opts.MaxKubeconfigTTL,
	}
	logs := &sitelogapi.Server{Auth: auth, Reader: mgr.GetClient(), Sites: deps.Sites, Clock: clock.RealClock{}, Wait: opts.SiteLogWait}
	handler := serveAPI(api.Handler(), enrollmentServer(mgr, opts, auth, deps.Vault), kubeconfigs.Handler(), logs.Handler())
	if opts.UI {
		web, err := UI(ctx, mgr, auth, store, kubeconfigs, logs)
		if err != nil {
			stop()
			return nil, nil, err
		}
		handler = withUI(handler, web)
	}
	srv := &httpserver.Server{Name: "artifact API", Addr: opts.APIAddr, CertFile: opts.APITLSCertFile, KeyFile: opts.APITLSKeyFile, Handler: handler, Log: log}
	janitor := manager.RunnableFunc(func(ctx context.Context) error {
		t := time.NewTicker(opts.JanitorInterval)
		defer t.Stop()
		for {
			if n, err := store.ExpireUploads(ctx); err != nil {
				log.Error(err, "expire upload sessions")
			} else if n > 0 {
				log.Info("expired upload sessions", "count", n)
			}
			if n, err := enrollment.Prune(ctx, mgr.GetAPIReader(), mgr.GetClient(), time.Now(), opts.EnrollmentTokenRetention); err != nil {
				log.Error(err, "prune enrollment token records")
			} else if n > 0 {
				log.Info("pruned enrollment token records", "count", n)
			}
			if disk != nil {
				if err := compactIfWasteful(ctx, store, disk, log); err != nil {
					log.Error(err, "compact the embedded database")
				}
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

// compactSlack is how much more than twice what the store holds the embedded database's files
// may take before the janitor compacts it: FerretDB keeps documents as JSON with binary data
// as base64 (4/3 of the bytes), and a compaction rewrites the whole file (see Store.Compact).
const compactSlack = 64 << 20

// compactIfWasteful compacts the embedded database when its files take more than twice the
// bytes of the blobs and the upload sessions, plus compactSlack: the space of deleted artifacts
// and expired uploads goes back to the file system.
func compactIfWasteful(ctx context.Context, store *artifacts.Store, disk func() (int64, error), log logr.Logger) error {
	onDisk, err := disk()
	if err != nil {
		return err
	}
	live, err := store.LiveBytes(ctx)
	if err != nil {
		return err
	}
	uploading, err := store.UploadingBytes(ctx)
	if err != nil {
		return err
	}
	if onDisk <= 2*(live+uploading)+compactSlack {
		return nil
	}
	if err := store.Compact(ctx); err != nil {
		return err
	}
	after, err := disk()
	if err != nil {
		return err
	}
	if after >= onDisk {
		// A log line says what happened: SQLite keeps the rewritten pages in its write-ahead
		// log until a checkpoint, so the files may shrink only at a later write.
		log.Info("asked the embedded database to compact; its files have not shrunk yet (the write-ahead log holds the rewritten pages until its next checkpoint)", "before", onDisk, "after", after, "live", live, "uploading", uploading)
		return nil
	}
	log.Info("compacted the embedded database", "before", onDisk, "after", after, "freed", onDisk-after, "live", live, "uploading", uploading)
	return nil
}
