package encryption

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/metadata"
)

// ReencryptFieldManager is the field manager of Reencrypt's writes.
const ReencryptFieldManager = "edgefleet-reencrypt"

// ReencryptPageSize is how many Secrets' metadata one of Reencrypt's list calls returns.
const ReencryptPageSize = 500

// Result counts the Secrets Reencrypt went through.
type Result struct {
	// Rewritten Secrets were stored again: the API server found them under a key other than
	// its current one (or in clear), or someone else wrote them since they were listed.
	Rewritten int
	// Current Secrets were under the current key already: the API server left them alone.
	Current int
}

// Reencrypt has the API server store every Secret of namespace (of all namespaces when
// empty) again under its current key, after a key rotation or after encryption was switched
// on: it sends each an empty merge patch, which the API server writes to etcd only when the
// Secret's stored form is stale (read with a provider other than the first, or for KMS v2
// under another key ID), so running it again rewrites nothing. It reads the Secrets' metadata
// only, never their data. A Secret deleted meanwhile is skipped; one that fails does not stop
// the others, and the errors come back together.
func Reencrypt(ctx context.Context, c metadata.Interface, namespace string) (Result, error) {
	secrets := c.Resource(corev1.SchemeGroupVersion.WithResource("secrets"))
	var (
		res  Result
		errs []error
	)
	opts := metav1.ListOptions{Limit: ReencryptPageSize}
	for {
		list, err := secrets.Namespace(namespace).List(ctx, opts)
		if apierrors.IsResourceExpired(err) {
			return res, errors.Join(append(errs, fmt.Errorf("list Secrets: %w (the listing took longer than etcd keeps its history: run again, Secrets rewritten already are left alone)", err))...)
		}
		if err != nil {
			return res, errors.Join(append(errs, fmt.Errorf("list Secrets: %w", err))...)
		}
		for i := range list.Items {
			if err := ctx.Err(); err != nil {
				return res, errors.Join(append(errs, err)...)
			}
			listed := &list.Items[i]
			stored, err := secrets.Namespace(listed.Namespace).Patch(ctx, listed.Name, types.MergePatchType, []byte("{}"),
				metav1.PatchOptions{FieldManager: ReencryptFieldManager})
			switch {
			case apierrors.IsNotFound(err):
			case err != nil:
				errs = append(errs, fmt.Errorf("rewrite Secret %s/%s: %w", listed.Namespace, listed.Name, err))
			case stored.ResourceVersion != listed.ResourceVersion:
				res.Rewritten++
			default:
				res.Current++
			}
		}
		if list.Continue == "" {
			return res, errors.Join(errs...)
		}
		opts.Continue = list.Continue
	}
}
