package cmd

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/edgefleet/edgefleet/pkg/artifactclient"
	"github.com/edgefleet/edgefleet/pkg/version"
)

// globals are the flags every command shares.
type globals struct {
	kubeconfig, context, namespace, apiServer, apiCAFile string
	output                                               string
	quiet                                                bool

	// out prints in the format of --output; set before any command runs.
	out printer
	// stderr is where notices go (retries of a transfer); set before any command runs.
	stderr io.Writer
}

// Execute runs the CLI and returns the exit code.
func Execute() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := NewRoot().ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		return 1
	}
	return 0
}

// NewRoot is the edgefleet command tree: Execute runs it; the repository's checks read its
// commands and flags (the docs name no flag it lacks).
func NewRoot() *cobra.Command {
	g := &globals{}
	root := &cobra.Command{
		Use:           "edgefleet",
		Short:         "Manage an edgefleet fleet: sites, hosts, artifacts, releases, campaigns and Secrets' encryption at rest",
		Version:       version.Version,
		SilenceUsage:  true,
		SilenceErrors: true,
		// A bad --output fails before a command changes anything.
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) (err error) {
			g.stderr = cmd.ErrOrStderr()
			g.out, err = parseOutput(g.output)
			return err
		},
	}
	pf := root.PersistentFlags()
	pf.StringVar(&g.kubeconfig, "kubeconfig", "", "Kubeconfig of the global cluster; its user's credentials are also sent to the artifact API (default: $KUBECONFIG or ~/.kube/config)")
	pf.StringVar(&g.context, "context", "", "Kubeconfig context to use")
	pf.StringVarP(&g.namespace, "namespace", "n", "", "Namespace of the sites, hosts, releases and campaigns (default: the kubeconfig context's)")
	pf.StringVar(&g.apiServer, "api-server", os.Getenv("EDGEFLEET_API_SERVER"), "URL of the global controller's artifact API (env EDGEFLEET_API_SERVER)")
	pf.StringVar(&g.apiCAFile, "api-ca-file", os.Getenv("EDGEFLEET_API_CA_FILE"), "CA bundle that signed the API's serving certificate (env EDGEFLEET_API_CA_FILE; default: the system's)")
	pf.StringVarP(&g.output, "output", "o", "", "Output format: "+outputFormats)
	pf.BoolVarP(&g.quiet, "quiet", "q", false, "No progress bars or progress lines")
	_ = root.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]cobra.Completion{"table", "wide", "json", "yaml", "jsonpath="}, cobra.ShellCompDirectiveNoFileComp|cobra.ShellCompDirectiveNoSpace))
	root.AddCommand(newSiteCmd(g), newClusterCmd(g), newHostCmd(g), newArtifactCmd(g), newReleaseCmd(g), newCampaignCmd(g), newSecretsCmd(g))
	return root
}

// loader reads the kubeconfig the flags name.
func (g *globals) loader() clientcmd.ClientConfig {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = g.kubeconfig
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: g.context})
}

// client builds an artifact API client that sends the kubeconfig user's credentials (a
// bearer token, a token file, or an exec plugin's token) to the API server.
func (g *globals) client() (*artifactclient.Client, error) {
	if g.apiServer == "" {
		return nil, fmt.Errorf("no artifact API given: set --api-server or EDGEFLEET_API_SERVER")
	}
	cfg, err := g.loader().ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig: %w", err)
	}
	if cfg.BearerToken == "" && cfg.BearerTokenFile == "" && cfg.ExecProvider == nil && cfg.AuthProvider == nil {
		return nil, fmt.Errorf("the kubeconfig user has no token: the artifact API authenticates bearer tokens (TokenReview); use a user with a token")
	}
	// The kubeconfig's credentials, the artifact API's address and trust.
	api := rest.AnonymousClientConfig(cfg)
	api.BearerToken, api.BearerTokenFile = cfg.BearerToken, cfg.BearerTokenFile
	api.ExecProvider, api.AuthProvider = cfg.ExecProvider, cfg.AuthProvider
	api.Host = g.apiServer
	api.TLSClientConfig = rest.TLSClientConfig{CAFile: g.apiCAFile}
	hc, err := rest.HTTPClientFor(api)
	if err != nil {
		return nil, fmt.Errorf("HTTP client for %s: %w", g.apiServer, err)
	}
	hc.Timeout = 0 // transfers take as long as they take
	cl := &artifactclient.Client{BaseURL: g.apiServer, HTTP: hc, Retries: 8, RetryDelay: time.Second}
	// A retried transfer says what it retries, why, and when (on a line of its own, off the
	// progress bar's).
	cl.OnRetry = func(r artifactclient.Retry) {
		w, start := g.stderr, "\n"
		if w == nil {
			w = os.Stderr
		}
		if g.quiet {
			start = ""
		}
		fmt.Fprintf(w, "%s%s\n", start, r)
	}
	return cl, nil
}
