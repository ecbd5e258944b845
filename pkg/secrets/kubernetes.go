package secrets

import (
	"context"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ManagedByLabel marks the Secrets the Kubernetes backend writes; Put refuses to overwrite a
// Secret without it, so a name that collides with someone else's Secret is an error rather
// than a silent takeover.
const ManagedByLabel = "secrets.edgefleet.io/store"

// Kubernetes is a Store over Secrets in one namespace.
type Kubernetes struct {
	client    client.Client
	namespace string
}

// NewKubernetes returns a Store keeping each secret as a Secret of that name in namespace.
// Pass a client that reads from the API server (not a cache over every Secret of the cluster).
func NewKubernetes(c client.Client, namespace string) *Kubernetes {
	return &Kubernetes{client: c, namespace: namespace}
}

// Put creates the Secret or replaces its data.
func (k *Kubernetes) Put(ctx context.Context, name string, data map[string][]byte) error {
	if err := ValidateName(name); err != nil {
		return err
	}
	if err := validateData(name, data); err != nil {
		return err
	}
	s := &corev1.Secret{}
	err := k.client.Get(ctx, client.ObjectKey{Namespace: k.namespace, Name: name}, s)
	switch {
	case apierrors.IsNotFound(err):
		s = &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: k.namespace, Name: name, Labels: map[string]string{ManagedByLabel: "true"}},
			Type:       corev1.SecretTypeOpaque,
			Data:       maps.Clone(data),
		}
		if err := k.client.Create(ctx, s); err != nil {
			return fmt.Errorf("kubernetes secrets: create %s/%s: %w", k.namespace, name, err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("kubernetes secrets: get %s/%s: %w", k.namespace, name, err)
	}
	if s.Labels[ManagedByLabel] != "true" {
		return fmt.Errorf("kubernetes secrets: Secret %s/%s exists and was not written by this store (no %s label)", k.namespace, name, ManagedByLabel)
	}
	s.Data = maps.Clone(data)
	s.StringData = nil
	if err := k.client.Update(ctx, s); err != nil {
		return fmt.Errorf("kubernetes secrets: update %s/%s: %w", k.namespace, name, err)
	}
	return nil
}

// Get reads the Secret's data.
func (k *Kubernetes) Get(ctx context.Context, name string) (map[string][]byte, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	s := &corev1.Secret{}
	err := k.client.Get(ctx, client.ObjectKey{Namespace: k.namespace, Name: name}, s)
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("kubernetes secrets: %s/%s: %w", k.namespace, name, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("kubernetes secrets: get %s/%s: %w", k.namespace, name, err)
	}
	if s.Labels[ManagedByLabel] != "true" {
		return nil, fmt.Errorf("kubernetes secrets: Secret %s/%s was not written by this store (no %s label)", k.namespace, name, ManagedByLabel)
	}
	return s.Data, nil
}

// Delete deletes the Secret; a missing one is not an error. A Secret this store did not write
// is left alone (an error).
func (k *Kubernetes) Delete(ctx context.Context, name string) error {
	if err := ValidateName(name); err != nil {
		return err
	}
	s := &corev1.Secret{}
	err := k.client.Get(ctx, client.ObjectKey{Namespace: k.namespace, Name: name}, s)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("kubernetes secrets: get %s/%s: %w", k.namespace, name, err)
	}
	if s.Labels[ManagedByLabel] != "true" {
		return fmt.Errorf("kubernetes secrets: Secret %s/%s was not written by this store (no %s label)", k.namespace, name, ManagedByLabel)
	}
	// The UID precondition keeps a Secret created under the same name since the read.
	if err := client.IgnoreNotFound(k.client.Delete(ctx, s, client.Preconditions{UID: &s.UID})); err != nil {
		return fmt.Errorf("kubernetes secrets: delete %s/%s: %w", k.namespace, name, err)
	}
	return nil
}
