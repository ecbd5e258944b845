package v1alpha1

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ApplicationClusterFinalizer lets the local controller take the cluster's machines and hosts
// down before the object goes away.
const ApplicationClusterFinalizer = "site.edgefleet.io/applicationcluster"

// ApplicationCluster conditions. Each is set on every reconcile with a reason and a message that
// says what was seen and what to do.
const (
	// HostsProvisionedCondition is True when every host of the cluster is provisioned by Metal3.
	// False names the hosts that are not, and why (a failed host does not stop the others).
	HostsProvisionedCondition = "HostsProvisioned"
	// ControlPlaneReadyCondition is True when every control-plane host is a ready node of the
	// desired Kubernetes version.
	ControlPlaneReadyCondition = "ControlPlaneReady"
	// WorkersReadyCondition is True when every worker host is a ready node of the desired
	// Kubernetes version.
	WorkersReadyCondition = "WorkersReady"
	// ApplicationClusterReadyCondition summarizes the others.
	ApplicationClusterReadyCondition = "Ready"
)

// Reasons of the ApplicationCluster conditions.
const (
	// ReasonAllHostsProvisioned means every host is provisioned.
	ReasonAllHostsProvisioned = "AllHostsProvisioned"
	// ReasonHostsProvisioning means some hosts are still on their way (registering, inspecting,
	// provisioning); the message lists them with their state.
	ReasonHostsProvisioning = "HostsProvisioning"
	// ReasonHostFailed means Metal3 reported an error on at least one host; the message names
	// each and gives Metal3's error.
	ReasonHostFailed = "HostFailed"
	// ReasonNodesReady means the nodes are ready and run the desired version.
	ReasonNodesReady = "NodesReady"
	// ReasonNodesNotReady means some nodes are not ready yet; the message names them.
	ReasonNodesNotReady = "NodesNotReady"
	// ReasonClusterReady means the cluster is ready.
	ReasonClusterReady = "ClusterReady"
	// ReasonClusterNotReady means another condition is not True; the message names it.
	ReasonClusterNotReady = "ClusterNotReady"
)

// HostRole is what a host is in the application cluster.
// +kubebuilder:validation:Enum=control-plane;worker
type HostRole string

// Host roles.
const (
	// RoleControlPlane hosts run etcd and the Kubernetes control plane.
	RoleControlPlane HostRole = "control-plane"
	// RoleWorker hosts run workloads.
	RoleWorker HostRole = "worker"
)

// HostRemovalPolicy says what happens to a host removed from a cluster.
// +kubebuilder:validation:Enum=Deprovision;Keep
type HostRemovalPolicy string

// Host removal policies.
const (
	// RemovalDeprovision wipes the host (Metal3 deprovisions it) and forgets it.
	RemovalDeprovision HostRemovalPolicy = "Deprovision"
	// RemovalKeep only takes the host out of the cluster: its machine is deleted, the host stays
	// provisioned as it is, released for another use.
	RemovalKeep HostRemovalPolicy = "Keep"
)

// ClusterPhase is where an application cluster stands, in one word.
// +kubebuilder:validation:Enum=Pending;Provisioning;Provisioned;Updating;Degraded;Deleting
type ClusterPhase string

// Cluster phases (see docs/site-provisioning.md for the diagram).
const (
	// ClusterPending has nothing provisioned yet.
	ClusterPending ClusterPhase = "Pending"
	// ClusterProvisioning is bringing hosts up for the first time.
	ClusterProvisioning ClusterPhase = "Provisioning"
	// ClusterProvisioned has every host a ready node of the desired version.
	ClusterProvisioned ClusterPhase = "Provisioned"
	// ClusterUpdating is adding, removing or replacing hosts of a cluster that was provisioned.
	ClusterUpdating ClusterPhase = "Updating"
	// ClusterDegraded has hosts that failed; the others carry on.
	ClusterDegraded ClusterPhase = "Degraded"
	// ClusterDeleting is taking the cluster down.
	ClusterDeleting ClusterPhase = "Deleting"
)

