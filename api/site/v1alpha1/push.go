package v1alpha1

// The global controller pushes each site's ApplicationCluster, and one Secret with the BMC
// credentials of each of its hosts, into InfoNamespace on the site. It marks what it writes so it
// can find its objects again, prune the Secrets of hosts that left, and leave alone objects it did
// not create.
const (
	// ManagedByLabel is set on every object the global controller pushes, to ManagedByGlobal.
	ManagedByLabel = "app.kubernetes.io/managed-by"
	// ManagedByGlobal is the value of ManagedByLabel on pushed objects. The global controller
	// never updates or deletes an object that does not carry it.
	ManagedByGlobal = "edgefleet-global-controller"
	// ClusterLabel on a pushed BMC Secret names the ApplicationCluster it belongs to.
	ClusterLabel = "site.edgefleet.io/cluster"
	// HostLabel on a pushed BMC Secret names the cluster host whose credentials it holds.
	HostLabel = "site.edgefleet.io/host"
	// SourceAnnotation on a pushed object names the global object it was built from:
	// "Site <namespace>/<name>", "Secret <namespace>/<name>" or, for BMC credentials kept in
	// Vault, "Vault <mount>/<path>".
	SourceAnnotation = "site.edgefleet.io/source"
	// SourceVersionAnnotation on a pushed BMC Secret is "<uid>/<resourceVersion>" of the global
	// Secret its data was copied from, or "vault:<mount>/<path>/v<version>" of the Vault entry:
	// while it matches (and DataHashAnnotation matches the data), the global controller does not
	// read the global Secret again.
	SourceVersionAnnotation = "site.edgefleet.io/source-version"
	// DataHashAnnotation on a pushed BMC Secret is a salted sha256 of the data the global
	// controller wrote; data changed on the site no longer matches it and is written again.
	DataHashAnnotation = "site.edgefleet.io/data-hash"
	// OperationAnnotation on a pushed ApplicationCluster is the ID of the operation (a
	// campaign's dispatch) that last raised its spec.operationGeneration: an operation raises it
	// once, however often it is pushed.
	OperationAnnotation = "site.edgefleet.io/operation"
	// BMCSecretSuffix: the BMC Secret of host H is named H + BMCSecretSuffix, and
	// spec.hosts[].bmc.credentialsName names it.
	BMCSecretSuffix = "-bmc"
	// BMCUsernameKey and BMCPasswordKey are the keys of a BMC Secret, as Metal3 reads them.
	BMCUsernameKey = "username"
	// BMCPasswordKey: see BMCUsernameKey.
	BMCPasswordKey = "password"
)
