package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
)

// HostRole is the part a host plays in its site's application cluster.
// +kubebuilder:validation:Enum=control-plane;worker
type HostRole string

// Host roles.
const (
	// RoleControlPlane hosts run etcd and the Kubernetes control plane.
	RoleControlPlane HostRole = "control-plane"
	// RoleWorker hosts run workloads.
	RoleWorker HostRole = "worker"
)

// Host conditions.
const (
	// HostSiteBoundCondition is True when spec.siteRef names an existing Site.
	HostSiteBoundCondition = "SiteBound"
	// HostBootMACUniqueCondition is False when another Host, anywhere in the fleet, was
	// registered earlier with the same boot MAC; the message names that host.
	HostBootMACUniqueCondition = "BootMACUnique"
	// HostBMCCredentialsCondition is False when the Secret spec.bmc.credentialsSecretRef names
	// does not exist; the message names it. (Vault entries are read by the site controller at
	// each push, which tells a missing one in the Site's ClusterSynced condition.)
	HostBMCCredentialsCondition = "BMCCredentialsFound"
	// HostReadyCondition summarizes the others: True when the host can be provisioned.
	HostReadyCondition = "Ready"
)

// Reasons used by the Host conditions.
const (
	// ReasonSiteFound means the referenced Site exists.
	ReasonSiteFound = "SiteFound"
	// ReasonSiteNotFound means the referenced Site does not exist (yet).
	ReasonSiteNotFound = "SiteNotFound"
	// ReasonSiteDeleting means the referenced Site is being deleted.
	ReasonSiteDeleting = "SiteDeleting"
	// ReasonBootMACUnique means no other host claims the boot MAC.
	ReasonBootMACUnique = "BootMACUnique"
	// ReasonDuplicateBootMAC means an earlier host claims the same boot MAC.
	ReasonDuplicateBootMAC = "DuplicateBootMAC"
	// ReasonBMCCredentialsFound means the BMC credentials Secret exists.
	ReasonBMCCredentialsFound = "BMCCredentialsFound"
	// ReasonBMCCredentialsNotFound means the BMC credentials Secret does not exist (yet).
	ReasonBMCCredentialsNotFound = "BMCCredentialsNotFound"
	// ReasonBMCCredentialsInVault means the credentials are a Vault entry, which the host
	// controller does not read.
	ReasonBMCCredentialsInVault = "BMCCredentialsInVault"
	// ReasonHostReady means the host is bound to its site, its boot MAC is its own and its BMC
	// credentials Secret exists.
	ReasonHostReady = "HostReady"
	// ReasonHostNotReady means one of the other conditions is not True; the message names it.
	ReasonHostNotReady = "HostNotReady"
)

// HostSpec describes one bare-metal (or VM) machine of a site.
type HostSpec struct {
	// SiteRef names the Site, in the Host's namespace, the host belongs to. Immutable.
	// +required
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="is immutable: delete the host and register it again to move it to another site"
	SiteRef SiteReference `json:"siteRef"`

	// Role of the host in the site's application cluster.
	// +required
	Role HostRole `json:"role"`

	// BootMACAddress is the MAC address of the NIC the host boots from, e.g. "52:54:00:12:34:56".
	// It identifies the host and is unique across the fleet.
	// Immutable: a host with another NIC is registered again.
	// +required
	// +kubebuilder:validation:Pattern=`^([0-9a-fA-F]{2}:){5}[0-9a-fA-F]{2}$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="is immutable: delete the host and register it again with the new boot MAC"
	BootMACAddress string `json:"bootMACAddress"`

	// BMC is how the host's baseboard management controller is reached.
	// +required
	BMC BMCDetails `json:"bmc"`

	// RootDeviceHints select the disk the OS image is written to.
	// +optional
	RootDeviceHints *RootDeviceHints `json:"rootDeviceHints,omitempty"`

	// Address is the IP address the host has on the site network once provisioned (a DHCP
	// reservation for its boot MAC, or static network configuration). The site's Binary
	// Provisioning Agent reaches the host's SSH server there; a host without one is provisioned
	// but never made a node.
	// +optional
	// +kubebuilder:validation:MaxLength=45
	// +kubebuilder:validation:XValidation:rule="isIP(self)",message="must be an IP address, e.g. 10.0.0.11"
	Address string `json:"address,omitempty"`
}

