package pki

import (
	"bytes"
	"fmt"
	"maps"
	"net"
	"strconv"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// ControlPlaneFiles returns the files a control-plane member needs to run etcd and
// kube-apiserver, by path relative to the Kubernetes configuration directory (/etc/kubernetes),
// kubeadm's layout:
//
//	pki/ca.crt                                               cluster CA (during a CA roll-over,
//	                                                         the CAs trusted: every *ca.crt is
//	                                                         a bundle then)
//	pki/apiserver.crt, .key                                  kube-apiserver serving
//	pki/apiserver-etcd-client.crt, .key                      kube-apiserver → etcd
//	pki/apiserver-kubelet-client.crt, .key                   kube-apiserver → kubelets
//	pki/front-proxy-ca.crt                                   trusted for request headers
//	pki/front-proxy-client.crt, .key                         kube-apiserver → aggregated APIs
//	pki/sa.key, pki/sa.pub                                   service-account token signing
//	pki/etcd/ca.crt                                          etcd CA
//	pki/etcd/server.crt, .key                                this member's etcd serving
//	pki/etcd/peer.crt, .key                                  this member's etcd peer
//	encryption-config.yaml                                   --encryption-provider-config: Secrets
//	                                                         encrypted in etcd with the stored key
//	                                                         (both keys during a rotation)
//
// Files ending in ".key" are private keys, and encryption-config.yaml holds one: write them with
// mode 0600. No CA's key is among them:
// they stay in the secret store (a kube-controller-manager signing certificates would need the
// cluster CA's; none runs yet).
func (b *Bundle) ControlPlaneFiles(member string) (map[string][]byte, error) {
	if !b.spec.has(member, true) {
		return nil, fmt.Errorf("pki: %q is not a control-plane member of cluster %s", member, b.spec.ClusterName)
	}
	files := map[string][]byte{
		"pki/ca.crt":             b.trust(clusterCA),
		"pki/front-proxy-ca.crt": b.trust(frontProxyCA),
		"pki/sa.key":             b.get(saKey),
		"pki/sa.pub":             b.get(saPub),
		"pki/etcd/ca.crt":        b.trust(etcdCA),
	}
	pairs := map[string]string{
		"pki/apiserver":                "apiserver",
		"pki/apiserver-etcd-client":    "apiserver-etcd-client",
		"pki/apiserver-kubelet-client": "apiserver-kubelet-client",
		"pki/front-proxy-client":       "front-proxy-client",
		"pki/etcd/server":              etcdServerPrefix + member,
		"pki/etcd/peer":                etcdPeerPrefix + member,
	}
	for path, base := range pairs {
		files[path+".crt"], files[path+".key"] = b.get(base+".crt"), b.get(base+".key")
	}
	var err error
	if files[EncryptionConfigFile], err = b.encryptionConfig(); err != nil {
		return nil, fmt.Errorf("pki of cluster %s: %w", b.spec.ClusterName, err)
	}
	return files, nil
}

// EncryptionConfigFile is the name of the API server's encryption configuration among a
// control-plane member's files.
const EncryptionConfigFile = "encryption-config.yaml"

// NodeFiles returns the files any host of the cluster (control plane or not) needs for its
// kubelet's health check, by path relative to /etc/kubernetes:
//
//	pki/ca.crt                               cluster CA
//	pki/node-client.crt, .key                client certificate system:node:<node> (group system:nodes)
//
// The ".key" file is a private key: write it with mode 0600.
func (b *Bundle) NodeFiles(node string) (map[string][]byte, error) {
	if !b.spec.has(node, false) {
		return nil, fmt.Errorf("pki: %q is not a node of cluster %s", node, b.spec.ClusterName)
	}
	return map[string][]byte{
		"pki/ca.crt":          b.trust(clusterCA),
		"pki/node-client.crt": b.get(nodePrefix + node + ".crt"),
		"pki/node-client.key": b.get(nodePrefix + node + ".key"),
	}, nil
}

// HostFiles returns every file of the PKI a host may be given, by path relative to
// /etc/kubernetes: NodeFiles and the kubeconfigs kubelet.conf (the node's) and kube-proxy.conf
// (user system:kube-proxy); on a control-plane member also ControlPlaneFiles and the kubeconfigs
// controller-manager.conf and scheduler.conf (users system:kube-controller-manager and
// system:kube-scheduler). Files ending in ".key" or ".conf" hold private keys.
func (b *Bundle) HostFiles(host string) (map[string][]byte, error) {
	files, err := b.NodeFiles(host)
	if err != nil {
		return nil, err
	}
	if files["kubelet.conf"], err = b.NodeKubeconfig(host); err != nil {
		return nil, err
	}
	kubeconfigs := map[string][2]string{"kube-proxy.conf": {"system:kube-proxy", kubeProxy}}
	if b.spec.has(host, true) {
		cp, err := b.ControlPlaneFiles(host)
		if err != nil {
			return nil, err
		}
		maps.Copy(files, cp)
		kubeconfigs["controller-manager.conf"] = [2]string{"system:kube-controller-manager", controllerManager}
		kubeconfigs["scheduler.conf"] = [2]string{"system:kube-scheduler", scheduler}
	}
	for name, kc := range kubeconfigs {
		data, err := b.kubeconfig(kc[0], kc[1])
		if err != nil {
			return nil, err
		}
		files[name] = data
	}
	return files, nil
}

// AdminKubeconfig returns a kubeconfig for user kubernetes-admin (group system:masters, all
// rights) with the certificates embedded, pointing at https://APIEndpoint:APIPort.
func (b *Bundle) AdminKubeconfig() ([]byte, error) {
	return b.kubeconfig("kubernetes-admin", "admin")
}

// NodeKubeconfig returns the kubeconfig of node's agent: user system:node:<node> in group
// system:nodes, which the Node authorizer and NodeRestriction admission confine to that node's
// own objects.
func (b *Bundle) NodeKubeconfig(node string) ([]byte, error) {
	if !b.spec.has(node, false) {
		return nil, fmt.Errorf("pki: %q is not a node of cluster %s", node, b.spec.ClusterName)
	}
	return b.kubeconfig("system:node:"+node, nodePrefix+node)
}

func (b *Bundle) kubeconfig(user, base string) ([]byte, error) {
	cluster := b.spec.ClusterName
	context := user + "@" + cluster
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[cluster] = &clientcmdapi.Cluster{
		Server:                   "https://" + net.JoinHostPort(b.spec.APIEndpoint, strconv.Itoa(b.spec.APIPort)),
		CertificateAuthorityData: b.trust(clusterCA),
	}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{
		ClientCertificateData: b.get(base + ".crt"),
		ClientKeyData:         b.get(base + ".key"),
	}
	cfg.Contexts[context] = &clientcmdapi.Context{Cluster: cluster, AuthInfo: user}
	cfg.CurrentContext = context
	out, err := clientcmd.Write(*cfg)
	if err != nil {
		return nil, fmt.Errorf("pki: kubeconfig of %s for cluster %s: %w", user, cluster, err)
	}
	return out, nil
}

// WithServer returns kubeconfig with every cluster's server set to server: a host's own
// clients of the cluster reach the API servers through the host's endpoint of them
// (packages.ConfigFile.Server) rather than the cluster's.
func WithServer(kubeconfig []byte, server string) ([]byte, error) {
	cfg, err := clientcmd.Load(kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("pki: kubeconfig: %w", err)
	}
	for _, c := range cfg.Clusters {
		c.Server = server
	}
	out, err := clientcmd.Write(*cfg)
	if err != nil {
		return nil, fmt.Errorf("pki: kubeconfig: %w", err)
	}
	return out, nil
}

// get returns a copy of a stored value; Ensure stored every key the accessors ask for.
func (b *Bundle) get(key string) []byte {
	return bytes.Clone(b.data[key])
}
