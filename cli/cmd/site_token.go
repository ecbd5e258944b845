package cmd

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/duration"

	restv1 "github.com/edgefleet/edgefleet/api/rest/v1"
	"github.com/edgefleet/edgefleet/pkg/artifactclient"
)

// newSiteTokenCmd is `edgefleet site token`: a site's enrollment tokens, through the global
// controller's API.
func newSiteTokenCmd(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:     "token",
		Aliases: []string{"tokens"},
		Short:   "Enrollment tokens with which a site's bootstrap machine enrolls: create, list, revoke",
	}
	c.AddCommand(newSiteTokenCreateCmd(g), newSiteTokenListCmd(g), newSiteTokenRevokeCmd(g))
	return c
}

// siteNamespace is --namespace, or the kubeconfig context's namespace.
func (g *globals) siteNamespace() (string, error) {
	if g.namespace != "" {
		return g.namespace, nil
	}
	ns, _, err := g.loader().Namespace()
	if err != nil {
		return "", fmt.Errorf("namespace of the kubeconfig context: %w", err)
	}
	return ns, nil
}

func newSiteTokenCreateCmd(g *globals) *cobra.Command {
	var ttl string
	return withTTL(&cobra.Command{
		Use:     "create SITE [--ttl 4h]",
		Short:   "Issue a single-use enrollment token of a site and print it (once: it is kept nowhere)",
		Example: "  edgefleet site token create site-a -n fleet --ttl 4h > site-a.token",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, ns, err := g.siteAPI()
			if err != nil {
				return err
			}
			t, err := cl.CreateEnrollmentToken(cmd.Context(), ns, args[0], ttl)
			if err != nil {
				return fmt.Errorf("create an enrollment token of site %s/%s: %w", ns, args[0], err)
			}
			if done, err := g.out.data(cmd.OutOrStdout(), t); done {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), t.Token)
			if !g.quiet {
				fmt.Fprintf(cmd.ErrOrStderr(), "enrollment token %s of site %s/%s, valid until %s, single use\n", t.ID, ns, args[0], t.Expires.Local().Format(time.RFC3339))
			}
			return nil
		},
	}, &ttl)
}

func withTTL(c *cobra.Command, ttl *string) *cobra.Command {
	c.Flags().StringVar(ttl, "ttl", "", "How long the token is valid (default: the controller's, --enrollment-token-ttl)")
	return c
}

func newSiteTokenListCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "list SITE",
		Short: "List a site's enrollment tokens: id, state, expiry, the machine that used one",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, ns, err := g.siteAPI()
			if err != nil {
				return err
			}
			l, err := cl.ListEnrollmentTokens(cmd.Context(), ns, args[0])
			if err != nil {
				return fmt.Errorf("list the enrollment tokens of site %s/%s: %w", ns, args[0], err)
			}
			return g.printTokens(cmd.OutOrStdout(), l)
		},
	}
}

func newSiteTokenRevokeCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "revoke SITE ID",
		Short: "Revoke an enrollment token: no machine can enroll with it any more",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, ns, err := g.siteAPI()
			if err != nil {
				return err
			}
			t, err := cl.RevokeEnrollmentToken(cmd.Context(), ns, args[0], args[1])
			if err != nil {
				return fmt.Errorf("revoke enrollment token %s of site %s/%s: %w", args[1], ns, args[0], err)
			}
			return g.printTokens(cmd.OutOrStdout(), restv1.EnrollmentTokenList{Items: []restv1.EnrollmentToken{t}})
		},
	}
}

// printTokens writes tokens as a table (wide adds the creator and the cluster), or in the
// structured formats.
func (g *globals) printTokens(w io.Writer, l restv1.EnrollmentTokenList) error {
	if done, err := g.out.data(w, l); done {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	header := "ID\tSTATE\tEXPIRES\tMACHINE\tAGE"
	if g.out.wide() {
		header += "\tCREATED-BY\tCLUSTER"
	}
	fmt.Fprintln(tw, header)
	for _, t := range l.Items {
		expires := "in " + duration.HumanDuration(time.Until(t.Expires))
		if time.Until(t.Expires) <= 0 {
			expires = duration.HumanDuration(time.Since(t.Expires)) + " ago"
		}
		machine := t.Machine
		if machine == "" {
			machine = "<none>"
		}
		row := fmt.Sprintf("%s\t%s\t%s\t%s\t%s", t.ID, t.State, expires, machine, duration.HumanDuration(time.Since(t.Created)))
		if g.out.wide() {
			row += fmt.Sprintf("\t%s\t%s", t.CreatedBy, t.UsedBy)
		}
		fmt.Fprintln(tw, row)
	}
	return tw.Flush()
}

// siteAPI is the artifact API's client and the namespace of the site a token verb names.
func (g *globals) siteAPI() (*artifactclient.Client, string, error) {
	cl, err := g.client()
	if err != nil {
		return nil, "", err
	}
	ns, err := g.siteNamespace()
	return cl, ns, err
}
