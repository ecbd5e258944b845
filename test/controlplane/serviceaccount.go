package controlplane

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

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