// ApplicationClusterSpec is the desired application Kubernetes cluster of a site.
// +kubebuilder:validation:XValidation:rule="self.hosts.exists(h, h.role == 'control-plane')",message="hosts must include at least one control-plane host"
type ApplicationClusterSpec struct {
	// KubernetesVersion of every node, e.g. "v1.36.3". Changing it replaces the nodes one by
	// one, control plane first.
	// +required
	// +kubebuilder:validation:Pattern=`^v[0-9]+\.[0-9]+\.[0-9]+$`
	KubernetesVersion string `json:"kubernetesVersion"`

	// OSImage is written to every host by Metal3.
	// +required
	OSImage OSImage `json:"osImage"`

	// Packages are the binary packages the bootstrap provider installs on the hosts.
	// +optional
	// +listType=map
	// +listMapKey=sha256
	// +kubebuilder:validation:MaxItems=64
	Packages []ArtifactRef `json:"packages,omitempty"`

	// Charts are the Helm charts installed into the cluster once it is up.
	// +optional
	// +listType=map
	// +listMapKey=sha256
	// +kubebuilder:validation:MaxItems=64
	Charts []ArtifactRef `json:"charts,omitempty"`

	// Images are container image archives the bootstrap provider imports into every node's
	// container runtime (through the package whose manifest has an importImage hook).
	// +optional
	// +listType=map
	// +listMapKey=sha256
	// +kubebuilder:validation:MaxItems=64
	Images []ArtifactRef `json:"images,omitempty"`

	// Hosts are the bare-metal machines of the cluster. Adding one scales out, removing one
	// scales in (see HostRemovalPolicy).
	// +required
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=500
	Hosts []ClusterHost `json:"hosts"`

	// Network of the cluster.
	// +required
	Network ClusterNetwork `json:"network"`

	// HostRemovalPolicy says what happens to a host removed from Hosts: Deprovision (default)
	// wipes it, Keep leaves it provisioned and releases it.
	// +optional
	// +kubebuilder:default=Deprovision
	HostRemovalPolicy HostRemovalPolicy `json:"hostRemovalPolicy,omitempty"`

	// OperationGeneration is raised by the global controller for each operation it starts (an
	// install, patch or upgrade); status.observedOperationGeneration says when the site has
	// taken it in.
	// +optional
	// +kubebuilder:validation:Minimum=0
	OperationGeneration int64 `json:"operationGeneration,omitempty"`

	// Rotations asks for the cluster's keys to be replaced.
	// +optional
	Rotations *ClusterRotations `json:"rotations,omitempty"`
}

// ClusterRotations asks for replacements of a cluster's keys: each field counts the
// replacements asked for. Raising one by one starts one rotation, which runs once any rotation
// before it has finished; status.bootstrap says where it stands.
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.secretEncryptionKey) || has(self.secretEncryptionKey)",message="secretEncryptionKey cannot be removed once set: a rotation cannot be taken back"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.certificateAuthorities) || has(self.certificateAuthorities)",message="certificateAuthorities cannot be removed once set: a roll-over cannot be taken back"
type ClusterRotations struct {
	// SecretEncryptionKey counts the replacements asked for of the key the cluster's API
	// servers encrypt Secrets with in etcd. A rotation adds the new key to every API server
	// (one at a time), then makes it the one that encrypts, stores every Secret again under
	// it, and only then drops the old key; the API servers serve throughout.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:XValidation:rule="self >= oldSelf",message="can only be raised: each raise asks for one more rotation, and a rotation cannot be taken back"
	SecretEncryptionKey int64 `json:"secretEncryptionKey,omitempty"`
	// CertificateAuthorities counts the roll-overs asked for of the cluster's CAs (cluster,
	// etcd and front proxy, together). A roll-over makes new CAs and has every host trust old
	// and new (one host at a time); once the pods trust the new cluster CA too (kube-root-ca.crt,
	// workloads restarted) every certificate is issued again by the new CAs; the old CAs are
	// dropped last. Kubeconfigs issued before it stop working then: ask for new ones.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:XValidation:rule="self >= oldSelf",message="can only be raised: each raise asks for one more roll-over, and a roll-over cannot be taken back"
	CertificateAuthorities int64 `json:"certificateAuthorities,omitempty"`
}

