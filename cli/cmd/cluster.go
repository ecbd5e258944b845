package cmd

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	restv1 "github.com/edgefleet/edgefleet/api/rest/v1"
	"github.com/edgefleet/edgefleet/pkg/clustercred"
)

// kubeconfigTimeout bounds the request for a kubeconfig: the global controller waits up to
// 30 s for the site.
const kubeconfigTimeout = time.Minute

func newClusterCmd(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:   "cluster",
		Short: "Application clusters of the sites, as a cluster user",
	}
	c.AddCommand(newClusterKubeconfigCmd(g))
	return c
}

func newClusterKubeconfigCmd(g *globals) *cobra.Command {
	var ttl time.Duration
	var file string
	c := &cobra.Command{
		Use:   "kubeconfig SITE",
		Short: "Get a kubeconfig of a site's application cluster, with a short-lived certificate for your own identity",
		Long: `Get a kubeconfig of the application cluster of SITE. A private key is made here and never
leaves this machine; the global controller checks that you may (create sites/kubeconfig on the
Site, ClusterRole edgefleet-cluster-user), and the site's bootstrap agent signs a client
certificate for your identity inside the cluster: user edgefleet:<your user>, groups
edgefleet:<each of your groups> and edgefleet:cluster-users (which may read what the ClusterRole
view allows). The certificate lives --ttl, 12 hours at most unless the fleet admin set
another maximum. The kubeconfig is written with mode 0600.`,
		Example:           "  edgefleet cluster kubeconfig site-a -n fleet --ttl 8h -f site-a.kubeconfig\n  KUBECONFIG=site-a.kubeconfig kubectl get pods -A",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: g.completeArg(sites),
		RunE: func(cmd *cobra.Command, args []string) error {
			site := args[0]
			if file == "" {
				file = site + ".kubeconfig"
			}
			if ttl < 0 {
				return fmt.Errorf("--ttl %s: must not be negative", ttl)
			}
			ns := g.namespace
			if ns == "" {
				var err error
				if ns, _, err = g.loader().Namespace(); err != nil {
					return fmt.Errorf("namespace of the kubeconfig context: %w", err)
				}
			}
			api, err := g.client()
			if err != nil {
				return err
			}
			kc, cred, err := clusterKubeconfig(cmd.Context(), api, ns, site, ttl)
			if err != nil {
				return err
			}
			if file == "-" {
				_, err := cmd.OutOrStdout().Write(kc)
				return err
			}
			if err := writePrivate(file, kc); err != nil {
				return err
			}
			if !g.quiet {
				fmt.Fprintf(cmd.ErrOrStderr(), "wrote %s: cluster %s at %s as %s, valid until %s\n",
					file, cred.Cluster, cred.Server, cred.User, cred.ExpirationTime.Local().Format(time.RFC3339))
			}
			return nil
		},
	}
	c.Flags().DurationVar(&ttl, "ttl", 0, "Lifetime of the certificate (default and upper bound: the global controller's maximum, 12h unless configured)")
	c.Flags().StringVarP(&file, "file", "f", "", `File to write the kubeconfig to, mode 0600 ("-": standard output; default SITE.kubeconfig)`)
	return c
}

// credentialAPI is the part of the artifact API client the verb uses.
type credentialAPI interface {
	ClusterCredential(ctx context.Context, ns, site string, req restv1.KubeconfigRequest) (restv1.ClusterCredential, error)
}

// clusterKubeconfig makes a key and its CSR, asks for the certificate and returns the kubeconfig
// holding both.
func clusterKubeconfig(ctx context.Context, api credentialAPI, ns, site string, ttl time.Duration) ([]byte, restv1.ClusterCredential, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, restv1.ClusterCredential{}, fmt.Errorf("generate key: %w", err)
	}
	csr, err := clustercred.NewCSR(key)
	if err != nil {
		return nil, restv1.ClusterCredential{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, kubeconfigTimeout)
	defer cancel()
	cred, err := api.ClusterCredential(ctx, ns, site, restv1.KubeconfigRequest{CSR: string(csr), TTLSeconds: int64(ttl / time.Second)})
	if err != nil {
		return nil, restv1.ClusterCredential{}, err
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, restv1.ClusterCredential{}, fmt.Errorf("encode key: %w", err)
	}
	kc, err := clustercred.Kubeconfig(cred.Cluster, cred.Server, cred.User, []byte(cred.CertificateAuthority), []byte(cred.Certificate),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
	if err != nil {
		return nil, restv1.ClusterCredential{}, err
	}
	return kc, cred, nil
}

// writePrivate writes data to path with mode 0600 through a temporary file in the same
// directory, so that the file is never readable by others, not even while it is written.
func writePrivate(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".kubeconfig-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(f.Name())
	if err := f.Chmod(0o600); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
