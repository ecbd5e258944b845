// Package localcontroller will be the manager on each site's bootstrap cluster: it expands the
// site's desired application cluster into Cluster-API objects, runs the Metal3-backed
// infrastructure provider, keeps the site artifact cache and publishes its version in the
// ConfigMap named by api/site/v1alpha1 (InfoNamespace/InfoConfigMapName), which the global
// controller reads into Site.status.localControllerVersion. Filled by the site-provisioning work.
package localcontroller