// OSImage is the image Metal3 writes to the hosts.
type OSImage struct {
	// SHA256 of the image: 64 lower-case hex digits.
	// +required
	// +kubebuilder:validation:Pattern=`^[a-f0-9]{64}$`
	SHA256 string `json:"sha256"`

	// URL from which Ironic downloads the image. Empty means the site cache: the local
	// controller caches the image and uses its cache URL.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="isURL(self) && url(self).getScheme() in ['http', 'https']",message="must be an http:// or https:// URL"
	URL string `json:"url,omitempty"`

	// Format of the image: raw, qcow2 or live-iso. Empty lets Ironic detect it.
	// +optional
	// +kubebuilder:validation:Enum=raw;qcow2;live-iso
	Format string `json:"format,omitempty"`
}

// ClusterHost is one bare-metal machine of the cluster.
type ClusterHost struct {
	// Name of the host; its BareMetalHost and node are named after it.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	// Role of the host.
	// +required
	Role HostRole `json:"role"`

	// BootMACAddress is the MAC of the NIC the host boots from; it binds the host to its
	// machine, exactly. The global controller keeps boot MACs unique across the fleet.
	// +required
	// +kubebuilder:validation:Pattern=`^([0-9a-fA-F]{2}:){5}[0-9a-fA-F]{2}$`
	BootMACAddress string `json:"bootMACAddress"`

	// BMC of the host.
	// +required
	BMC BMC `json:"bmc"`

	// Address is the host's IP address on the site network once provisioned; the Binary
	// Provisioning Agent reaches the host's SSH server there and the node registers with it.
	// Hosts without one are not made nodes by the BPA.
	// +optional
	// +kubebuilder:validation:MaxLength=45
	// +kubebuilder:validation:XValidation:rule="isIP(self)",message="must be an IP address, e.g. 10.0.0.11"
	Address string `json:"address,omitempty"`
}

// BMC says how Metal3 reaches a host's baseboard management controller.
type BMC struct {
	// Address in Metal3's form, e.g. "redfish+https://10.0.0.5/redfish/v1/Systems/1".
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	Address string `json:"address"`

	// CredentialsName is the Secret, in namespace edgefleet-hosts (HostsNamespace, with the
	// hosts' BareMetalHosts), with keys username and password.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	CredentialsName string `json:"credentialsName"`

	// DisableCertificateVerification skips the BMC's TLS certificate check.
	// +optional
	DisableCertificateVerification bool `json:"disableCertificateVerification,omitempty"`
}

// ClusterNetwork is the networking of the application cluster.
type ClusterNetwork struct {
	// PodCIDRs of the cluster, e.g. ["10.244.0.0/16"].
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=2
	// +kubebuilder:validation:items:MaxLength=43
	// +kubebuilder:validation:items:XValidation:rule="isCIDR(self)",message="must be a CIDR, e.g. 10.244.0.0/16"
	PodCIDRs []string `json:"podCIDRs"`

	// ServiceCIDRs of the cluster, e.g. ["10.96.0.0/12"].
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=2
	// +kubebuilder:validation:items:MaxLength=43
	// +kubebuilder:validation:items:XValidation:rule="isCIDR(self)",message="must be a CIDR, e.g. 10.96.0.0/12"
	ServiceCIDRs []string `json:"serviceCIDRs"`

	// ControlPlaneEndpoint is where the cluster's API server is reached (a VIP or a DNS name).
	// +required
	ControlPlaneEndpoint APIEndpoint `json:"controlPlaneEndpoint"`
}

