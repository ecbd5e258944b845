package site

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
	"github.com/edgefleet/edgefleet/global-controller/index"
)

// This file builds the objects pushed to a site and the summary read back, without any I/O.

// defaultAPIPort is the port of spec.network.controlPlaneEndpoint when none is given (the CRDs
// default it too; the builder fills it so the comparison with the site's copy holds either way).
const defaultAPIPort = 6443

// clusterHostName matches the names an ApplicationCluster accepts for its hosts (they name
// BareMetalHosts and nodes).
var clusterHostName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// unusable says why a Host cannot be pushed, or "" when it can (its BMC credentials aside).
func unusable(h *fleetv1.Host) string {
	if len(h.Name) > 63 || !clusterHostName.MatchString(h.Name) {
		return "its name is not a valid node name (at most 63 lower-case letters, digits and '-')"
	}
	ready := meta.FindStatusCondition(h.Status.Conditions, fleetv1.HostReadyCondition)
	switch {
	case ready == nil:
		return "not checked by the host controller yet"
	case ready.Status != metav1.ConditionTrue:
		return fmt.Sprintf("Ready is %s: %s", ready.Status, ready.Message)
	}
	return ""
}

// clusterHost is a Host's entry in the ApplicationCluster.
func clusterHost(h *fleetv1.Host) sitev1.ClusterHost {
	return sitev1.ClusterHost{
		Name:           h.Name,
		Role:           sitev1.HostRole(h.Spec.Role),
		BootMACAddress: index.NormalizeMAC(h.Spec.BootMACAddress),
		BMC: sitev1.BMC{
			Address:                        h.Spec.BMC.Address,
			CredentialsName:                bmcSecretName(h.Name),
			DisableCertificateVerification: h.Spec.BMC.DisableCertificateVerification,
		},
		Address: h.Spec.Address,
	}
}

func bmcSecretName(host string) string { return host + sitev1.BMCSecretSuffix }

// sortHosts orders hosts control plane first, then by name, so the same Hosts always give the
// same spec.
func sortHosts(hosts []sitev1.ClusterHost) {
	slices.SortFunc(hosts, func(a, b sitev1.ClusterHost) int {
		if a.Role != b.Role {
			if a.Role == sitev1.RoleControlPlane {
				return -1
			}
			if b.Role == sitev1.RoleControlPlane {
				return 1
			}
		}
		return cmp.Compare(a.Name, b.Name)
	})
}

func hasControlPlane(hosts []sitev1.ClusterHost) bool {
	return slices.ContainsFunc(hosts, func(h sitev1.ClusterHost) bool { return h.Role == sitev1.RoleControlPlane })
}

// content is what a site's cluster runs: from its Release, or from spec.cluster itself.
type content struct {
	kubernetesVersion        string
	osImage                  sitev1.OSImage
	packages, charts, images []sitev1.ArtifactRef
}

// inlineContent is the content of a spec.cluster that names no release; ok is false when it
// gives no version and image either.
func inlineContent(c *fleetv1.SiteCluster) (content, bool) {
	if c.KubernetesVersion == "" || c.OSImage == nil {
		return content{}, false
	}
	return content{kubernetesVersion: c.KubernetesVersion, osImage: *c.OSImage}, true
}

// releaseContent is the content of a Release.
func releaseContent(r *fleetv1.Release) content {
	return content{
		kubernetesVersion: r.Spec.KubernetesVersion,
		osImage:           r.Spec.OSImage,
		packages:          slices.Clone(r.Spec.Packages),
		charts:            slices.Clone(r.Spec.Charts),
		images:            slices.Clone(r.Spec.Images),
	}
}

// desiredSpec is the ApplicationCluster spec of a site's spec.cluster, content and hosts
// (sorted). OperationGeneration never goes down: the value on the site is kept unless a higher
// one is asked for.
func desiredSpec(c *fleetv1.SiteCluster, what content, hosts []sitev1.ClusterHost, operationGeneration int64, existing *sitev1.ApplicationCluster) sitev1.ApplicationClusterSpec {
	network := *c.Network.DeepCopy()
	if network.ControlPlaneEndpoint.Port == 0 {
		network.ControlPlaneEndpoint.Port = defaultAPIPort
	}
	policy := c.HostRemovalPolicy
	if policy == "" {
		policy = sitev1.RemovalDeprovision
	}
	if existing != nil {
		operationGeneration = max(operationGeneration, existing.Spec.OperationGeneration)
	}
	return sitev1.ApplicationClusterSpec{
		Rotations:           rotations(c.Rotations, existing),
		KubernetesVersion:   what.kubernetesVersion,
		OSImage:             what.osImage,
		Packages:            what.packages,
		Charts:              what.charts,
		Images:              what.images,
		Hosts:               hosts,
		Network:             network,
		HostRemovalPolicy:   policy,
		OperationGeneration: operationGeneration,
	}
}