// SiteReference names a Site in the same namespace.
type SiteReference struct {
	// Name of the Site.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// BMCDetails is the address of a BMC and where its credentials are.
// +kubebuilder:validation:XValidation:rule="has(self.credentialsSecretRef) != has(self.credentialsVaultRef)",message="set exactly one of credentialsSecretRef and credentialsVaultRef"
type BMCDetails struct {
	// Address of the BMC, with the driver as scheme: ipmi://, redfish://, redfish+http://,
	// redfish+https://, redfish-virtualmedia://, redfish-uefihttp://, idrac://, idrac-redfish://,
	// idrac-virtualmedia://, ilo4://, ilo4-virtualmedia://, ilo5://, ilo5-redfish://,
	// ilo5-virtualmedia://, irmc://, irmc-virtualmedia://.
	// +required
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="self.matches('^(ipmi|redfish|redfish[+]https?|redfish-virtualmedia|redfish-uefihttp|idrac|idrac-redfish|idrac-virtualmedia|ilo4|ilo4-virtualmedia|ilo5|ilo5-redfish|ilo5-virtualmedia|irmc|irmc-virtualmedia)://[^/:?#]+')",message="must be DRIVER://HOST[:PORT][/PATH] with DRIVER one of ipmi, redfish, redfish+http, redfish+https, redfish-virtualmedia, redfish-uefihttp, idrac, idrac-redfish, idrac-virtualmedia, ilo4, ilo4-virtualmedia, ilo5, ilo5-redfish, ilo5-virtualmedia, irmc, irmc-virtualmedia"
	Address string `json:"address"`

	// CredentialsSecretRef names the Secret, in the Host's namespace, with the BMC's "username"
	// and "password". Set this or credentialsVaultRef.
	// +optional
	CredentialsSecretRef *SecretReference `json:"credentialsSecretRef,omitempty"`

	// CredentialsVaultRef names the entry of the global controller's Vault with the BMC's
	// "username" and "password". Set this or credentialsSecretRef.
	// +optional
	CredentialsVaultRef *VaultReference `json:"credentialsVaultRef,omitempty"`

	// DisableCertificateVerification skips TLS verification of the BMC (self-signed BMCs).
	// +optional
	DisableCertificateVerification bool `json:"disableCertificateVerification,omitempty"`
}

// SecretReference names a Secret in the referencing object's namespace.
type SecretReference struct {
	// Name of the Secret.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name"`
}

// VaultReference names an entry of the KV version 2 engine the global controller reads
// (--vault-mount), at <--vault-prefix>/<the referencing object's namespace>/<path>: an object
// reaches only its namespace's entries, as a Secret reference reaches only its namespace's
// Secrets.
type VaultReference struct {
	// Path of the entry under <--vault-prefix>/<namespace>/: segments of letters, digits, '.',
	// '_' and '-', not starting with '.', separated by '/' (for example "bmc/host-1").
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_-][A-Za-z0-9._-]*(/[A-Za-z0-9_-][A-Za-z0-9._-]*)*$`
	Path string `json:"path"`
}

// RootDeviceHints select the install disk; every hint given must match. They follow Metal3's
// BareMetalHost root device hints.
// +kubebuilder:validation:MinProperties=1
type RootDeviceHints struct {
	// DeviceName is a Linux device name ("/dev/sda") or a /dev/disk/by-path link.
	// +optional
	// +kubebuilder:validation:Pattern=`^/dev/`
	// +kubebuilder:validation:MaxLength=256
	DeviceName string `json:"deviceName,omitempty"`
	// HCTL is the SCSI address, e.g. "0:0:0:0".
	// +optional
	// +kubebuilder:validation:Pattern=`^[0-9]+:[0-9]+:[0-9]+:[0-9]+$`
	HCTL string `json:"hctl,omitempty"`
	// Model is a substring of the disk's vendor model.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Model string `json:"model,omitempty"`
	// Vendor is a substring of the disk's vendor.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Vendor string `json:"vendor,omitempty"`
	// SerialNumber is the disk's serial number.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	SerialNumber string `json:"serialNumber,omitempty"`
	// MinSizeGigabytes is the smallest size, in GB, the disk may have.
	// +optional
	// +kubebuilder:validation:Minimum=1
	MinSizeGigabytes int32 `json:"minSizeGigabytes,omitempty"`
	// WWN is the disk's unique storage identifier.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	WWN string `json:"wwn,omitempty"`
	// Rotational selects spinning (true) or solid-state (false) disks.
	// +optional
	Rotational *bool `json:"rotational,omitempty"`
}

// HostStatus is what the global controller last saw of the host.
type HostStatus struct {
	// Conditions: SiteBound, BootMACUnique, Ready.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// ObservedGeneration is the generation last reconciled cleanly.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Cluster is where the host stands in its site's application cluster, as the site last
	// reported it (its ApplicationCluster's status.hosts, read on every heartbeat). Unset while
	// the site reports nothing of the host; kept while the site is unreachable.
	// +optional
	Cluster *HostClusterStatus `json:"cluster,omitempty"`
}

// HostClusterStatus is what a site reports of one of its hosts.
type HostClusterStatus struct {
	// ProvisioningState is Metal3's state of the host (registering, inspecting, available,
	// provisioning, provisioned, deprovisioning, ...).
	// +optional
	ProvisioningState string `json:"provisioningState,omitempty"`
	// Ready is true when the host is a ready node of the cluster.
	// +optional
	Ready bool `json:"ready,omitempty"`
	// Version is the Kubernetes version of the host's node.
	// +optional
	Version string `json:"version,omitempty"`
	// Message says what is wrong, when something is.
	// +optional
	Message string `json:"message,omitempty"`
	// Hardware is what the site's inspection found of the host; unset until it was inspected.
	// +optional
	Hardware *sitev1.HostHardware `json:"hardware,omitempty"`
}

// Host is a bare-metal (or VM) machine of a site, with its role in the site's application
// cluster and how to reach its BMC.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=edgefleet
// +kubebuilder:selectablefield:JSONPath=`.spec.siteRef.name`
// +kubebuilder:printcolumn:name="Site",type=string,JSONPath=`.spec.siteRef.name`
// +kubebuilder:printcolumn:name="Role",type=string,JSONPath=`.spec.role`
// +kubebuilder:printcolumn:name="Boot-MAC",type=string,JSONPath=`.spec.bootMACAddress`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Provisioning",type=string,JSONPath=`.status.cluster.provisioningState`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,priority=1
// +kubebuilder:printcolumn:name="BMC",type=string,JSONPath=`.spec.bmc.address`,priority=1
// +kubebuilder:printcolumn:name="CPUs",type=integer,JSONPath=`.status.cluster.hardware.cpus`,priority=1
// +kubebuilder:printcolumn:name="Memory-MiB",type=integer,JSONPath=`.status.cluster.hardware.memoryMiB`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Host struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec   HostSpec   `json:"spec"`
	Status HostStatus `json:"status,omitempty"`
}

// HostList is a list of Hosts.
//
// +kubebuilder:object:root=true
type HostList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Host `json:"items"`
}