// APIEndpoint is a host and port.
type APIEndpoint struct {
	// Host is an IP address or DNS name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Host string `json:"host"`

	// Port, default 6443.
	// +optional
	// +kubebuilder:default=6443
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port,omitempty"`
}

// ApplicationClusterStatus is the compact summary the global controller reads.
type ApplicationClusterStatus struct {
	// Phase in one word.
	// +optional
	Phase ClusterPhase `json:"phase,omitempty"`

	// ObservedGeneration is the generation last reconciled cleanly.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// ObservedOperationGeneration is the spec.operationGeneration last taken in.
	// +optional
	ObservedOperationGeneration int64 `json:"observedOperationGeneration,omitempty"`

	// KubernetesVersion every node runs; empty while nodes run different versions.
	// +optional
	KubernetesVersion string `json:"kubernetesVersion,omitempty"`

	// ControlPlane counts the control-plane nodes.
	// +optional
	ControlPlane NodeCounts `json:"controlPlane,omitempty"`

	// Workers counts the worker nodes.
	// +optional
	Workers NodeCounts `json:"workers,omitempty"`

	// Hosts is the state of each host, in the order of spec.hosts, then the hosts being
	// removed (listed until released).
	// +optional
	// +listType=map
	// +listMapKey=name
	Hosts []HostStatus `json:"hosts,omitempty"`

	// Conditions: HostsProvisioned, ControlPlaneReady, WorkersReady, Ready.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// LastError is the last error met, with the object it concerns; empty after a clean
	// reconcile.
	// +optional
	LastError string `json:"lastError,omitempty"`

	// Bootstrap is what the Binary Provisioning Agent reports; it alone writes this field.
	// +optional
	Bootstrap *BootstrapStatus `json:"bootstrap,omitempty"`
}

// BootstrapPhase is where the BPA stands with a cluster, in one word.
// +kubebuilder:validation:Enum=Waiting;Installing;Installed;Patching;Failed
type BootstrapPhase string

// Bootstrap phases.
const (
	// BootstrapWaiting waits for the control-plane hosts to be provisioned, or for the
	// cluster's packages to be cached at the site.
	BootstrapWaiting BootstrapPhase = "Waiting"
	// BootstrapInstalling installs packages on hosts, or charts into the cluster.
	BootstrapInstalling BootstrapPhase = "Installing"
	// BootstrapInstalled has every provisioned host running the cluster's packages and every
	// chart deployed.
	BootstrapInstalled BootstrapPhase = "Installed"
	// BootstrapPatching rolls a new package version through the nodes, one at a time.
	BootstrapPatching BootstrapPhase = "Patching"
	// BootstrapFailed stopped on an error the message names; a failed patch is not retried
	// until the cluster's packages change again.
	BootstrapFailed BootstrapPhase = "Failed"
)

// BootstrapStatus is the BPA's report on a cluster.
type BootstrapStatus struct {
	// Phase in one word.
	// +optional
	Phase BootstrapPhase `json:"phase,omitempty"`

	// Message says what the BPA is doing or waiting for, or what failed (which host, which
	// package, why).
	// +optional
	Message string `json:"message,omitempty"`

	// ObservedGeneration is the generation of the ApplicationCluster the BPA last worked on.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Nodes is how many hosts run the node package.
	// +optional
	Nodes int32 `json:"nodes,omitempty"`

	// Packages are the package versions the cluster runs, rolled out to every node.
	// +optional
	// +listType=map
	// +listMapKey=name
	Packages []InstalledPackage `json:"packages,omitempty"`

	// FailedPackage is the sha256 of a package whose patch failed and was rolled back; it is
	// not tried again until spec.packages changes.
	// +optional
	FailedPackage string `json:"failedPackage,omitempty"`

	// Step is where a patch (an upgrade is one) stands while it runs, and where it stopped
	// when it failed: which package, which node, which step, since when.
	// +optional
	Step *PatchStep `json:"step,omitempty"`

	// Charts is the Helm release of each of spec.charts.
	// +optional
	// +listType=map
	// +listMapKey=name
	Charts []ChartRelease `json:"charts,omitempty"`

	// SecretEncryption is the key the cluster's API servers encrypt Secrets with, and where a
	// rotation of it stands.
	// +optional
	SecretEncryption *SecretEncryptionStatus `json:"secretEncryption,omitempty"`

	// CertificateAuthorities is where a roll-over of the cluster's CAs stands.
	// +optional
	CertificateAuthorities *CARotationStatus `json:"certificateAuthorities,omitempty"`
}

