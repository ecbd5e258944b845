package controlplane

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
)

// GlobalUser is the user the global controller is known as on the site control planes; the
// RoleBinding of deploy/rbac/site grants its access to this user.
const GlobalUser = "edgefleet-global"

// SiteAccessManifest is the manifest, relative to the repository root, that every site applies to
// grant the global controller its access.
const SiteAccessManifest = "deploy/rbac/site/global-access.yaml"

// SiteKubeconfig prepares this control plane to stand for a site and returns the kubeconfig the
// global controller gets for it: user GlobalUser with the least privilege a real site grants —
// the objects of SiteAccessManifest (read the local controller's info ConfigMap, write the
// ApplicationCluster in namespace edgefleet-system and the BMC Secrets in edgefleet-hosts),
// applied as shipped (ApplyManifest).
func (cp *ControlPlane) SiteKubeconfig(ctx context.Context) ([]byte, error) {
	if err := cp.ApplyManifest(ctx, SiteAccessManifest); err != nil {
		return nil, err
	}
	return cp.Kubeconfig(GlobalUser)
}

// PublishLocalControllerVersion writes the info ConfigMap a local controller publishes.
func (cp *ControlPlane) PublishLocalControllerVersion(ctx context.Context, version string) error {
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: sitev1.InfoNamespace, Name: sitev1.InfoConfigMapName},
		Data:       map[string]string{sitev1.InfoVersionKey: version},
	}
	if err := cp.Client.Create(ctx, cm); err != nil {
		return fmt.Errorf("testenv %s: publish local controller version: %w", cp.Name, err)
	}
	return nil
}
