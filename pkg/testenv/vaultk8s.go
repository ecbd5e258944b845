package testenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	vaultapi "github.com/hashicorp/vault/api"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// KubernetesAuth enables Vault's Kubernetes auth method at auth/kubernetes, reviewing the
// ServiceAccount tokens of cp's API server as an operator sets it up (docs/security.md): the
// ServiceAccount vault-reviewer in ns, bound to system:auth-delegator, whose token (made by the
// TokenRequest API, 1 hour) Vault keeps, and the API server's CA.
func (v *Vault) KubernetesAuth(ctx context.Context, cp *ControlPlane, ns string) error {
	kube, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		return fmt.Errorf("vault kubernetes auth: %w", err)
	}
	reviewer, err := serviceAccountToken(ctx, kube, ns, "vault-reviewer")
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

// ServiceAccountTokenFile creates the ServiceAccount ns/name unless it exists, and writes a
// token of it made by the TokenRequest API (1 hour) to the file name+".token" (mode 0600) in
// dir, as Kubernetes projects one into a pod; it returns the file.
func (cp *ControlPlane) ServiceAccountTokenFile(ctx context.Context, ns, name, dir string) (string, error) {
	token, err := cp.ServiceAccountToken(ctx, ns, name)
	if err != nil {
		return "", err
	}
	file := filepath.Join(dir, name+".token")
	if err := os.WriteFile(file, []byte(token), 0o600); err != nil {
		return "", fmt.Errorf("testenv %s: %w", cp.Name, err)
	}
	return file, nil
}

// ServiceAccountToken creates the ServiceAccount ns/name unless it exists and returns a token
// of it made by the TokenRequest API (1 hour).
func (cp *ControlPlane) ServiceAccountToken(ctx context.Context, ns, name string) (string, error) {
	kube, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		return "", fmt.Errorf("testenv %s: %w", cp.Name, err)
	}
	return serviceAccountToken(ctx, kube, ns, name)
}

// serviceAccountToken creates the ServiceAccount ns/name unless it exists and returns a token
// of it made by the TokenRequest API.
func serviceAccountToken(ctx context.Context, kube kubernetes.Interface, ns, name string) (string, error) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := kube.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("ServiceAccount %s/%s: %w", ns, name, err)
	}
	hour := int64(3600)
	tr, err := kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &hour},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("token of ServiceAccount %s/%s: %w", ns, name, err)
	}
	return tr.Status.Token, nil
}
