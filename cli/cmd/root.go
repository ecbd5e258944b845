package cmd

import (
	"context"
	"fmt"
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
	kubeconfig, context, apiServer, apiCAFile string
	output                                    string
	quiet                                     bool
}

// Execute runs the CLI and returns the exit code.
func Execute() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := newRoot().ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		return 1
	}
	return 0
}

func newRoot() *cobra.Command {
	g := &globals{}
	root := &cobra.Command{
		Use:           "edgefleet",
		Short:         "Manage an edgefleet fleet: artifacts, campaigns and Secrets' encryption at rest",
		Version:       version.Version,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	pf := root.PersistentFlags()
	pf.StringVar(&g.kubeconfig, "kubeconfig", "", "Kubeconfig whose user's credentials are sent (default: $KUBECONFIG or ~/.kube/config)")
	pf.StringVar(&g.context, "context", "", "Kubeconfig context to use")
	pf.StringVar(&g.apiServer, "api-server", os.Getenv("EDGEFLEET_API_SERVER"), "URL of the global controller's artifact API (env EDGEFLEET_API_SERVER)")
	pf.StringVar(&g.apiCAFile, "api-ca-file", "", "CA bundle that signed the API's serving certificate (default: the system's)")
	pf.StringVarP(&g.output, "output", "o", "", "Output format: table (default), wide, json or yaml")
	pf.BoolVarP(&g.quiet, "quiet", "q", false, "No progress bars")
	root.AddCommand(newArtifactCmd(g), newCampaignCmd(g), newSecretsCmd(g))
	return root
}

// kubeconfigLoader loads the kubeconfig of --kubeconfig (or $KUBECONFIG, ~/.kube/config) at
// the context of --context.
func (g *globals) kubeconfigLoader() clientcmd.ClientConfig {
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
	cfg, err := g.kubeconfigLoader().ClientConfig()
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
	return &artifactclient.Client{BaseURL: g.apiServer, HTTP: hc, Retries: 8, RetryDelay: time.Second}, nil
}