// KeyRotationPhase is where a key rotation stands, in one word.
// +kubebuilder:validation:Enum=AddNew;UseNew;DropOld
type KeyRotationPhase string

// Key rotation phases; each is rolled out to every API server (for a CA roll-over, every host),
// one at a time, before the next. A CA roll-over's AddNew trusts the new CAs beside the old,
// UseNew issues every certificate again with the new CAs, DropOld stops trusting the old.
const (
	// RotationAddNew: the API servers learn the new key; they read with both and still write
	// with the old one, so that none of them meets a Secret it cannot read.
	RotationAddNew KeyRotationPhase = "AddNew"
	// RotationUseNew: the API servers write with the new key; then every Secret is stored
	// again under it.
	RotationUseNew KeyRotationPhase = "UseNew"
	// RotationDropOld: the old key is removed from the API servers.
	RotationDropOld KeyRotationPhase = "DropOld"
)

// SecretEncryptionStatus is where the cluster's Secret encryption key stands.
type SecretEncryptionStatus struct {
	// Provider is what the API servers encrypt Secrets with: Secretbox, a key of the BPA's,
	// or KMS, the KMS plugin on each control-plane host with the cluster's Vault transit key.
	// +optional
	// +kubebuilder:validation:Enum=Secretbox;KMS
	Provider SecretEncryptionProvider `json:"provider,omitempty"`
	// Key is the name of the key the API servers write Secrets with (etcd's values start
	// "k8s:enc:secretbox:v1:<key>:"), or of the KMS provider ("k8s:enc:kms:v2:<key>:").
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Key string `json:"key,omitempty"`
	// Rotations is how many rotations have finished: spec.rotations.secretEncryptionKey when
	// none is under way or waiting.
	// +optional
	Rotations int64 `json:"rotations,omitempty"`
	// Phase of the rotation under way; empty when none is.
	// +optional
	Phase KeyRotationPhase `json:"phase,omitempty"`
	// To is KMS while the Secrets move from the secretbox key to the KMS plugin, in a
	// rotation's three phases (Phase) with the plugin as the new key; empty otherwise.
	// +optional
	// +kubebuilder:validation:Enum=KMS
	To SecretEncryptionProvider `json:"to,omitempty"`
	// Since is when Phase began.
	// +optional
	Since *metav1.Time `json:"since,omitempty"`
	// Reencrypted is the key every Secret was last stored again under: Key once the Secrets
	// stored before encryption was switched on, or under an older key, are all rewritten.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Reencrypted string `json:"reencrypted,omitempty"`
}

// SecretEncryptionProvider is what a cluster's API servers encrypt Secrets with.
type SecretEncryptionProvider string

// Secret encryption providers.
const (
	// SecretEncryptionSecretbox: a secretbox key the BPA keeps (where no Vault is configured).
	SecretEncryptionSecretbox SecretEncryptionProvider = "Secretbox"
	// SecretEncryptionKMS: the KMS plugin (edgefleet-kms) with the cluster's Vault transit key.
	SecretEncryptionKMS SecretEncryptionProvider = "KMS"
)

