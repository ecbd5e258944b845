package cmd

import (
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/client-go/metadata"

	"github.com/edgefleet/edgefleet/pkg/encryption"
)

func newSecretsCmd(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:     "secrets",
		Aliases: []string{"secret"},
		Short:   "Secrets' encryption at rest in the cluster of the kubeconfig",
	}
	c.AddCommand(newSecretsReencryptCmd(g))
	return c
}

func newSecretsReencryptCmd(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:   "reencrypt",
		Short: "Have the API server store every Secret again under its current key (after a key rotation, or once encryption is switched on)",
		Long: `Sends every Secret an empty patch: the API server writes a Secret to etcd again only when
it is stored under a key other than its current one (or in clear), so running it twice is
harmless. Run it once the API servers use the new key: after a rotation of the Vault transit key,
wait a minute (the API server asks its KMS plugin for the key ID every minute). Only the Secrets'
metadata is read, never their data. Needs list and patch on Secrets. Every namespace's Secrets,
or with -n those of one namespace.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			namespace := "" // all
			if cmd.Flags().Changed("namespace") {
				namespace = g.namespace
			}
			cfg, err := g.loader().ClientConfig()
			if err != nil {
				return fmt.Errorf("load kubeconfig: %w", err)
			}
			meta, err := metadata.NewForConfig(cfg)
			if err != nil {
				return fmt.Errorf("client of %s: %w", cfg.Host, err)
			}
			res, err := encryption.Reencrypt(cmd.Context(), meta, namespace)
			fmt.Fprintf(cmd.OutOrStdout(), "%d Secrets stored again, %d under the current key already\n", res.Rewritten, res.Current)
			return err
		},
	}
	return c
}
