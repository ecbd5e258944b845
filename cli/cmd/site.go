package cmd

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
)

func newSiteCmd(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:     "site",
		Aliases: []string{"sites"},
		Short:   "Edge sites: list them, describe one (its application cluster, nodes, packages, charts and hosts), their enrollment tokens, a bootable image of one, rotate a cluster's key",
	}
	c.AddCommand(newObjectListCmd(g, sites, "  edgefleet site list -n fleet -l region=eu-west -o wide", nil), newSiteDescribeCmd(g), newSiteLogsCmd(g), newSiteTokenCmd(g), newSiteImageCmd(g), newSiteRotateKeyCmd(g), newSiteRotateCACmd(g))
	return c
}

func newSiteDescribeCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "describe NAME",
		Short: "Show a site as a tree: the site, its application cluster, nodes, packages, charts and hosts; problems first",
		Long: `Show a site as a tree, as the global controller last saw it: the site (reachable or not, versions,
heartbeat), its last operation, its application cluster (the summary the site reports: phase,
nodes, the packages and charts its bootstrap agent installed) and its hosts with their
provisioning state. Conditions that are not True appear under their object (-o wide: all of
them); among siblings, what has problems comes first. While a site is unreachable its cluster
shows the last summary it reported.
With -o json|yaml|jsonpath=..., the objects the tree is drawn from: a List of the Site and its Hosts.`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: g.completeArg(sites),
		RunE: func(cmd *cobra.Command, args []string) error {
			k, err := g.kube()
			if err != nil {
				return err
			}
			site := &fleetv1.Site{}
			if err := k.get(cmd.Context(), args[0], site); err != nil {
				return err
			}
			hostList := &fleetv1.HostList{}
			if err := k.List(cmd.Context(), hostList, client.InNamespace(k.namespace), client.MatchingFields{"spec.siteRef.name": site.Name}); err != nil {
				return fmt.Errorf("list the hosts of site %s/%s: %w", k.namespace, site.Name, err)
			}
			objs := []runtime.Object{site}
			for i := range hostList.Items {
				objs = append(objs, &hostList.Items[i])
			}
			if done, err := k.printObjects(g.out, cmd.OutOrStdout(), objs...); done {
				return err
			}
			return printTree(cmd.OutOrStdout(), siteTree(site, hostList.Items, g.out.wide()))
		},
	}
}

// siteTree is the describe tree of a site and its hosts; all shows every condition.
func siteTree(s *fleetv1.Site, hosts []fleetv1.Host, all bool) *row {
	r := siteRow(s).add(conditionRows(s.Status.Conditions, all, fleetv1.SiteKubeconfigValidCondition, fleetv1.SiteReachableCondition,
		fleetv1.SiteArtifactAccessCondition, fleetv1.SiteReadyCondition)...)
	if op := s.Status.LastOperation; op != nil {
		r.add(operationRow(op))
	}
	return r.add(clusterTree(s, hosts, all), hostsTree(hosts, all))
}

// siteRow is a site's line: Ready, or why not — an unreachable site is Unreachable, whatever
// its cluster last reported.
func siteRow(s *fleetv1.Site) *row {
	r := readyRow("Site/"+s.Name, s.Status.Conditions, fleetv1.SiteReadyCondition)
	for _, c := range []struct{ condition, status string }{
		{fleetv1.SiteKubeconfigValidCondition, "KubeconfigInvalid"},
		{fleetv1.SiteReachableCondition, "Unreachable"},
	} {
		if meta.IsStatusConditionFalse(s.Status.Conditions, c.condition) {
			r.status, r.severity = c.status, problem
		}
	}
	var facts []string
	if v := s.Status.KubernetesVersion; v != "" {
		facts = append(facts, "Kubernetes "+v)
	}
	if v := s.Status.LocalControllerVersion; v != "" {
		facts = append(facts, "local controller "+v)
	}
	if hb := s.Status.LastHeartbeatTime; hb != nil {
		facts = append(facts, "last heartbeat "+duration.HumanDuration(time.Since(hb.Time))+" ago")
	} else if s.Status.LastCheckTime != nil {
		facts = append(facts, "never answered")
	}
	if l := s.Spec.Location; l != nil && l.Region != "" {
		facts = append(facts, "region "+l.Region)
	}
	r.message = strings.Join(facts, ", ")
	return r
}

// operationRow is the line of the last operation a campaign dispatched to the site.
func operationRow(op *fleetv1.SiteOperationStatus) *row {
	r := &row{name: "Operation/" + op.Campaign, status: string(op.Phase), since: op.StartTime, severity: fine,
		message: fmt.Sprintf("%s to release %s (stage %s)", op.Action, op.Release, op.Stage)}
	if op.CompletionTime != nil {
		r.since = op.CompletionTime
	}
	if op.Phase == fleetv1.OperationFailed || op.Phase == fleetv1.OperationTimedOut {
		r.severity = problem
	}
	if op.Message != "" {
		r.message += ": " + op.Message
	}
	return r
}

