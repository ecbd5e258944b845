// Package deploy_test checks the kustomize bases of deploy/ against a real API server.
package deploy_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/edgefleet/edgefleet/test/controlplane"
	"github.com/edgefleet/edgefleet/test/testutil"
)

// TestSiteBasesServerDryRun applies deploy/local-controller, deploy/bpa and the global
// controller's access (deploy/rbac/site) with a server-side
// dry run on a real API server that has Cluster-API's and Metal3's CRDs, as a site cluster has:
// the server validates every object (schemas, RBAC rules, the CRDs themselves) and stores none.
func TestSiteBasesServerDryRun(t *testing.T) {
	cp := controlplane.StartT(t, controlplane.Options{Name: "deploy", ClusterAPICRDs: true, Metal3CRDs: true})
	root, err := testutil.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	kc, err := cp.AdminKubeconfig()
	if err != nil {
		t.Fatal(err)
	}
	// A dry run creates nothing, so the namespaced objects would find no namespace: they are made
	// for real first (dry-run of the Namespaces themselves is still checked below).
	for _, ns := range []string{"edgefleet-system", "edgefleet-hosts", "edgefleet-kms"} {
		if err := cp.Client.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	kubeconfig := filepath.Join(t.TempDir(), "admin.kubeconfig")
	if err := os.WriteFile(kubeconfig, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		base string
		want []string
	}{
		{"deploy/local-controller", []string{
			"namespace/edgefleet-system",
			"customresourcedefinition.apiextensions.k8s.io/applicationclusters.site.edgefleet.io",
			"customresourcedefinition.apiextensions.k8s.io/artifactsets.site.edgefleet.io",
			"serviceaccount/edgefleet-local-controller",
			"clusterrole.rbac.authorization.k8s.io/edgefleet-local-controller",
			"role.rbac.authorization.k8s.io/edgefleet-local-controller",
			"clusterrolebinding.rbac.authorization.k8s.io/edgefleet-local-controller",
			"rolebinding.rbac.authorization.k8s.io/edgefleet-local-controller",
			"persistentvolumeclaim/edgefleet-site-cache",
			"deployment.apps/edgefleet-local-controller",
		}},
		{"deploy/bpa", []string{
			"namespace/edgefleet-system",
			"namespace/edgefleet-kms",
			"customresourcedefinition.apiextensions.k8s.io/clustercredentialrequests.site.edgefleet.io",
			"serviceaccount/edgefleet-bpa",
			"clusterrole.rbac.authorization.k8s.io/edgefleet-bpa",
			"role.rbac.authorization.k8s.io/edgefleet-bpa",
			"clusterrolebinding.rbac.authorization.k8s.io/edgefleet-bpa",
			"rolebinding.rbac.authorization.k8s.io/edgefleet-bpa",
			"deployment.apps/edgefleet-bpa",
		}},
		{"deploy/rbac/site", []string{
			"namespace/edgefleet-hosts",
			"serviceaccount/edgefleet-global",
			"role.rbac.authorization.k8s.io/edgefleet-global",
			"rolebinding.rbac.authorization.k8s.io/edgefleet-global",
		}},
	} {
		t.Run(filepath.Base(tc.base), func(t *testing.T) {
			rendered := kubectl(t, root, "kustomize", tc.base)
			if strings.Contains(rendered, "\nkind: Secret\n") {
				t.Errorf("%s holds a Secret; a base ships no secrets", tc.base)
			}
			out := kubectl(t, root, "--kubeconfig", kubeconfig, "apply", "--server-side", "-k", tc.base, "--dry-run=server")
			for _, obj := range tc.want {
				if !strings.Contains(out, obj+" serverside-applied (server dry run)") {
					t.Errorf("dry run of %s: no %s in\n%s", tc.base, obj, out)
				}
			}
		})
	}
}

func kubectl(t *testing.T, root string, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), filepath.Join(root, "bin", "kubectl"), args...)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}
