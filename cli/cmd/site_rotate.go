package cmd

import (
	"fmt"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
)

// rotation is one count of a Site's spec.cluster.rotations, and the verb that raises it.
type rotation struct {
	use, short, long, example string
	// what is asked, in a sentence ("Secret encryption key rotation").
	what string
	// count is the field raised.
	count func(*sitev1.ClusterRotations) *int64
}

func newSiteRotateKeyCmd(g *globals) *cobra.Command {
	return newSiteRotateCmd(g, rotation{
		use:   "rotate-key NAME",
		short: "Ask for one more rotation of the key the site's application cluster encrypts Secrets with",
		long: `Raises the Site's spec.cluster.rotations.secretEncryptionKey by one. The site's Binary
Provisioning Agent adds the new key to every API server (one at a time), makes it the one that
encrypts, stores every Secret again under it, then drops the old key; the API servers serve
throughout. A rotation asked for cannot be taken back. edgefleet site describe NAME shows it
(SecretEncryption under Bootstrap).`,
		example: "  edgefleet site rotate-key store-0042 -n fleet",
		what:    "Secret encryption key rotation",
		count:   func(r *sitev1.ClusterRotations) *int64 { return &r.SecretEncryptionKey },
	})
}

func newSiteRotateCACmd(g *globals) *cobra.Command {
	return newSiteRotateCmd(g, rotation{
		use:   "rotate-ca NAME",
		short: "Ask for one more roll-over of the site's application cluster CAs",
		long: `Raises the Site's spec.cluster.rotations.certificateAuthorities by one. The site's Binary
Provisioning Agent makes new cluster, etcd and front-proxy CAs and has every host trust them beside
the old ones (one host at a time); once every namespace's kube-root-ca.crt holds the new cluster CA
and the workloads whose pods reach the API server were restarted, every certificate is issued
again by the new CAs; the old CAs are dropped last. The cluster serves throughout, and cluster
users' kubeconfigs keep working to their end: each of the first two phases lasts at least the
BPA's --max-credential-ttl (12 h by default), so a roll-over takes a day. A roll-over asked for
cannot be taken back. edgefleet site describe NAME shows it (CertificateAuthorities under
Bootstrap).`,
		example: "  edgefleet site rotate-ca store-0042 -n fleet",
		what:    "CA roll-over",
		count:   func(r *sitev1.ClusterRotations) *int64 { return &r.CertificateAuthorities },
	})
}

// newSiteRotateCmd is a verb that raises one count of a Site's spec.cluster.rotations by one,
// with the Site's resourceVersion, so that two people asking at once ask for two, not one.
func newSiteRotateCmd(g *globals, r rotation) *cobra.Command {
	return &cobra.Command{
		Use:               r.use,
		Short:             r.short,
		Long:              r.long + " The count is written with the Site's resourceVersion, so two people asking at\nonce ask for two, not one.",
		Example:           r.example,
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
				return fmt.Errorf("site %s/%s has no spec.cluster: it has no application cluster to ask a %s of", k.namespace, site.Name, r.what)
			}
			before := site.DeepCopy()
			if site.Spec.Cluster.Rotations == nil {
				site.Spec.Cluster.Rotations = &sitev1.ClusterRotations{}
			}
			count := r.count(site.Spec.Cluster.Rotations)
			*count++
			if err := k.Patch(cmd.Context(), site, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
				return fmt.Errorf("ask site %s/%s for another %s: %w (run again to ask on the Site as it is now)", k.namespace, site.Name, r.what, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "site %s/%s: %s %d asked; edgefleet site describe %s shows it\n", k.namespace, site.Name, r.what, *count, site.Name)
			return nil
		},
	}
}
