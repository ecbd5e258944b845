package cmd

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/client-go/rest"
)

// newObjectListCmd is the list verb of resource. fields, when not nil, turns the verb's own
// flags into a field selector (allNamespaces: for -A).
func newObjectListCmd(g *globals, resource, example string, fields func(ctx context.Context, k *kube, allNamespaces bool) (string, error)) *cobra.Command {
	var o listOptions
	c := &cobra.Command{
		Use:     "list",
		Short:   "List " + resource + ": the API server's columns (-o wide: more of them), or the objects (-o json|yaml|jsonpath=...)",
		Example: example,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			k, err := g.kube()
			if err != nil {
				return err
			}
			if fields != nil {
				if o.fields, err = fields(cmd.Context(), k, o.allNamespaces); err != nil {
					return err
				}
			}
			return k.list(cmd.Context(), g.out, cmd.OutOrStdout(), cmd.ErrOrStderr(), resource, o)
		},
	}
	c.Flags().BoolVarP(&o.allNamespaces, "all-namespaces", "A", false, "List every namespace")
	c.Flags().StringVarP(&o.labels, "selector", "l", "", "Label selector, e.g. region=eu-west,tier!=lab")
	return c
}

// listOptions select the objects a list shows.
type listOptions struct {
	// allNamespaces lists every namespace instead of the client's.
	allNamespaces bool
	// labels and fields are label and field selectors.
	labels, fields string
}

// request is a list request of resource.
func (k *kube) request(resource string, o listOptions) *rest.Request {
	req := k.fleet.Get().NamespaceIfScoped(k.namespace, !o.allNamespaces).Resource(resource)
	if o.labels != "" {
		req = req.Param("labelSelector", o.labels)
	}
	if o.fields != "" {
		req = req.Param("fieldSelector", o.fields)
	}
	return req
}

// list prints resource's objects: as the API server's table of the kind's printer columns
// (wide: the extra columns too), or as the list it returns in the structured formats.
func (k *kube) list(ctx context.Context, p printer, w, stderr io.Writer, resource string, o listOptions) error {
	if p.structured() {
		raw, err := k.request(resource, o).DoRaw(ctx)
		if err != nil {
			return fmt.Errorf("list %s: %w", resource, err)
		}
		var list any
		if err := json.Unmarshal(raw, &list); err != nil {
			return fmt.Errorf("list %s: %w", resource, err)
		}
		_, err = p.data(w, list)
		return err
	}
	raw, err := k.request(resource, o).SetHeader("Accept", acceptTable).DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("list %s: %w", resource, err)
	}
	table := &metav1.Table{}
	if err := json.Unmarshal(raw, table); err != nil {
		return fmt.Errorf("list %s: %w", resource, err)
	}
	if len(table.Rows) == 0 {
		where := fmt.Sprintf("in namespace %s", k.namespace)
		if o.allNamespaces {
			where = "in any namespace"
		}
		fmt.Fprintf(stderr, "No %s found %s.\n", resource, where)
		return nil
	}
	if o.allNamespaces {
		// The namespace column comes from each row's object (metadata, by default).
		for i := range table.Rows {
			m := &metav1.PartialObjectMetadata{}
			if err := json.Unmarshal(table.Rows[i].Object.Raw, m); err != nil {
				return fmt.Errorf("list %s: row %d: %w", resource, i, err)
			}
			table.Rows[i].Object.Object = m
		}
	}
	return printers.NewTablePrinter(printers.PrintOptions{Wide: p.wide(), WithNamespace: o.allNamespaces}).PrintObj(table, w)
}