// rotations are the rotations the site is asked for: the Site's, never fewer than the site
// has been asked for already (a rotation cannot be taken back; the site refuses a lower count).
func rotations(asked *sitev1.ClusterRotations, existing *sitev1.ApplicationCluster) *sitev1.ClusterRotations {
	var was *sitev1.ClusterRotations
	if existing != nil {
		was = existing.Spec.Rotations
	}
	if asked == nil && was == nil {
		return nil
	}
	out := &sitev1.ClusterRotations{}
	for _, r := range []*sitev1.ClusterRotations{asked, was} {
		if r != nil {
			out.SecretEncryptionKey = max(out.SecretEncryptionKey, r.SecretEncryptionKey)
			out.CertificateAuthorities = max(out.CertificateAuthorities, r.CertificateAuthorities)
		}
	}
	return out
}

// managed reports whether the global controller wrote o (it touches nothing else).
func managed(o metav1.Object) bool {
	return o.GetLabels()[sitev1.ManagedByLabel] == sitev1.ManagedByGlobal
}

// markPushed sets the labels and annotations of a pushed object; it reports whether it changed
// anything.
func markPushed(o metav1.Object, labels map[string]string, source string) bool {
	changed := false
	l := o.GetLabels()
	if l == nil {
		l = map[string]string{}
	}
	labels[sitev1.ManagedByLabel] = sitev1.ManagedByGlobal
	for k, v := range labels {
		if l[k] != v {
			l[k], changed = v, true
		}
	}
	o.SetLabels(l)
	a := o.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	if a[sitev1.SourceAnnotation] != source {
		a[sitev1.SourceAnnotation], changed = source, true
	}
	o.SetAnnotations(a)
	return changed
}

// applyClusterSpec makes ac the desired ApplicationCluster of site; it reports whether it changed
// anything, so an unchanged object is not written. operation, when set, is the ID of the
// operation the spec carries: it is recorded in the OperationAnnotation.
func applyClusterSpec(ac *sitev1.ApplicationCluster, site *fleetv1.Site, spec sitev1.ApplicationClusterSpec, operation string) bool {
	changed := markPushed(ac, map[string]string{}, "Site "+index.Key(site.Namespace, site.Name))
	if operation != "" && ac.Annotations[sitev1.OperationAnnotation] != operation {
		ac.Annotations[sitev1.OperationAnnotation], changed = operation, true
	}
	if !apiequality.Semantic.DeepEqual(ac.Spec, spec) {
		ac.Spec, changed = spec, true
	}
	return changed
}

// dataHash is the DataHashAnnotation of BMC credentials copied from the source version with
// this fingerprint: salted with the source's identity, so equal passwords do not show as equal
// hashes.
func dataHash(sourceFingerprint, username, password string) string {
	salt := sourceFingerprint
	if i := strings.LastIndexByte(sourceFingerprint, '/'); i >= 0 {
		salt = sourceFingerprint[:i]
	}
	sum := sha256.Sum256([]byte(salt + "\x00" + username + "\x00" + password))
	return hex.EncodeToString(sum[:])
}

// fingerprint identifies one version of a global Secret: "<uid>/<resourceVersion>".
func fingerprint(uid, resourceVersion string) string { return uid + "/" + resourceVersion }

// vaultFingerprint identifies one version of a Vault entry: "vault:<where>/v<version>".
func vaultFingerprint(where string, version int) string {
	return "vault:" + where + "/v" + strconv.Itoa(version)
}

// bmcSecretCurrent reports whether the site's copy of a host's BMC Secret was made from this
// version of its source and still holds the data written then. The source need not be read for
// that.
func bmcSecretCurrent(s *corev1.Secret, cluster, host, sourceFingerprint string) bool {
	if s == nil || !managed(s) || s.Labels[sitev1.ClusterLabel] != cluster || s.Labels[sitev1.HostLabel] != host ||
		s.Annotations[sitev1.SourceVersionAnnotation] != sourceFingerprint || len(s.Data) != 2 {
		return false
	}
	return s.Annotations[sitev1.DataHashAnnotation] == dataHash(sourceFingerprint, string(s.Data[sitev1.BMCUsernameKey]), string(s.Data[sitev1.BMCPasswordKey]))
}

// credentials returns the username and password of BMC credentials, or why they are unusable;
// source names where they are for the message.
func credentials(source string, data func(key string) string) (username, password, why string) {
	for _, k := range []string{sitev1.BMCUsernameKey, sitev1.BMCPasswordKey} {
		if data(k) == "" {
			return "", "", fmt.Sprintf("%s has no key %q or it is empty", source, k)
		}
	}
	return data(sitev1.BMCUsernameKey), data(sitev1.BMCPasswordKey), ""
}

