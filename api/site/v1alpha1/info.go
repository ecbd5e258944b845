package v1alpha1

// The local controller publishes what it is in one ConfigMap on its own cluster; the global
// controller reads it to fill Site.status.localControllerVersion.
const (
	// InfoNamespace is the namespace of the local controller and of its info ConfigMap.
	InfoNamespace = "edgefleet-system"
	// InfoConfigMapName is the name of the ConfigMap in which the local controller describes itself.
	InfoConfigMapName = "edgefleet-local-controller"
	// InfoVersionKey is the key of InfoConfigMapName that holds the local controller's version.
	InfoVersionKey = "version"
)

// HostsNamespace holds a site's BareMetalHosts, their BMC credential Secrets and the site's
// artifact API credentials (GlobalAPISecretName): the Secrets the global controller pushes, in
// the only namespace of the site where its identity may touch Secrets (deploy/rbac/site). Metal3
// reads a host's BMC Secret in the host's namespace only, so the hosts live here too, apart from
// InfoNamespace, which holds the application cluster's admin kubeconfig and the BPA's secrets.
const HostsNamespace = "edgefleet-hosts"

// The local controller reaches the global controller's artifact API with the site's own
// credentials, kept in one Secret in HostsNamespace, where the global controller pushes them. It
// reads the Secret on every transfer, so a rotated token takes effect without a restart.
const (
	// GlobalAPISecretName is the Secret with the URL, CA and token of the global artifact API.
	GlobalAPISecretName = "edgefleet-global-api"
	// GlobalAPIURLKey holds the API's base URL, e.g. "https://edgefleet.example:8443".
	GlobalAPIURLKey = "url"
	// GlobalAPITokenKey holds the site's bearer token.
	GlobalAPITokenKey = "token"
	// GlobalAPICAKey holds the PEM CA bundle that signs the API's certificate; optional (the
	// system roots are used without it).
	GlobalAPICAKey = "ca.crt"
)

// The site's Binary Provisioning Agent publishes the public half of the SSH key it logs into
// hosts with in one ConfigMap in InfoNamespace; the local controller puts it into every host's
// first-boot data. The private half stays in the BPA's secret store.
const (
	// BPAConfigMapName is the ConfigMap in which the BPA describes itself.
	BPAConfigMapName = "edgefleet-bpa"
	// BPAAuthorizedKeyKey holds the BPA's public key, one authorized_keys line.
	BPAAuthorizedKeyKey = "authorizedKey"
	// BPAVersionKey holds the BPA's version.
	BPAVersionKey = "version"
)
