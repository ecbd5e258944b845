package testvault

import (
	"context"
	"fmt"
	"time"

	vaultapi "github.com/hashicorp/vault/api"

	"github.com/edgefleet/edgefleet/test/controlplane"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// KubernetesAuth enables Vault's Kubernetes auth method at auth/kubernetes, reviewing the
// ServiceAccount tokens of cp's API server as an operator sets it up (docs/security.md): the
// ServiceAccount vault-reviewer in ns, bound to system:auth-delegator, whose token (made by the
// TokenRequest API, 1 hour) Vault keeps, and the API server's CA.
func (v *Vault) KubernetesAuth(ctx context.Context, cp *controlplane.ControlPlane, ns string) error {
	kube, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		return fmt.Errorf("vault kubernetes auth: %w", err)
	}
	reviewer, err := cp.ServiceAccountToken(ctx, ns, "vault-reviewer")
	if err != nil {
		return err
	}
	if _, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "vault-reviewer-" + ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:auth-delegator"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "vault-reviewer"}},
	}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("vault kubernetes auth: bind the reviewer: %w", err)
	}
	if err := v.Client.Sys().EnableAuthWithOptionsWithContext(ctx, "kubernetes", &vaultapi.EnableAuthOptions{Type: "kubernetes"}); err != nil {
		return fmt.Errorf("vault kubernetes auth: enable: %w", err)
	}
	if _, err := v.Client.Logical().WriteWithContext(ctx, "auth/kubernetes/config", map[string]any{
		"kubernetes_host":    cp.Config.Host,
		"kubernetes_ca_cert": string(cp.Config.CAData),
		"token_reviewer_jwt": reviewer,
	}); err != nil {
		return fmt.Errorf("vault kubernetes auth: configure: %w", err)
	}
	return nil
}

// KubernetesRole writes the policy named policy (hcl) and the role of the Kubernetes auth
// method named role, bound to the ServiceAccount ns/serviceAccount, giving tokens of that
// policy alone that live ttl and can be renewed up to maxTTL.
func (v *Vault) KubernetesRole(ctx context.Context, role, ns, serviceAccount, policy, hcl string, ttl, maxTTL time.Duration) error {
	if err := v.Client.Sys().PutPolicyWithContext(ctx, policy, hcl); err != nil {
		return fmt.Errorf("vault: policy %s: %w", policy, err)
	}
	if _, err := v.Client.Logical().WriteWithContext(ctx, "auth/kubernetes/role/"+role, map[string]any{
		"bound_service_account_names":      serviceAccount,
		"bound_service_account_namespaces": ns,
		"token_policies":                   policy,
		"token_ttl":                        ttl.String(),
		"token_max_ttl":                    maxTTL.String(),
	}); err != nil {
		return fmt.Errorf("vault: kubernetes role %s: %w", role, err)
	}
	return nil
}
