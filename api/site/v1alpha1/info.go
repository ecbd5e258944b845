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
