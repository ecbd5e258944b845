package restconfig

import (
	"fmt"
	"net/http"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Load returns the config of the kubeconfig file at path, or the in-cluster config when path
// is empty. Errors name the --kubeconfig flag the controllers take it from.
func Load(path string) (*rest.Config, error) {
	if path == "" {
		cfg, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("no --kubeconfig given and not running in a cluster: %w", err)
		}
		return cfg, nil
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, fmt.Errorf("load --kubeconfig %s: %w", path, err)
	}
	return cfg, nil
}

// HTTPClient is an HTTP client for another server of the cluster cfg talks to — the site
// cache, beside the site's API server — presenting cfg's credentials (client certificate or
// bearer token) and trusting the CAs of caFile, or cfg's own when caFile is empty. Every
// request is bounded by timeout.
func HTTPClient(cfg *rest.Config, caFile string, timeout time.Duration) (*http.Client, error) {
	c := rest.CopyConfig(cfg)
	c.Timeout = timeout
	// The API server's name is not the other server's.
	c.ServerName = ""
	if caFile != "" {
		c.CAFile, c.CAData = caFile, nil
	}
	hc, err := rest.HTTPClientFor(c)
	if err != nil {
		return nil, fmt.Errorf("HTTP client with the credentials of the kubeconfig: %w", err)
	}
	return hc, nil
}
