package artifactapi_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/go-logr/logr"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"

	"github.com/edgefleet/edgefleet/global-controller/artifactapi"
	"github.com/edgefleet/edgefleet/global-controller/reconcilers/release"
	"github.com/edgefleet/edgefleet/pkg/artifacts"
	"github.com/edgefleet/edgefleet/pkg/kubeauth"
	"github.com/edgefleet/edgefleet/pkg/mongodb"
	"github.com/edgefleet/edgefleet/test/controlplane"
	"github.com/edgefleet/edgefleet/test/testutil"
)

// The suite runs the API over the real stack: a global control plane answering TokenReview and
// SubjectAccessReview with the ClusterRoles shipped in deploy/, the store on an embedded
// FerretDB, and an HTTP server.
var (
	global   *controlplane.ControlPlane
	server   *httptest.Server
	store    *artifacts.Store
	auth     *kubeauth.Reviewer
	database *mongo.Database
	// tokens of service accounts bound to edgefleet-fleet-admin, edgefleet-fleet-viewer, nothing.
	adminToken, viewerToken, nobodyToken string
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	ctx := context.Background()
	fail := func(err error) int { fmt.Fprintln(os.Stderr, err); return 1 }
	var err error
	global, err = controlplane.Start(controlplane.Options{Name: "global", InstallCRDs: true})
	if err != nil {
		return fail(err)
	}
	defer func() { _ = global.Stop() }()
	dir, err := os.MkdirTemp("", "edgefleet-artifactapi-test-")
	if err != nil {
		return fail(err)
	}
	defer os.RemoveAll(dir)
	db, err := mongodb.StartEmbedded(filepath.Join(dir, "db"), nil)
	if err != nil {
		return fail(err)
	}
	defer func() { _ = db.Stop() }()
	mc, err := mongodb.Connect(ctx, db.URI)
	if err != nil {
		return fail(err)
	}
	defer func() { _ = mc.Disconnect(ctx) }()
	database = mc.Database("edgefleet")
	if store, err = artifacts.Open(ctx, database, artifacts.Options{References: release.References{Reader: global.Client}}); err != nil {
		return fail(err)
	}
	cs, err := kubernetes.NewForConfig(global.Config)
	if err != nil {
		return fail(err)
	}
	if adminToken, viewerToken, nobodyToken, err = setUpUsers(ctx, cs); err != nil {
		return fail(err)
	}
	auth = kubeauth.NewReviewer(kubeauth.Config{Client: cs, Group: "fleet.edgefleet.io", Resource: "artifacts"})
	api := &artifactapi.Server{Store: store, Auth: auth, Log: logr.Discard()}
	server = httptest.NewServer(api.Handler())
	defer server.Close()
	return m.Run()
}

// setUpUsers applies the shipped ClusterRoles and returns tokens of three service accounts.
func setUpUsers(ctx context.Context, cs kubernetes.Interface) (admin, viewer, nobody string, err error) {
	root, err := testutil.RepoRoot()
	if err != nil {
		return "", "", "", err
	}
	f, err := os.Open(filepath.Join(root, "deploy", "rbac", "global-controller", "roles.yaml"))
	if err != nil {
		return "", "", "", err
	}
	defer f.Close()
	dec := yaml.NewYAMLOrJSONDecoder(f, 4096)
	for {
		var role rbacv1.ClusterRole
		if err := dec.Decode(&role); err != nil {
			break
		}
		if _, err := cs.RbacV1().ClusterRoles().Create(ctx, &role, metav1.CreateOptions{}); err != nil {
			return "", "", "", fmt.Errorf("apply ClusterRole %s: %w", role.Name, err)
		}
	}
	const ns = "default"
	tokens := map[string]string{}
	for name, role := range map[string]string{"admin": "edgefleet-fleet-admin", "viewer": "edgefleet-fleet-viewer", "nobody": ""} {
		if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			return "", "", "", err
		}
		if role != "" {
			b := &rbacv1.ClusterRoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: "test-" + name},
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
				Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: ns}},
			}
			if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, b, metav1.CreateOptions{}); err != nil {
				return "", "", "", err
			}
		}
		tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authnv1.TokenRequest{}, metav1.CreateOptions{})
		if err != nil {
			return "", "", "", fmt.Errorf("token for %s: %w", name, err)
		}
		tokens[name] = tr.Status.Token
	}
	return tokens["admin"], tokens["viewer"], tokens["nobody"], nil
}

// blobCount counts the stored blobs with this digest, straight from the database.
func blobCount(t *testing.T, digest string) (int64, error) {
	t.Helper()
	return database.Collection("blobs.files").CountDocuments(t.Context(), bson.D{{Key: "filename", Value: digest}})
}
