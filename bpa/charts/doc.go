// Package charts installs Helm charts into an application cluster: the BPA's KPM part, over the
// helm Go SDK (helm.sh/helm/v4).
//
// An Installer is made from the application cluster's *rest.Config, held in memory: it serves
// helm as a RESTClientGetter over that config (a memory-cached discovery client and a deferred
// discovery REST mapper, made fresh for every call so charts see CRDs installed since), and no
// kubeconfig file is ever written or read. Helm keeps its releases with its Secret driver, in the
// release's namespace (Secrets sh.helm.release.v1.<name>.v<revision>, type helm.sh/release.v1).
//
// Apply makes a release what it is given, idempotently:
//
//   - The chart archive is loaded and checked before anything is read from or written to the
//     cluster; an archive that is not a chart changes nothing.
//   - Every revision the Installer writes carries the release's fingerprint in its storage label
//     FingerprintLabel: the sha256 of the chart archive and of the canonical JSON of the values
//     (Fingerprint). When the last revision is deployed with the same fingerprint, Apply does
//     nothing and no revision is added; any other chart (name, version or any byte of the archive)
//     or values upgrade the release.
//   - Without a revision, Apply installs (revision 1), creating the namespace when it is missing
//     only after the chart rendered and its objects were built, so a chart that does not render
//     does not leave a namespace behind. An existing namespace is never changed.
//   - A last revision left pending-install, pending-upgrade or pending-rollback (or
//     uninstalling/unknown) is one a process stopped in the middle of, the BPA being the only
//     writer of its releases (Apply calls for one release are serialized within an Installer). Apply
//     marks it failed, with a description saying so, and upgrades from the last deployed revision,
//     or, when there is none, from the interrupted one: objects the stopped process had created
//     already carry the release's ownership annotations and are taken over, not refused.
//   - A failed last revision is retried: Apply upgrades again (helm's upgrade from a failed
//     release), so a first install that failed is repaired by the next Apply of a good chart.
//
// Chart values are exactly the given ones over the chart's defaults (helm's --reset-values): an
// upgrade never reuses the values of an earlier revision.
//
// What helm does with bad input, and so what Apply returns: a template that does not render or
// renders invalid YAML, or an object of an unknown kind, fails before helm stores a revision:
// nothing changes (no revision, no namespace; an installed release stays at its deployed
// revision). An object the API server refuses fails after helm stored the new revision: that
// revision is failed, its description carrying the API server's reason, and an upgrade's
// earlier revision stays deployed. Apply's errors name the release and the chart, and it returns
// the release's Status with them when it can be read.
//
// Apply does not wait for workloads to be ready unless Release.Wait is set (helm's status
// watcher, Jobs included); hooks are always waited for, up to Options.HookTimeout. A started
// helm operation is not cancelled through ctx: helm would go on in the background and leave the
// release pending; ctx is checked before it starts.
package charts
