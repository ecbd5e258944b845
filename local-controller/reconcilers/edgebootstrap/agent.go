package edgebootstrap

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/controllers/clustercache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
)

// Agent is the Bootstrapper of sites whose Binary Provisioning Agent makes hosts nodes. A
// host's first-boot data authorizes the BPA's SSH key, which the BPA publishes in the ConfigMap
// sitev1.BPAConfigMapName; the BPA then installs the cluster's packages over SSH, and a machine
// has joined once its Node is registered with the machine's provider ID and Ready.
type Agent struct {
	// Reader reads the BPA's ConfigMap (uncached: it is read once per machine).
	Reader client.Reader
	// Namespace of the BPA's ConfigMap.
	Namespace string
	// Clusters gives clients of the application clusters.
	Clusters ClusterClients
}

// UserData names the host (when known) and authorizes the BPA's key.
func (a *Agent) UserData(ctx context.Context, _ *clusterv1.Cluster, machine *clusterv1.Machine) ([]byte, error) {
	cm := &corev1.ConfigMap{}
	key := client.ObjectKey{Namespace: a.Namespace, Name: sitev1.BPAConfigMapName}
	if err := a.Reader.Get(ctx, key, cm); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("the site's BPA has not published its SSH key yet (ConfigMap %s): is the BPA running?", key)
		}
		return nil, fmt.Errorf("read the BPA's SSH key from ConfigMap %s: %w", key, err)
	}
	authorized := strings.TrimSpace(cm.Data[sitev1.BPAAuthorizedKeyKey])
	if authorized == "" || strings.ContainsAny(authorized, "\r\n") {
		return nil, fmt.Errorf("ConfigMap %s: key %s must hold one authorized_keys line", key, sitev1.BPAAuthorizedKeyKey)
	}
	return CloudConfig(machine, authorized)
}

// Join reports whether the machine's node is registered with its provider ID and Ready; the
// application cluster not being reachable yet (the BPA has not stored its kubeconfig) is not an
// error, only not yet.
func (a *Agent) Join(ctx context.Context, cluster *clusterv1.Cluster, machine *clusterv1.Machine) (bool, error) {
	if machine.Spec.ProviderID == "" {
		return false, nil
	}
	c, err := a.Clusters.GetClient(ctx, client.ObjectKeyFromObject(cluster))
	if errors.Is(err, clustercache.ErrClusterNotConnected) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("reach application cluster %s: %w", client.ObjectKeyFromObject(cluster), err)
	}
	node := &corev1.Node{}
	if err := c.Get(ctx, client.ObjectKey{Name: NodeName(machine)}, node); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("get node %s: %w", NodeName(machine), err)
	}
	if node.Spec.ProviderID != machine.Spec.ProviderID {
		return false, fmt.Errorf("node %s has provider ID %q, want %q", node.Name, node.Spec.ProviderID, machine.Spec.ProviderID)
	}
	return isReady(node), nil
}

// CloudConfig is a machine's cloud-init user data: its host name, when the machine is bound
// to a known host before provisioning (a control-plane machine; a worker's host is only known
// once bound), and the authorized keys.
func CloudConfig(machine *clusterv1.Machine, authorizedKeys ...string) ([]byte, error) {
	cfg := struct {
		Hostname          string   `json:"hostname,omitempty"`
		SSHAuthorizedKeys []string `json:"ssh_authorized_keys,omitempty"`
	}{Hostname: machine.Labels[sitev1.HostNameLabel], SSHAuthorizedKeys: authorizedKeys}
	body, err := yaml.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("cloud-config of machine %s: %w", client.ObjectKeyFromObject(machine), err)
	}
	return append([]byte("#cloud-config\n"), body...), nil
}
