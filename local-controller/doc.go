// Package main is the local controller: the controller-runtime manager on each site's
// bootstrap cluster. It keeps the site artifact cache (ArtifactSets fetched from the global
// artifact API, verified, served to Ironic and the BPA) and publishes its version in the
// ConfigMap named by api/site/v1alpha1 (InfoNamespace/InfoConfigMapName), which the global
// controller reads into Site.status.localControllerVersion. The site-provisioning work adds the
// Cluster-API expansion and the Metal3 infrastructure provider. main.go only parses flags and
// hands over to setup.
package main