// CARotationStatus is where a roll-over of the cluster's CAs stands.
type CARotationStatus struct {
	// Rotations is how many roll-overs have finished: spec.rotations.certificateAuthorities
	// when none is under way or waiting.
	// +optional
	Rotations int64 `json:"rotations,omitempty"`
	// Phase of the roll-over under way; empty when none is.
	// +optional
	Phase KeyRotationPhase `json:"phase,omitempty"`
	// Since is when Phase began.
	// +optional
	Since *metav1.Time `json:"since,omitempty"`
	// Waiting says what the roll-over waits for before its next phase.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Waiting string `json:"waiting,omitempty"`
}

// PatchStep is one step of a patch on one node.
type PatchStep struct {
	// Package and Version being rolled out.
	// +required
	// +kubebuilder:validation:MaxLength=253
	Package string `json:"package"`
	// +optional
	// +kubebuilder:validation:MaxLength=128
	Version string `json:"version,omitempty"`
	// Node the step runs on, the Index-th of the Of nodes the package goes through (from 1).
	// +required
	// +kubebuilder:validation:MaxLength=253
	Node string `json:"node"`
	// +optional
	Index int32 `json:"index,omitempty"`
	// +optional
	Of int32 `json:"of,omitempty"`
	// Step on that node: checking the others, draining, installing, waiting for Ready,
	// uncordoning.
	// +required
	// +kubebuilder:validation:MaxLength=256
	Step string `json:"step"`
	// Since is when the step started.
	// +required
	Since metav1.Time `json:"since"`
}

// InstalledPackage is a package the cluster runs.
type InstalledPackage struct {
	// Name of the package (from its manifest).
	// +required
	Name string `json:"name"`
	// Version of the package.
	// +optional
	Version string `json:"version,omitempty"`
	// SHA256 of the package archive.
	// +optional
	SHA256 string `json:"sha256,omitempty"`
}

// ChartRelease is the Helm release of one chart in the application cluster.
type ChartRelease struct {
	// Name of the release (the chart's name).
	// +required
	Name string `json:"name"`
	// Namespace of the release.
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// Chart version deployed.
	// +optional
	Version string `json:"version,omitempty"`
	// Revision of the release.
	// +optional
	Revision int32 `json:"revision,omitempty"`
	// State is Helm's status of the release: deployed, failed, pending-install, ...
	// +optional
	State string `json:"state,omitempty"`
	// Message is Helm's description of the last change, or the error met; with the workloads
	// short of ready pods when there are.
	// +optional
	Message string `json:"message,omitempty"`
	// PodsReady and PodsDesired count the pods of the deployed revision's workloads
	// (Deployments, StatefulSets, DaemonSets): "deployed" says helm stored the objects, these
	// say whether the chart runs.
	// +optional
	PodsReady int32 `json:"podsReady,omitempty"`
	// +optional
	PodsDesired int32 `json:"podsDesired,omitempty"`
}

// NodeCounts counts nodes; a count left out is zero.
type NodeCounts struct {
	// Ready nodes of the desired version.
	// +optional
	Ready int32 `json:"ready,omitempty"`
	// Total hosts of the role.
	// +optional
	Total int32 `json:"total,omitempty"`
}

// HostStatus is where one host stands.
type HostStatus struct {
	// Name of the host.
	// +required
	Name string `json:"name"`
	// Role of the host.
	// +optional
	Role HostRole `json:"role,omitempty"`
	// ProvisioningState is Metal3's state of the host (registering, inspecting, available,
	// provisioning, provisioned, deprovisioning, ...).
	// +optional
	ProvisioningState string `json:"provisioningState,omitempty"`
	// Machine is the Cluster-API Machine bound to the host.
	// +optional
	Machine string `json:"machine,omitempty"`
	// Version is the Kubernetes version the host's node runs, as its kubelet reports it; the
	// version its machine is provisioned with until the node has reported.
	// +optional
	Version string `json:"version,omitempty"`
	// Ready is true when the host is a ready node.
	// +optional
	Ready bool `json:"ready,omitempty"`
	// Message says what is wrong, when something is.
	// +optional
	Message string `json:"message,omitempty"`
	// Hardware is what inspection found of the host (Metal3's hardwareDetails, in short);
	// unset until it was inspected.
	// +optional
	Hardware *HostHardware `json:"hardware,omitempty"`
}

