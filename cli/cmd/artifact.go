package cmd

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/duration"

	restv1 "github.com/edgefleet/edgefleet/api/rest/v1"
	"github.com/edgefleet/edgefleet/pkg/artifactclient"
)

func newArtifactCmd(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:     "artifact",
		Aliases: []string{"artifacts"},
		Short:   "OS images, binary packages, Helm charts and container image archives in the artifact store",
	}
	c.AddCommand(newArtifactUploadCmd(g), newArtifactListCmd(g), newArtifactGetCmd(g), newArtifactDownloadCmd(g), newArtifactDeleteCmd(g))
	return c
}

func newArtifactUploadCmd(g *globals) *cobra.Command {
	var spec restv1.ArtifactSpec
	var kind string
	var labels []string
	c := &cobra.Command{
		Use:   "upload FILE --kind KIND --name NAME --version VERSION [--arch ARCH]",
		Short: "Upload a file; a broken connection is resumed where the server stopped",
		Example: `  edgefleet artifact upload kubelet-1.36.3.tar.gz --kind binary-package --name kubelet --version 1.36.3 --arch amd64 \
    --label edgefleet.io/component=node`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			spec.Kind = restv1.ArtifactKind(kind)
			for _, l := range labels {
				k, v, ok := strings.Cut(l, "=")
				if !ok {
					return fmt.Errorf("--label must be key=value, got %q", l)
				}
				if spec.Labels == nil {
					spec.Labels = map[string]string{}
				}
				spec.Labels[k] = v
			}
			cl, err := g.client()
			if err != nil {
				return err
			}
			st, err := os.Stat(args[0])
			if err != nil {
				return err
			}
			bar := g.bar(st.Size(), "uploading "+filepath.Base(args[0]))
			a, err := cl.Upload(cmd.Context(), spec, args[0], bar)
			g.done(bar)
			if err != nil {
				return err
			}
			return g.print(cmd.OutOrStdout(), []restv1.Artifact{a}, true)
		},
	}
	f := c.Flags()
	f.StringVar(&kind, "kind", "", "os-image, binary-package, helm-chart or container-image-archive")
	f.StringVar(&spec.Name, "name", "", "Artifact name")
	f.StringVar(&spec.Version, "version", "", "Artifact version")
	f.StringVar(&spec.Architecture, "arch", "amd64", "Architecture (amd64, arm64, noarch …)")
	f.StringVar(&spec.Description, "description", "", "Free text")
	f.StringArrayVar(&labels, "label", nil, "Label key=value (repeatable)")
	for _, req := range []string{"kind", "name", "version"} {
		_ = c.MarkFlagRequired(req)
	}
	return c
}

func newArtifactListCmd(g *globals) *cobra.Command {
	var kind, name, selector string
	c := &cobra.Command{
		Use:   "list",
		Short: "List artifacts",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := g.client()
			if err != nil {
				return err
			}
			var all []restv1.Artifact
			cont := ""
			for {
				page, err := cl.List(cmd.Context(), restv1.ArtifactKind(kind), name, selector, 500, cont)
				if err != nil {
					return err
				}
				all = append(all, page.Items...)
				if cont = page.Continue; cont == "" {
					break
				}
			}
			return g.print(cmd.OutOrStdout(), all, false)
		},
	}
	c.Flags().StringVar(&kind, "kind", "", "Only this kind")
	c.Flags().StringVar(&name, "name", "", "Only this name")
	c.Flags().StringVarP(&selector, "selector", "l", "", "Label selector, e.g. tier=base,channel!=beta")
	return c
}

func newArtifactGetCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "get ID",
		Short: "Show one artifact",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			_, a, err := g.artifact(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return g.print(cmd.OutOrStdout(), []restv1.Artifact{a}, true)
		},
	}
}

func newArtifactDownloadCmd(g *globals) *cobra.Command {
	var out string
	c := &cobra.Command{
		Use:   "download ID [-f FILE]",
		Short: "Download an artifact's content, verified against its sha256; a broken download resumes",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, a, err := g.artifact(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if out == "" {
				out = a.Name + "-" + a.Version
			}
			bar := g.bar(a.Size, "downloading "+filepath.Base(out))
			err = cl.Download(cmd.Context(), a.SHA256, out, bar)
			g.done(bar)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: %d bytes, sha256 %s verified\n", out, a.Size, a.SHA256)
			return nil
		},
	}
	c.Flags().StringVarP(&out, "file", "f", "", "Where to write (default NAME-VERSION)")
	return c
}

func newArtifactDeleteCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "delete ID...",
		Short: "Delete artifacts (refused while a release references them)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := g.client()
			if err != nil {
				return err
			}
			for _, id := range args {
				if err := cl.Delete(cmd.Context(), id); err != nil {
					return fmt.Errorf("delete %s: %w", id, err)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "artifact %s deleted\n", id)
			}
			return nil
		},
	}
}

// artifact returns a client and the artifact with this id.
func (g *globals) artifact(ctx context.Context, id string) (*artifactclient.Client, restv1.Artifact, error) {
	cl, err := g.client()
	if err != nil {
		return nil, restv1.Artifact{}, err
	}
	a, err := cl.Get(ctx, id)
	return cl, a, err
}

// bar returns a progress callback drawing a bar on stderr, or nil when quiet.
func (g *globals) bar(total int64, what string) artifactclient.Progress {
	if g.quiet {
		return nil
	}
	b := progressbar.NewOptions64(total, progressbar.OptionSetWriter(os.Stderr), progressbar.OptionSetDescription(what),
		progressbar.OptionShowBytes(true), progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionClearOnFinish())
	return func(done int64) { _ = b.Set64(done) }
}

func (g *globals) done(p artifactclient.Progress) {
	if p != nil {
		fmt.Fprintln(os.Stderr)
	}
}

// print writes artifacts as a table (wide adds columns), or in the structured formats; one
// is an object, not a list.
func (g *globals) print(w io.Writer, items []restv1.Artifact, one bool) error {
	var v any = restv1.ArtifactList{Items: items}
	if one && len(items) == 1 {
		v = items[0]
	}
	if done, err := g.out.data(w, v); done {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	header := "ID\tKIND\tNAME\tVERSION\tARCH\tSIZE\tAGE"
	if g.out.wide() {
		header += "\tSHA256\tCREATOR\tLABELS"
	}
	fmt.Fprintln(tw, header)
	for _, a := range items {
		row := fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s\t%s", a.ID, a.Kind, a.Name, a.Version, a.Architecture, size(a.Size), duration.HumanDuration(time.Since(a.Created)))
		if g.out.wide() {
			var labels []string
			for k, v := range a.Labels {
				labels = append(labels, k+"="+v)
			}
			sort.Strings(labels)
			row += fmt.Sprintf("\t%s\t%s\t%s", a.SHA256, a.Creator, strings.Join(labels, ","))
		}
		fmt.Fprintln(tw, row)
	}
	return tw.Flush()
}

func size(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%dB", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f%ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