// clusterTree is the site's application cluster as the site last reported it: phase,
// control-plane and worker nodes, and what its bootstrap agent installed.
func clusterTree(s *fleetv1.Site, hosts []fleetv1.Host, all bool) *row {
	r := &row{name: "Cluster", severity: fine}
	sum := s.Status.Cluster
	if s.Spec.Cluster == nil && sum == nil {
		r.status, r.message = "None", "no spec.cluster: the site is only registered"
		return r
	}
	r.add(conditionRows(s.Status.Conditions, all, fleetv1.SiteClusterSyncedCondition, fleetv1.SiteClusterReadyCondition)...)
	if sum == nil || sum.Phase == "" {
		r.status, r.severity = "NotReported", unknown
		r.message = "the site reports no application cluster yet"
		return r
	}
	r.status = string(sum.Phase)
	if sum.Phase == sitev1.ClusterDegraded {
		r.severity = problem
	}
	var facts []string
	if ready := meta.FindStatusCondition(s.Status.Conditions, fleetv1.SiteClusterReadyCondition); ready != nil && ready.Status == metav1.ConditionUnknown {
		facts = append(facts, "as last reported")
	}
	if sum.KubernetesVersion != "" {
		facts = append(facts, "Kubernetes "+sum.KubernetesVersion)
	}
	if c := s.Spec.Cluster; c != nil && c.Release != "" {
		facts = append(facts, "release "+c.Release)
	}
	r.message = strings.Join(facts, ", ")
	if sum.LastError != "" {
		r.add(&row{name: "LastError", message: sum.LastError, severity: problem})
	}
	r.add(nodesTree("ControlPlane", sum.ControlPlane, hosts, fleetv1.RoleControlPlane),
		nodesTree("Workers", sum.Workers, hosts, fleetv1.RoleWorker))
	if b := sum.Bootstrap; b != nil {
		r.add(bootstrapTree(b, all))
	}
	return r
}

// nodesTree counts the cluster's nodes of a role and lists the hosts of that role the site
// reports.
func nodesTree(name string, n sitev1.NodeCounts, hosts []fleetv1.Host, role fleetv1.HostRole) *row {
	r := &row{name: name, status: fmt.Sprintf("%d/%d", n.Ready, n.Total), message: "nodes ready at the desired version", severity: fine}
	if n.Ready < n.Total {
		r.severity = problem
	}
	for i := range hosts {
		if h := &hosts[i]; h.Spec.Role == role && h.Status.Cluster != nil {
			r.add(nodeRow(h))
		}
	}
	return r
}

// nodeRow is the line of the node a host is, as its site reports it.
func nodeRow(h *fleetv1.Host) *row {
	c := h.Status.Cluster
	r := &row{name: "Node/" + h.Name, status: "Ready", message: c.Version, severity: fine}
	if !c.Ready {
		r.status, r.severity = "NotReady", problem
	}
	return r
}

// bootstrapTree is what the site's Binary Provisioning Agent reports: its phase, the step a
// patch is at (or stopped at), the packages every node runs and the charts' Helm releases.
func bootstrapTree(b *sitev1.BootstrapStatus, all bool) *row {
	r := &row{name: "Bootstrap", status: string(b.Phase), message: b.Message, severity: fine}
	if b.Phase == sitev1.BootstrapFailed {
		r.severity = problem
	}
	if st := b.Step; st != nil {
		// Where a patch stands, or where it stopped when it failed.
		r.add(&row{name: "Step", status: st.Step, since: &st.Since, severity: r.severity,
			message: fmt.Sprintf("%s %s on node %s (%d of %d)", st.Package, st.Version, st.Node, st.Index, st.Of)})
	}
	if b.FailedPackage != "" {
		r.add(&row{name: "FailedPackage", status: "RolledBack", severity: problem,
			message: "sha256:" + b.FailedPackage + ": its patch failed and was rolled back; not tried again until the release's packages change"})
	}
	if se := b.SecretEncryption; se != nil {
		r.add(secretEncryptionRow(se))
	}
	if ca := b.CertificateAuthorities; ca != nil {
		r.add(caRotationRow(ca))
	}
	for _, p := range b.Packages {
		msg := p.Version
		if all && p.SHA256 != "" {
			msg += "  sha256:" + p.SHA256
		}
		r.add(&row{name: "Package/" + p.Name, status: "Installed", message: msg, severity: fine})
	}
	for _, c := range b.Charts {
		r.add(chartRow(c))
	}
	return r
}

