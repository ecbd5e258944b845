// Package v1alpha1 contains the site.edgefleet.io/v1alpha1 kinds that live on each site's local
// cluster, and the names of the objects through which a site describes itself to the global
// controller. The desired application cluster kind arrives with the site-provisioning work.
package v1alpha1
