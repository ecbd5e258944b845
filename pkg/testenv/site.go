package testenv

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
)

// GlobalUser is the user the global controller is known as on the site control planes.
const GlobalUser = "edgefleet-global"

// SiteKubeconfig prepares this control plane to stand for a site and returns the kubeconfig the
// global controller gets for it: user GlobalUser with least privilege — authenticated, and
// allowed to read only the local controller's info ConfigMap.
func (cp *ControlPlane) SiteKubeconfig(ctx context.Context) ([]byte, error) {
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: sitev1.InfoNamespace}},
		&rbacv1.Role{
			ObjectMeta: metav1.ObjectMeta{Namespace: sitev1.InfoNamespace, Name: GlobalUser},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"},
				ResourceNames: []string{sitev1.InfoConfigMapName}, Verbs: []string{"get"}}},
		},
		&rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: sitev1.InfoNamespace, Name: GlobalUser},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: GlobalUser},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: GlobalUser}},
		},
	}
	for _, o := range objs {
		if err := client.IgnoreAlreadyExists(cp.Client.Create(ctx, o)); err != nil {
			return nil, fmt.Errorf("testenv %s: prepare site access: %w", cp.Name, err)
		}
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
