package cmd

import (
	"fmt"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
)

func newSiteRotateKeyCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "rotate-key NAME",
		Short: "Ask for one more rotation of the key the site's application cluster encrypts Secrets with",
		Long: `Raises the Site's spec.cluster.rotations.secretEncryptionKey by one. The site's Binary
Provisioning Agent adds the new key to every API server (one at a time), makes it the one that
encrypts, stores every Secret again under it, then drops the old key; the API servers serve
throughout. A rotation asked for cannot be taken back. edgefleet site describe NAME shows it
(SecretEncryption under Bootstrap). The count is written with the Site's resourceVersion, so two
people asking at once ask for two rotations, not one.`,
		Example:           "  edgefleet site rotate-key store-0042 -n fleet",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: g.completeArg(sites),
		RunE: func(cmd *cobra.Command, args []string) error {
			k, err := g.kube()
			if err != nil {
				return err
			}
			site := &fleetv1.Site{}
			if err := k.get(cmd.Context(), args[0], site); err != nil {
				return err
			}
			if site.Spec.Cluster == nil {
				return fmt.Errorf("site %s/%s has no spec.cluster: it has no application cluster whose key could be rotated", k.namespace, site.Name)
			}
			before := site.DeepCopy()
			if site.Spec.Cluster.Rotations == nil {
				site.Spec.Cluster.Rotations = &sitev1.ClusterRotations{}
			}
			site.Spec.Cluster.Rotations.SecretEncryptionKey++
			if err := k.Patch(cmd.Context(), site, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
				return fmt.Errorf("ask site %s/%s for another key rotation: %w (run again to ask on the Site as it is now)", k.namespace, site.Name, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "site %s/%s: Secret encryption key rotation %d asked; edgefleet site describe %s shows it\n",
				k.namespace, site.Name, site.Spec.Cluster.Rotations.SecretEncryptionKey, site.Name)
			return nil
		},
	}
}