// applyBMCSecret makes s the site's copy of a host's BMC credentials, from the source version
// with this fingerprint (source names it: "Secret <ns>/<name>", "Vault <path>"); it reports
// whether it changed anything.
func applyBMCSecret(s *corev1.Secret, source, sourceFingerprint, cluster, host, username, password string) bool {
	changed := markPushed(s, map[string]string{sitev1.ClusterLabel: cluster, sitev1.HostLabel: host}, source)
	if s.Annotations[sitev1.SourceVersionAnnotation] != sourceFingerprint {
		s.Annotations[sitev1.SourceVersionAnnotation], changed = sourceFingerprint, true
	}
	if h := dataHash(sourceFingerprint, username, password); s.Annotations[sitev1.DataHashAnnotation] != h {
		s.Annotations[sitev1.DataHashAnnotation], changed = h, true
	}
	data := map[string][]byte{sitev1.BMCUsernameKey: []byte(username), sitev1.BMCPasswordKey: []byte(password)}
	if !apiequality.Semantic.DeepEqual(s.Data, data) {
		s.Data, changed = data, true
	}
	if s.Type == "" {
		s.Type = corev1.SecretTypeOpaque
	}
	return changed
}

// summary is the Site's copy of an ApplicationCluster's status; nil while the site has reported
// nothing on it (ClusterReady says so).
func summary(ac *sitev1.ApplicationCluster) *fleetv1.ClusterSummary {
	st := ac.Status
	if st.Phase == "" && st.ObservedGeneration == 0 {
		return nil
	}
	sum := &fleetv1.ClusterSummary{
		Phase:                       st.Phase,
		KubernetesVersion:           st.KubernetesVersion,
		ControlPlane:                st.ControlPlane,
		Workers:                     st.Workers,
		ObservedGeneration:          st.ObservedGeneration,
		ObservedOperationGeneration: st.ObservedOperationGeneration,
		LastError:                   st.LastError,
		Bootstrap:                   st.Bootstrap.DeepCopy(),
	}
	if ready := meta.FindStatusCondition(st.Conditions, sitev1.ApplicationClusterReadyCondition); ready != nil {
		sum.Message = ready.Message
	}
	return sum
}

// hostReport is what the ApplicationCluster's status says of host (nil: nothing).
func hostReport(ac *sitev1.ApplicationCluster, host string) *fleetv1.HostClusterStatus {
	if ac == nil {
		return nil
	}
	for _, h := range ac.Status.Hosts {
		if h.Name == host {
			return &fleetv1.HostClusterStatus{ProvisioningState: h.ProvisioningState, Ready: h.Ready, Version: h.Version, Message: h.Message, Hardware: h.Hardware.DeepCopy()}
		}
	}
	return nil
}

// clusterReady is the Site's ClusterReady condition for the ApplicationCluster on the site (nil:
// none there).
func clusterReady(ac *sitev1.ApplicationCluster) (metav1.ConditionStatus, string, string) {
	if ac == nil {
		return metav1.ConditionFalse, fleetv1.ReasonClusterNotReported, "there is no ApplicationCluster on the site"
	}
	name := index.Key(ac.Namespace, ac.Name)
	ready := meta.FindStatusCondition(ac.Status.Conditions, sitev1.ApplicationClusterReadyCondition)
	switch {
	case ready == nil:
		return metav1.ConditionFalse, fleetv1.ReasonClusterNotReported,
			fmt.Sprintf("the site reports no Ready condition on ApplicationCluster %s yet (is its local controller running?)", name)
	case ac.Status.Bootstrap != nil && ac.Status.Bootstrap.Phase == sitev1.BootstrapFailed && ac.Status.Bootstrap.ObservedGeneration >= ac.Generation:
		// Nodes Ready of an older release are not the cluster the Site asks for.
		return metav1.ConditionFalse, fleetv1.ReasonBootstrapFailed,
			fmt.Sprintf("the site's BPA reports ApplicationCluster %s Failed: %s (nodes: Ready=%s %s: %s)", name, ac.Status.Bootstrap.Message, ready.Status, ready.Reason, ready.Message)
	case ac.Status.ObservedGeneration < ac.Generation:
		return metav1.ConditionFalse, fleetv1.ReasonClusterUpdatePending,
			fmt.Sprintf("the site has not reconciled generation %d of ApplicationCluster %s yet (last: %d, Ready=%s %s: %s)",
				ac.Generation, name, ac.Status.ObservedGeneration, ready.Status, ready.Reason, ready.Message)
	case ready.Status == metav1.ConditionTrue:
		return metav1.ConditionTrue, fleetv1.ReasonClusterReady, fmt.Sprintf("the site reports ApplicationCluster %s Ready: %s", name, ready.Message)
	default:
		return metav1.ConditionFalse, fleetv1.ReasonClusterNotReady,
			fmt.Sprintf("the site reports ApplicationCluster %s Ready=%s %s: %s", name, ready.Status, ready.Reason, ready.Message)
	}
}
