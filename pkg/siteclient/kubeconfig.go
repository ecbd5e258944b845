package siteclient

import (
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strings"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// ErrUnsafe marks a kubeconfig that was refused because it would run code or read local files.
var ErrUnsafe = errors.New("kubeconfig is unsafe")

// ErrInvalid marks a kubeconfig that does not parse or has no usable context.
var ErrInvalid = errors.New("kubeconfig is invalid")

// Load parses an untrusted site kubeconfig and returns the REST config of its current context.
// Errors wrap ErrInvalid or ErrUnsafe and name the offending entry and field.
func Load(data []byte) (*rest.Config, error) {
	if len(strings.TrimSpace(string(data))) == 0 {
		return nil, fmt.Errorf("%w: it is empty", ErrInvalid)
	}
	cfg, err := clientcmd.Load(data)
	if err != nil {
		return nil, fmt.Errorf("%w: %s", ErrInvalid, firstLine(err.Error()))
	}
	if err := checkSafe(cfg); err != nil {
		return nil, err
	}
	contextName := cfg.CurrentContext
	if contextName == "" {
		if len(cfg.Contexts) != 1 {
			return nil, fmt.Errorf("%w: current-context is not set and there are %d contexts to choose from", ErrInvalid, len(cfg.Contexts))
		}
		for name := range cfg.Contexts {
			contextName = name
		}
	}
	kctx, ok := cfg.Contexts[contextName]
	if !ok {
		return nil, fmt.Errorf("%w: context %q (current-context) is not defined", ErrInvalid, contextName)
	}
	cluster, ok := cfg.Clusters[kctx.Cluster]
	if !ok {
		return nil, fmt.Errorf("%w: cluster %q of context %q is not defined", ErrInvalid, kctx.Cluster, contextName)
	}
	if _, ok := cfg.AuthInfos[kctx.AuthInfo]; !ok {
		return nil, fmt.Errorf("%w: user %q of context %q is not defined", ErrInvalid, kctx.AuthInfo, contextName)
	}
	server, err := url.Parse(cluster.Server)
	if err != nil || server.Scheme != "https" || server.Host == "" {
		return nil, fmt.Errorf("%w: clusters[%q].server must be an https:// URL, got %q", ErrInvalid, kctx.Cluster, cluster.Server)
	}
	restCfg, err := clientcmd.NewNonInteractiveClientConfig(*cfg, contextName, &clientcmd.ConfigOverrides{}, nil).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("%w: %s", ErrInvalid, firstLine(err.Error()))
	}
	return restCfg, nil
}

// checkSafe refuses every feature of a kubeconfig that would run code or read files on the
// machine that uses it, in any entry, used by the current context or not.
func checkSafe(cfg *clientcmdapi.Config) error {
	var problems []string
	for name, c := range cfg.Clusters {
		if c.CertificateAuthority != "" {
			problems = append(problems, fmt.Sprintf("clusters[%q].certificate-authority is a file path (use certificate-authority-data)", name))
		}
		if c.ProxyURL != "" {
			problems = append(problems, fmt.Sprintf("clusters[%q].proxy-url is not allowed", name))
		}
	}
	for name, a := range cfg.AuthInfos {
		if a.ClientCertificate != "" {
			problems = append(problems, fmt.Sprintf("users[%q].client-certificate is a file path (use client-certificate-data)", name))
		}
		if a.ClientKey != "" {
			problems = append(problems, fmt.Sprintf("users[%q].client-key is a file path (use client-key-data)", name))
		}
		if a.TokenFile != "" {
			problems = append(problems, fmt.Sprintf("users[%q].tokenFile is a file path (use token)", name))
		}
		if a.Exec != nil {
			problems = append(problems, fmt.Sprintf("users[%q].exec would run a command (%q)", name, a.Exec.Command))
		}
		if a.AuthProvider != nil {
			problems = append(problems, fmt.Sprintf("users[%q].auth-provider would run a plugin (%q)", name, a.AuthProvider.Name))
		}
	}
	if len(problems) == 0 {
		return nil
	}
	sort.Strings(problems)
	return fmt.Errorf("%w: %s; only inline credentials are accepted", ErrUnsafe, strings.Join(problems, "; "))
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
