// Package webhooks holds the global controller's admission webhooks: ReleaseValidator refuses
// a Release that names an artifact the artifact store does not hold, so a release is admitted
// only when it can be rolled out (the store then refuses to delete what it names);
// SetupWindowValidators' webhooks refuse Sites and Campaigns whose maintenance windows can never
// open (a schedule naming no real date, an unknown time zone), which CEL cannot check;
// SiteVersionValidator refuses a Site update that would move its cluster to a Kubernetes
// version the version-skew policy forbids (a downgrade, more than one minor version up).
package webhooks
