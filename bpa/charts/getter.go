package charts

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// restClientGetter is helm's (and kubectl's) RESTClientGetter over a rest.Config held in memory:
// nothing is loaded from a kubeconfig file. Its discovery is cached in memory for the getter's
// life, one Apply or Status call.
type restClientGetter struct {
	config    *rest.Config
	namespace string
	discovery discovery.CachedDiscoveryInterface
	mapper    meta.RESTMapper
}

var _ genericclioptions.RESTClientGetter = (*restClientGetter)(nil)

func newRESTClientGetter(config *rest.Config, namespace string) (*restClientGetter, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(config)
	if err != nil {
		return nil, fmt.Errorf("discovery client: %w", err)
	}
	cached := memory.NewMemCacheClient(dc)
	return &restClientGetter{
		config:    config,
		namespace: namespace,
		discovery: cached,
		mapper:    restmapper.NewDeferredDiscoveryRESTMapper(cached),
	}, nil
}

// ToRESTConfig returns a copy of the config, which the caller may change.
func (g *restClientGetter) ToRESTConfig() (*rest.Config, error) {
	return rest.CopyConfig(g.config), nil
}

func (g *restClientGetter) ToDiscoveryClient() (discovery.CachedDiscoveryInterface, error) {
	return g.discovery, nil
}

func (g *restClientGetter) ToRESTMapper() (meta.RESTMapper, error) { return g.mapper, nil }

// ToRawKubeConfigLoader serves the namespace (what helm's kube client reads from it) and the
// config; there is no kubeconfig behind it.
func (g *restClientGetter) ToRawKubeConfigLoader() clientcmd.ClientConfig {
	return memoryClientConfig{g}
}

type memoryClientConfig struct{ g *restClientGetter }

var _ clientcmd.ClientConfig = memoryClientConfig{}

func (c memoryClientConfig) RawConfig() (clientcmdapi.Config, error) {
	return *clientcmdapi.NewConfig(), nil
}

func (c memoryClientConfig) ClientConfig() (*rest.Config, error) { return c.g.ToRESTConfig() }

func (c memoryClientConfig) Namespace() (string, bool, error) { return c.g.namespace, true, nil }

func (c memoryClientConfig) ConfigAccess() clientcmd.ConfigAccess { return noFiles{} }

// noFiles is a ConfigAccess without files, so nothing that asks for one reads or writes a
// kubeconfig on disk.
type noFiles struct{}

func (noFiles) GetLoadingPrecedence() []string { return nil }

func (noFiles) GetStartingConfig() (*clientcmdapi.Config, error) {
	return clientcmdapi.NewConfig(), nil
}

func (noFiles) GetDefaultFilename() string { return "" }

func (noFiles) IsExplicitFile() bool { return false }

func (noFiles) GetExplicitFile() string { return "" }