// secretEncryptionRow is the key the cluster's API servers encrypt Secrets with: Current, or
// Rotating with the phase and since when.
func secretEncryptionRow(se *sitev1.SecretEncryptionStatus) *row {
	r := &row{name: "SecretEncryption/" + se.Key, status: "Current", since: se.Since, severity: fine,
		message: fmt.Sprintf("%d rotations done", se.Rotations)}
	if se.Phase != "" {
		r.status = "Rotating"
		r.message += ", phase " + string(se.Phase) + " of AddNew, UseNew, DropOld"
	}
	if se.Reencrypted == se.Key {
		r.message += "; every Secret stored under this key"
	} else {
		r.message += "; Secrets stored under an older key or in clear are stored again once every API server has this one"
	}
	return r
}

// caRotationRow is where the roll-over of the cluster's CAs stands: Current, or RollingOver
// with the phase, since when and what it waits for.
func caRotationRow(ca *sitev1.CARotationStatus) *row {
	r := &row{name: "CertificateAuthorities", status: "Current", since: ca.Since, severity: fine,
		message: fmt.Sprintf("%d roll-overs done", ca.Rotations)}
	if ca.Phase != "" {
		r.status = "RollingOver"
		r.message += ", phase " + string(ca.Phase) + " of AddNew (trust both), UseNew (new certificates), DropOld"
	}
	if ca.Waiting != "" {
		r.message += "; waiting: " + ca.Waiting
	}
	return r
}

// chartRow is a chart's Helm release: its state, and whether its pods run.
func chartRow(c sitev1.ChartRelease) *row {
	r := &row{name: "Chart/" + c.Name, status: c.State, severity: fine,
		message: fmt.Sprintf("%s in %s, revision %d, pods %d/%d ready", c.Version, c.Namespace, c.Revision, c.PodsReady, c.PodsDesired)}
	switch {
	case c.State == "failed" || c.PodsReady < c.PodsDesired:
		r.severity = problem
	case c.State != "deployed":
		r.severity = unknown
	}
	if c.Message != "" {
		r.message += "; " + c.Message
	}
	return r
}

// hostsTree lists a site's hosts.
func hostsTree(hosts []fleetv1.Host, all bool) *row {
	roles := map[fleetv1.HostRole]int{}
	for _, h := range hosts {
		roles[h.Spec.Role]++
	}
	r := &row{name: "Hosts", status: fmt.Sprint(len(hosts)), severity: fine,
		message: fmt.Sprintf("%d control plane, %d workers", roles[fleetv1.RoleControlPlane], roles[fleetv1.RoleWorker])}
	for i := range hosts {
		r.add(hostTree(&hosts[i], all))
	}
	return r
}

// hostTree is a host's line, its provisioning state as its site reports it, with its
// conditions that are not True (all: every one).
func hostTree(h *fleetv1.Host, all bool) *row {
	r := &row{name: "Host/" + h.Name, status: "NotReported", severity: unknown, message: string(h.Spec.Role)}
	if c := h.Status.Cluster; c != nil {
		r.status, r.severity = c.ProvisioningState, fine
		if c.Message != "" {
			r.message += ": " + c.Message
			r.severity = problem
		}
	}
	if all {
		r.message += fmt.Sprintf(" (boot MAC %s, BMC %s", h.Spec.BootMACAddress, h.Spec.BMC.Address)
		if h.Spec.Address != "" {
			r.message += ", address " + h.Spec.Address
		}
		r.message += ")"
	}
	r.add(conditionRows(h.Status.Conditions, all, fleetv1.HostSiteBoundCondition, fleetv1.HostBootMACUniqueCondition, fleetv1.HostBMCCredentialsCondition, fleetv1.HostReadyCondition)...)
	if c := h.Status.Cluster; c != nil && c.Hardware != nil {
		r.add(hardwareRow(c.Hardware, all))
	}
	return r
}

// hardwareRow is what the site's inspection found of a host: CPUs, memory, disks and NICs
// (all: each disk and NIC, and the system).
func hardwareRow(hw *sitev1.HostHardware, all bool) *row {
	size := func(b int64) string { return resource.NewQuantity(b, resource.BinarySI).String() }
	r := &row{name: "Hardware", status: "Inspected", severity: fine, message: hw.Summary()}
	if !all {
		return r
	}
	if hw.Manufacturer != "" || hw.ProductName != "" {
		r.message += "; " + strings.TrimSpace(hw.Manufacturer+" "+hw.ProductName)
	}
	if hw.CPUModel != "" {
		r.message += "; CPU " + hw.CPUModel
	}
	for _, d := range hw.Disks {
		r.add(&row{name: "Disk/" + d.Name, status: size(d.SizeBytes), message: strings.TrimSpace(d.Type + " " + d.Model), severity: fine})
	}
	for _, n := range hw.NICs {
		msg := n.MAC
		if n.SpeedGbps > 0 {
			msg += fmt.Sprintf(", %d Gbps", n.SpeedGbps)
		}
		r.add(&row{name: "NIC/" + n.Name, status: "Present", message: msg, severity: fine})
	}
	return r
}
