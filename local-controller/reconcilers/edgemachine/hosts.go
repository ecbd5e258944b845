package edgemachine

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	metal3api "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
)

// edgeMachineKind is the kind named in the consumerRef of a claimed host.
const edgeMachineKind = "EdgeMachine"

// ProviderIDPrefix starts the providerID of every EdgeMachine: metal3://<namespace>/<host>.
const ProviderIDPrefix = "metal3://"

// maxListed caps how many hosts a NoMatchingHost message names.
const maxListed = 8

// consumerRef is the reference a host claimed by em carries.
func consumerRef(em *sitev1.EdgeMachine) *corev1.ObjectReference {
	return &corev1.ObjectReference{
		APIVersion: sitev1.GroupVersion.String(),
		Kind:       edgeMachineKind,
		Namespace:  em.Namespace,
		Name:       em.Name,
	}
}

// consumedBy reports whether the consumerRef of h names em (in any version of the site group).
func consumedBy(h *metal3api.BareMetalHost, em *sitev1.EdgeMachine) bool {
	ref := h.Spec.ConsumerRef
	if ref == nil || ref.Kind != edgeMachineKind || ref.Name != em.Name {
		return false
	}
	ns := ref.Namespace
	if ns == "" {
		ns = h.Namespace
	}
	if ns != em.Namespace {
		return false
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	return err == nil && gv.Group == sitev1.GroupVersion.Group
}

// describeRef names the consumer of a host, for messages.
func describeRef(ref *corev1.ObjectReference) string {
	return fmt.Sprintf("%s %s/%s", ref.Kind, ref.Namespace, ref.Name)
}

// selection is the outcome of matching a host selector against the hosts of a namespace.
type selection struct {
	// candidates are the hosts to try to claim, in this order.
	candidates []*metal3api.BareMetalHost
	// why says, when there is no candidate, what was seen.
	why string
}

// selectHosts returns the hosts sel may claim among hosts (all of the machine's namespace).
//
// With a boot MAC, the candidate is the one host whose spec.bootMACAddress equals it, compared
// case-insensitively and never in part, whatever its provisioning state (its errors then show
// on the machine), as long as no one claimed it, it is not being deleted and it carries
// matchLabels too, if given. Two hosts with the same boot MAC are refused. Without a boot MAC,
// the candidates are the hosts that carry all matchLabels, are free (no consumerRef, not being
// deleted), Metal3 reports available and without error, ordered by name.
func selectHosts(hosts []metal3api.BareMetalHost, sel sitev1.HostSelector) selection {
	sorted := make([]*metal3api.BareMetalHost, 0, len(hosts))
	for i := range hosts {
		sorted = append(sorted, &hosts[i])
	}
	slices.SortFunc(sorted, func(a, b *metal3api.BareMetalHost) int { return strings.Compare(a.Name, b.Name) })

	if sel.BootMACAddress != "" {
		return selectByMAC(sorted, sel)
	}
	if len(sel.MatchLabels) == 0 {
		return selection{why: "spec.hostSelector gives neither bootMACAddress nor matchLabels"}
	}
	var out []*metal3api.BareMetalHost
	var skipped []string
	for _, h := range sorted {
		if !hasLabels(h, sel.MatchLabels) {
			continue
		}
		if why := notClaimable(h); why != "" {
			skipped = append(skipped, h.Name+" "+why)
			continue
		}
		out = append(out, h)
	}
	if len(out) > 0 {
		return selection{candidates: out}
	}
	if len(skipped) == 0 {
		return selection{why: "no BareMetalHost carries the labels " + describeLabels(sel.MatchLabels)}
	}
	more := ""
	if len(skipped) > maxListed {
		more = fmt.Sprintf(", and %d more", len(skipped)-maxListed)
		skipped = skipped[:maxListed]
	}
	return selection{why: fmt.Sprintf("none of the %d BareMetalHosts with the labels %s is free and available: %s%s",
		len(skipped), describeLabels(sel.MatchLabels), strings.Join(skipped, "; "), more)}
}

func selectByMAC(sorted []*metal3api.BareMetalHost, sel sitev1.HostSelector) selection {
	var withMAC []*metal3api.BareMetalHost
	for _, h := range sorted {
		if strings.EqualFold(h.Spec.BootMACAddress, sel.BootMACAddress) {
			withMAC = append(withMAC, h)
		}
	}
	if len(withMAC) == 0 {
		return selection{why: "no BareMetalHost has the boot MAC " + sel.BootMACAddress}
	}
	if len(withMAC) > 1 {
		names := make([]string, 0, len(withMAC))
		for _, h := range withMAC {
			names = append(names, h.Name)
		}
		return selection{why: fmt.Sprintf("%d BareMetalHosts have the boot MAC %s (%s): refusing to choose one",
			len(withMAC), sel.BootMACAddress, strings.Join(names, ", "))}
	}
	h := withMAC[0]
	switch {
	case h.Spec.ConsumerRef != nil:
		return selection{why: fmt.Sprintf("BareMetalHost %s with the boot MAC %s is claimed by %s", h.Name, sel.BootMACAddress, describeRef(h.Spec.ConsumerRef))}
	case !h.DeletionTimestamp.IsZero():
		return selection{why: fmt.Sprintf("BareMetalHost %s with the boot MAC %s is being deleted", h.Name, sel.BootMACAddress)}
	case !hasLabels(h, sel.MatchLabels):
		return selection{why: fmt.Sprintf("BareMetalHost %s with the boot MAC %s lacks the labels %s", h.Name, sel.BootMACAddress, describeLabels(sel.MatchLabels))}
	}
	return selection{candidates: []*metal3api.BareMetalHost{h}}
}

// free reports whether h is claimed by no one and not being deleted.
func free(h *metal3api.BareMetalHost) bool {
	return h.Spec.ConsumerRef == nil && h.DeletionTimestamp.IsZero()
}

// notClaimable says why a host carrying the selector's labels cannot be picked by labels, or ""
// when it can.
func notClaimable(h *metal3api.BareMetalHost) string {
	st := h.Status.Provisioning.State
	switch {
	case h.Spec.ConsumerRef != nil:
		return "claimed by " + describeRef(h.Spec.ConsumerRef)
	case !h.DeletionTimestamp.IsZero():
		return "being deleted"
	case hostError(h) != "":
		return "failed: " + hostError(h)
	case st != metal3api.StateAvailable && st != metal3api.StateReady:
		if st == metal3api.StateNone {
			return "not registered yet"
		}
		return string(st)
	}
	return ""
}

func hasLabels(h *metal3api.BareMetalHost, want map[string]string) bool {
	for k, v := range want {
		if got, ok := h.Labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

func describeLabels(labels map[string]string) string {
	keys := slices.Sorted(maps.Keys(labels))
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+"="+labels[k])
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// describeSelector names a host selector, for messages.
func describeSelector(sel sitev1.HostSelector) string {
	var parts []string
	if sel.BootMACAddress != "" {
		parts = append(parts, "bootMACAddress "+sel.BootMACAddress)
	}
	if len(sel.MatchLabels) > 0 {
		parts = append(parts, "matchLabels "+describeLabels(sel.MatchLabels))
	}
	return strings.Join(parts, " and ")
}

// hostError returns Metal3's error on h ("<type>: <message>"), or "" when it reports none.
func hostError(h *metal3api.BareMetalHost) string {
	st := h.Status
	if st.ErrorType == "" && st.ErrorMessage == "" && st.OperationalStatus != metal3api.OperationalStatusError {
		return ""
	}
	msg := st.ErrorMessage
	if msg == "" {
		msg = "operational status " + string(st.OperationalStatus)
	}
	if st.ErrorType != "" {
		msg = string(st.ErrorType) + ": " + msg
	}
	return msg
}

// desiredImage is the image em asks Metal3 to write.
func desiredImage(em *sitev1.EdgeMachine) *metal3api.Image {
	img := &metal3api.Image{
		URL:          em.Spec.Image.URL,
		Checksum:     em.Spec.Image.SHA256,
		ChecksumType: metal3api.SHA256,
	}
	if em.Spec.Image.Format != "" {
		img.DiskFormat = ptr.To(em.Spec.Image.Format)
	}
	return img
}

// provisioned reports whether Metal3 has provisioned h with the image its spec asks for.
func provisioned(h *metal3api.BareMetalHost) bool {
	done := h.Status.Provisioning.Image
	return h.Status.Provisioning.State == metal3api.StateProvisioned && h.Spec.Image != nil &&
		done.URL == h.Spec.Image.URL && done.Checksum == h.Spec.Image.Checksum
}

// holdsImage reports whether h is being provisioned, is provisioned or is being deprovisioned:
// a released host must first leave these states.
func holdsImage(h *metal3api.BareMetalHost) bool {
	switch h.Status.Provisioning.State {
	case metal3api.StateProvisioning, metal3api.StateProvisioned, metal3api.StateDeprovisioning:
		return true
	}
	return false
}

// providerID is the providerID of a machine on host h.
func providerID(h *metal3api.BareMetalHost) string {
	return ProviderIDPrefix + h.Namespace + "/" + h.Name
}

// addresses are the machine's addresses on host h: its name, and the IP of every NIC that
// inspection found with one.
func addresses(h *metal3api.BareMetalHost) []sitev1.MachineAddress {
	out := []sitev1.MachineAddress{{Type: "Hostname", Address: h.Name}}
	if h.Status.HardwareDetails == nil {
		return out
	}
	seen := map[string]bool{}
	for _, nic := range h.Status.HardwareDetails.NIC {
		if nic.IP == "" || seen[nic.IP] {
			continue
		}
		seen[nic.IP] = true
		out = append(out, sitev1.MachineAddress{Type: "InternalIP", Address: nic.IP})
	}
	return out
}
