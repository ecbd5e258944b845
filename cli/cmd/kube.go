package cmd

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
)

// The fleet kinds' resources, as the API server names them.
const (
	sites     = "sites"
	hosts     = "hosts"
	releases  = "releases"
	campaigns = "campaigns"
)

// Accept headers asking the API server to draw a table from a kind's printer columns, or for
// the objects' metadata alone.
const (
	acceptTable    = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
	acceptMetadata = "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io,application/json"
)

// kube is a client of the global cluster, working in one namespace.
type kube struct {
	client.Client
	// fleet is a REST client of the fleet.edgefleet.io group, for what the typed client does
	// not ask for: tables and metadata-only lists.
	fleet     rest.Interface
	scheme    *runtime.Scheme
	namespace string
}

// kube returns a client of the global cluster in the namespace of --namespace, or else of the
// kubeconfig context.
func (g *globals) kube() (*kube, error) {
	loader := g.loader()
	cfg, err := loader.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig: %w", err)
	}
	ns := g.namespace
	if ns == "" {
		if ns, _, err = loader.Namespace(); err != nil {
			return nil, fmt.Errorf("namespace of the kubeconfig context: %w", err)
		}
	}
	s := runtime.NewScheme()
	if err := fleetv1.AddToScheme(s); err != nil {
		return nil, err
	}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("HTTP client of %s: %w", cfg.Host, err)
	}
	c, err := client.New(cfg, client.Options{Scheme: s, HTTPClient: hc})
	if err != nil {
		return nil, fmt.Errorf("client of %s: %w", cfg.Host, err)
	}
	fc := rest.CopyConfig(cfg)
	fc.APIPath, fc.GroupVersion = "/apis", &fleetv1.GroupVersion
	fc.NegotiatedSerializer = serializer.NewCodecFactory(s).WithoutConversion()
	fleet, err := rest.RESTClientForConfigAndClient(fc, hc)
	if err != nil {
		return nil, fmt.Errorf("client of %s: %w", cfg.Host, err)
	}
	return &kube{Client: c, fleet: fleet, scheme: s, namespace: ns}, nil
}

// get reads the named object of the namespace; a missing one is an error that says which.
func (k *kube) get(ctx context.Context, name string, obj client.Object) error {
	err := k.Get(ctx, types.NamespacedName{Namespace: k.namespace, Name: name}, obj)
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("%s %q not found in namespace %q", k.kindOf(obj), name, k.namespace)
	}
	if err != nil {
		return fmt.Errorf("get %s %s/%s: %w", k.kindOf(obj), k.namespace, name, err)
	}
	return nil
}

// kindOf names obj's kind in lower case, for messages.
func (k *kube) kindOf(obj runtime.Object) string {
	gvk, err := apiutil.GVKForObject(obj, k.scheme)
	if err != nil {
		return fmt.Sprintf("%T", obj)
	}
	return strings.ToLower(gvk.Kind)
}

// withKind sets obj's apiVersion and kind, which the typed client leaves empty, so that it
// prints as kubectl prints it.
func (k *kube) withKind(obj runtime.Object) runtime.Object {
	if gvk, err := apiutil.GVKForObject(obj, k.scheme); err == nil {
		obj.GetObjectKind().SetGroupVersionKind(gvk)
	}
	return obj
}

// names lists the names of resource's objects in the namespace.
func (k *kube) names(ctx context.Context, resource string) ([]string, error) {
	raw, err := k.request(resource, listOptions{}).SetHeader("Accept", acceptMetadata).DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", resource, err)
	}
	list := &metav1.PartialObjectMetadataList{}
	if err := json.Unmarshal(raw, list); err != nil {
		return nil, fmt.Errorf("list %s: %w", resource, err)
	}
	names := make([]string, 0, len(list.Items))
	for _, m := range list.Items {
		names = append(names, m.Name)
	}
	return names, nil
}

// printObjects prints, in the structured formats, the objects a describe tree is drawn from
// as a kubectl List, and reports whether it did.
func (k *kube) printObjects(p printer, w io.Writer, objs ...runtime.Object) (bool, error) {
	if !p.structured() {
		return false, nil
	}
	list := &metav1.List{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "List"}}
	for _, o := range objs {
		list.Items = append(list.Items, runtime.RawExtension{Object: k.withKind(o)})
	}
	return p.data(w, list)
}
