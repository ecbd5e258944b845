package cmd

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
)

func newHostCmd(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:     "host",
		Aliases: []string{"hosts"},
		Short:   "The bare-metal hosts of the sites: list them (of one site with --site), describe one",
	}
	c.AddCommand(newHostListCmd(g), newHostDescribeCmd(g))
	return c
}

func newHostListCmd(g *globals) *cobra.Command {
	var site string
	c := newObjectListCmd(g, hosts, "  edgefleet host list -n fleet --site site-a -o wide", func(ctx context.Context, k *kube, allNamespaces bool) (string, error) {
		if site == "" {
			return "", nil
		}
		// A site that does not exist is a mistake, not a site without hosts (with -A, a site
		// of that name in no namespace).
		if !allNamespaces {
			if err := k.get(ctx, site, &fleetv1.Site{}); err != nil {
				return "", err
			}
		} else {
			named := &fleetv1.SiteList{}
			if err := k.List(ctx, named, client.MatchingFields{"metadata.name": site}); err != nil {
				return "", fmt.Errorf("list sites named %q: %w", site, err)
			}
			if len(named.Items) == 0 {
				return "", fmt.Errorf("site %q not found in any namespace", site)
			}
		}
		return "spec.siteRef.name=" + site, nil
	})
	c.Flags().StringVar(&site, "site", "", "Only the hosts of this site (the API server filters them)")
	_ = c.RegisterFlagCompletionFunc("site", g.completeNames(sites))
	return c
}

func newHostDescribeCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "describe NAME",
		Short: "Show a host as a tree: its provisioning state, conditions, site and node; problems first",
		Long: `Show a host as a tree: its role and provisioning state as its site last reported it, its
conditions that are not True (-o wide: all of them, and its boot MAC, BMC and address), its site
(Ready, or Unreachable, ...) and the node it is in the site's application cluster.
With -o json|yaml|jsonpath=..., the objects the tree is drawn from: a List of the Host and its Site.`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: g.completeArg(hosts),
		RunE: func(cmd *cobra.Command, args []string) error {
			k, err := g.kube()
			if err != nil {
				return err
			}
			h := &fleetv1.Host{}
			if err := k.get(cmd.Context(), args[0], h); err != nil {
				return err
			}
			objs := []runtime.Object{h}
			site := &fleetv1.Site{}
			siteLine := &row{name: "Site/" + h.Spec.SiteRef.Name, status: "NotFound", severity: problem, message: "the host's site does not exist"}
			err = k.Get(cmd.Context(), types.NamespacedName{Namespace: k.namespace, Name: h.Spec.SiteRef.Name}, site)
			switch {
			case err == nil:
				objs, siteLine = append(objs, site), siteRow(site)
			case !apierrors.IsNotFound(err):
				return err
			}
			if done, err := k.printObjects(g.out, cmd.OutOrStdout(), objs...); done {
				return err
			}
			r := hostTree(h, g.out.wide())
			r.add(siteLine)
			if h.Status.Cluster != nil {
				r.add(nodeRow(h))
			}
			return printTree(cmd.OutOrStdout(), r)
		},
	}
}