// MaxHardwareItems bounds the disks and NICs a HostHardware lists: a summary, not an inventory.
const MaxHardwareItems = 16

// HostHardware is what inspection found of a host: its system, CPUs, memory, disks and
// network interfaces.
type HostHardware struct {
	// Manufacturer and ProductName of the system, as its firmware names them.
	// +optional
	Manufacturer string `json:"manufacturer,omitempty"`
	// +optional
	ProductName string `json:"productName,omitempty"`
	// CPUs is the count of logical CPUs; CPUModel their model.
	// +optional
	CPUs int32 `json:"cpus,omitempty"`
	// +optional
	CPUModel string `json:"cpuModel,omitempty"`
	// MemoryMiB is the memory, in MiB.
	// +optional
	MemoryMiB int64 `json:"memoryMiB,omitempty"`
	// Disks are the storage devices, the first MaxHardwareItems by name.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	Disks []HostDisk `json:"disks,omitempty"`
	// NICs are the network interfaces, the first MaxHardwareItems by name.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	NICs []HostNIC `json:"nics,omitempty"`
}

// Summary says the hardware in a line: "2 CPUs, 4Gi memory, 1 disk (8Gi), 1 NIC".
func (h *HostHardware) Summary() string {
	var disks int64
	for _, d := range h.Disks {
		disks += d.SizeBytes
	}
	count := func(n int, what string) string {
		if n == 1 {
			return "1 " + what
		}
		return fmt.Sprintf("%d %ss", n, what)
	}
	return fmt.Sprintf("%s, %s memory, %s (%s), %s", count(int(h.CPUs), "CPU"), resource.NewQuantity(h.MemoryMiB<<20, resource.BinarySI),
		count(len(h.Disks), "disk"), resource.NewQuantity(disks, resource.BinarySI), count(len(h.NICs), "NIC"))
}

// HostDisk is one storage device of a host.
type HostDisk struct {
	// Name is the device's name (a /dev path).
	Name string `json:"name"`
	// SizeBytes is its size in bytes.
	// +optional
	SizeBytes int64 `json:"sizeBytes,omitempty"`
	// Type is HDD, SSD or NVME.
	// +optional
	Type string `json:"type,omitempty"`
	// Model is the device's model.
	// +optional
	Model string `json:"model,omitempty"`
}

// HostNIC is one network interface of a host.
type HostNIC struct {
	// Name is the interface's name.
	Name string `json:"name"`
	// MAC is its MAC address.
	// +optional
	MAC string `json:"mac,omitempty"`
	// SpeedGbps is its speed in Gbps.
	// +optional
	SpeedGbps int32 `json:"speedGbps,omitempty"`
}

// ApplicationCluster is the desired application Kubernetes cluster of a site, written by the
// global controller into the site's local cluster. The local controller makes it real on bare
// metal through Cluster-API and Metal3 and reports a compact summary in status.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=edgefleet,shortName=appcluster
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.spec.kubernetesVersion`
// +kubebuilder:printcolumn:name="CP",type=string,JSONPath=`.status.controlPlane.ready`,description="ready control-plane nodes"
// +kubebuilder:printcolumn:name="Workers",type=string,JSONPath=`.status.workers.ready`,description="ready worker nodes"
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ApplicationCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec   ApplicationClusterSpec   `json:"spec"`
	Status ApplicationClusterStatus `json:"status,omitempty"`
}

// ApplicationClusterList is a list of ApplicationClusters.
//
// +kubebuilder:object:root=true
type ApplicationClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ApplicationCluster `json:"items"`
}
