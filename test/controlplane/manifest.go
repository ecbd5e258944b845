package controlplane

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/edgefleet/edgefleet/test/testutil"
)

// ApplyManifest creates the objects of a manifest of the repository (rel to its root, e.g.
// deploy/rbac/global-controller/roles.yaml) as shipped, each in its namespace, created when
// missing; objects that exist already are kept.
func (cp *ControlPlane) ApplyManifest(ctx context.Context, rel string) error {
	objs, err := manifestObjects(rel)
	if err != nil {
		return fmt.Errorf("testenv %s: %w", cp.Name, err)
	}
	for _, o := range objs {
		if ns := o.GetNamespace(); ns != "" {
			if err := client.IgnoreAlreadyExists(cp.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})); err != nil {
				return fmt.Errorf("testenv %s: %s: create namespace %s: %w", cp.Name, rel, ns, err)
			}
		}
	}
	for _, o := range objs {
		if err := client.IgnoreAlreadyExists(cp.Client.Create(ctx, o)); err != nil {
			return fmt.Errorf("testenv %s: %s: create %s %s: %w", cp.Name, rel, o.GetObjectKind().GroupVersionKind().Kind, o.GetName(), err)
		}
	}
	return nil
}

// manifestObjects reads the objects of a manifest of the repository.
func manifestObjects(rel string) ([]client.Object, error) {
	root, err := testutil.RepoRoot()
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
	if err != nil {
		return nil, fmt.Errorf("read manifest: %w", err)
	}
	var objs []client.Object
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, fmt.Errorf("decode %s: %w", rel, err)
		}
		if len(u.Object) == 0 {
			continue
		}
		objs = append(objs, u)
	}
	if len(objs) == 0 {
		return nil, fmt.Errorf("%s holds no objects", rel)
	}
	return objs, nil
}
