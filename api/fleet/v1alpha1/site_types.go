package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
)

// SiteFinalizer is set on every Site so the global controller can drop the site's cached client
// and metrics before the object goes away.
const SiteFinalizer = "fleet.edgefleet.io/site"

// Site conditions. Each is set on every reconcile with a reason from the lists below and a message
// that says what was seen and what to do.
const (
	// SiteKubeconfigValidCondition is True when the kubeconfig Secret exists, parses, and carries
	// only inline credentials (no exec or auth-provider plugins, no paths to local files).
	SiteKubeconfigValidCondition = "KubeconfigValid"
	// SiteReachableCondition is True when the site's API server answered the last check.
	SiteReachableCondition = "Reachable"
	// SiteReadyCondition summarizes KubeconfigValid and Reachable: True when the site can take
	// work. It does not depend on ClusterSynced or ClusterReady: a site without a (ready)
	// application cluster is still usable, e.g. to install one.
	SiteReadyCondition = "Ready"
	// SiteClusterSyncedCondition is True when the site holds the ApplicationCluster and the
	// hosts' BMC Secrets built from spec.cluster and the site's Hosts. Set only while
	// spec.cluster is set or the pushed objects are being removed.
	SiteClusterSyncedCondition = "ClusterSynced"
	// SiteArtifactAccessCondition is True when the site holds a current token of its own for
	// the artifact API (Secret edgefleet-global-api on the site). Set only when the global
	// controller is told the API's URL (--site-api-url or spec.artifactAPIURL).
	SiteArtifactAccessCondition = "ArtifactAccess"
	// SiteClusterReadyCondition mirrors the Ready condition the site reports on its
	// ApplicationCluster. Set only while spec.cluster is set or the pushed objects are being
	// removed.
	SiteClusterReadyCondition = "ClusterReady"
)

// Reasons used by the Site conditions.
const (
	// ReasonKubeconfigValid means the kubeconfig was loaded and is safe to use.
	ReasonKubeconfigValid = "KubeconfigValid"
	// ReasonSecretNotFound means spec.kubeconfigSecretRef names a Secret that does not exist.
	ReasonSecretNotFound = "SecretNotFound"
	// ReasonSecretKeyMissing means the Secret exists but lacks the referenced key.
	ReasonSecretKeyMissing = "SecretKeyMissing"
	// ReasonVaultEntryNotFound means spec.kubeconfigVaultRef names a Vault entry that does not
	// exist, or that lacks the referenced key.
	ReasonVaultEntryNotFound = "VaultEntryNotFound"
	// ReasonVaultUnavailable means the kubeconfig is in Vault but the global controller cannot
	// read it: it runs without Vault, or Vault refused or did not answer (the message says which).
	ReasonVaultUnavailable = "VaultUnavailable"
	// ReasonKubeconfigInvalid means the kubeconfig does not parse or lacks a usable context.
	ReasonKubeconfigInvalid = "KubeconfigInvalid"
	// ReasonKubeconfigUnsafe means the kubeconfig would run code or read local files on the
	// global controller (exec or auth-provider plugins, file paths) and was refused.
	ReasonKubeconfigUnsafe = "KubeconfigUnsafe"

	// ReasonAPIServerReachable means the site's API server answered.
	ReasonAPIServerReachable = "APIServerReachable"
	// ReasonAPIServerUnreachable means the site's API server did not answer (connection refused,
	// timeout, TLS or authentication failure); the message carries the error.
	ReasonAPIServerUnreachable = "APIServerUnreachable"
	// ReasonNotChecked means the check could not run because an earlier condition failed (for
	// ClusterSynced and ClusterReady: the site is not reachable; status.cluster keeps the last
	// summary it reported).
	ReasonNotChecked = "NotChecked"

	// ReasonSiteReady means the site is registered, its kubeconfig is valid and it is reachable.
	ReasonSiteReady = "SiteReady"
	// ReasonSiteNotReady means one of the other conditions is not True; the message names it.
	ReasonSiteNotReady = "SiteNotReady"

	// ReasonClusterSynced means the site's ApplicationCluster and BMC Secrets match
	// spec.cluster and every Host of the site.
	ReasonClusterSynced = "ClusterSynced"
	// ReasonHostsLeftOut means the ApplicationCluster was pushed, but some Hosts of the site are
	// not in it (not Ready, BMC credentials missing, name unusable as a node name); the message
	// names each and why. A host that was pushed before keeps its last pushed entry instead.
	ReasonHostsLeftOut = "HostsLeftOut"
	// ReasonNoControlPlaneHost means nothing was pushed because no usable control-plane Host
	// exists: an ApplicationCluster needs at least one. An ApplicationCluster pushed before is
	// left as it was.
	ReasonNoControlPlaneHost = "NoControlPlaneHost"
	// ReasonTokenIssued means the site holds a token of its own ServiceAccount for the
	// artifact API, renewed when half its life is gone.
	ReasonTokenIssued = "TokenIssued"
	// ReasonReleaseNotSet means spec.cluster names no release and no version and image of its
	// own: nothing is pushed until a campaign (or the operator) sets spec.cluster.release.
	ReasonReleaseNotSet = "ReleaseNotSet"
	// ReasonReleaseNotFound means spec.cluster.release names a Release that does not exist;
	// nothing is pushed until it does.
	ReasonReleaseNotFound = "ReleaseNotFound"
	// ReasonPushFailed means the site refused a write or did not answer; the message names the
	// object and carries the error. It is retried on the next heartbeat.
	ReasonPushFailed = "PushFailed"
	// ReasonClusterDeleting means spec.cluster was removed: the ApplicationCluster was deleted
	// on the site and waits there for its finalizer (the local controller takes the cluster
	// down); the BMC Secrets go once it is gone.
	ReasonClusterDeleting = "ClusterDeleting"

	// ReasonClusterReady means the site reports its ApplicationCluster Ready.
	ReasonClusterReady = "ClusterReady"
	// ReasonClusterNotReady means the site reports its ApplicationCluster not Ready; the
	// message carries the site's reason and message.
	ReasonClusterNotReady = "ClusterNotReady"
	// ReasonClusterUpdatePending means the site has not yet reconciled the last pushed
	// generation of its ApplicationCluster; the message gives both generations.
	ReasonClusterUpdatePending = "ClusterUpdatePending"
	// ReasonBootstrapFailed means the site's BPA reports that it cannot build or change the
	// cluster to the pushed generation (status.cluster.bootstrap Failed, whatever the nodes
	// say); the message carries the BPA's.
	ReasonBootstrapFailed = "BootstrapFailed"
	// ReasonClusterNotReported means the site has no ApplicationCluster yet, or reports no
	// Ready condition on it (no local controller handles it yet).
	ReasonClusterNotReported = "ClusterNotReported"
)

// SiteSpec is the desired registration of an edge site.
// +kubebuilder:validation:XValidation:rule="has(self.kubeconfigSecretRef) != has(self.kubeconfigVaultRef)",message="set exactly one of kubeconfigSecretRef and kubeconfigVaultRef"
type SiteSpec struct {
	// KubeconfigSecretRef names the Secret, in the Site's namespace, that holds the kubeconfig of
	// the site's local cluster. The kubeconfig is untrusted input: it may carry only inline
	// credentials (certificates, tokens). Set this or kubeconfigVaultRef.
	// +optional
	KubeconfigSecretRef *SecretKeyReference `json:"kubeconfigSecretRef,omitempty"`

	// KubeconfigVaultRef names the entry of the global controller's Vault, and its key, that
	// holds the kubeconfig of the site's local cluster; enrollment writes it there. Set this or
	// kubeconfigSecretRef.
	// +optional
	KubeconfigVaultRef *VaultKeyReference `json:"kubeconfigVaultRef,omitempty"`

	// BPAEndpoint is the URL of the site's Binary Provisioning Agent.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="isURL(self) && url(self).getScheme() in ['http', 'https'] && url(self).getHostname() != ''",message="must be an http:// or https:// URL with a host"
	BPAEndpoint string `json:"bpaEndpoint,omitempty"`

	// ArtifactAPIURL is the URL at which this site reaches the global artifact API, when it
	// differs from the global controller's --site-api-url (a proxy, another network path).
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="isURL(self) && url(self).getScheme() in ['http', 'https'] && url(self).getHostname() != ''",message="must be an http:// or https:// URL with a host"
	ArtifactAPIURL string `json:"artifactAPIURL,omitempty"`

	// Location says where the site is.
	// +optional
	Location *Location `json:"location,omitempty"`

	// Cluster is the site's desired application cluster: the global controller builds the
	// site's ApplicationCluster from it and the site's Hosts, and pushes it to the site. Without
	// it the site is only registered.
	// +optional
	Cluster *SiteCluster `json:"cluster,omitempty"`

	// Operation is the work a campaign last dispatched to the site. The campaign controller
	// writes it, together with cluster.release, in one patch: that write is the dispatch, so a
	// campaign that restarts sees what it already dispatched. status.lastOperation reports how
	// it went.
	// +optional
	Operation *SiteOperation `json:"operation,omitempty"`

	// MaintenanceWindows are the times at which disruptive work (patch, upgrade) may start on
	// this site. Empty means any time.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	MaintenanceWindows []MaintenanceWindow `json:"maintenanceWindows,omitempty"`
}

// SiteCluster is the desired application cluster of a site; its hosts are the site's Hosts.
// What the cluster runs comes from a Release (set by hand or by a campaign) or, for a cluster
// managed without releases, from kubernetesVersion and osImage. With neither, the cluster is
// described but nothing is pushed until a release is set (e.g. by an install campaign).
// +kubebuilder:validation:XValidation:rule="!(has(self.release) && (has(self.kubernetesVersion) || has(self.osImage)))",message="set either release, or kubernetesVersion and osImage, not both"
// +kubebuilder:validation:XValidation:rule="has(self.kubernetesVersion) == has(self.osImage)",message="kubernetesVersion and osImage go together"
type SiteCluster struct {
	// Release names the Release, in the Site's namespace, whose Kubernetes version, OS image,
	// packages and charts the cluster runs. Campaigns set it when they dispatch to the site.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Release string `json:"release,omitempty"`

	// KubernetesVersion of every node, e.g. "v1.36.3", for a cluster managed without releases.
	// +optional
	// +kubebuilder:validation:Pattern=`^v[0-9]+\.[0-9]+\.[0-9]+$`
	KubernetesVersion string `json:"kubernetesVersion,omitempty"`

	// OSImage written to every host, for a cluster managed without releases; with no URL, the
	// site caches it from the artifact store by its sha256.
	// +optional
	OSImage *sitev1.OSImage `json:"osImage,omitempty"`

	// Network of the cluster.
	// +required
	Network sitev1.ClusterNetwork `json:"network"`

	// HostRemovalPolicy says what happens at the site to a Host deleted here: Deprovision
	// (default) wipes it, Keep leaves it provisioned and releases it.
	// +optional
	// +kubebuilder:default=Deprovision
	HostRemovalPolicy sitev1.HostRemovalPolicy `json:"hostRemovalPolicy,omitempty"`

	// Rotations asks for the cluster's keys to be replaced: raise a count by one for one more
	// rotation (docs/security.md). The ApplicationCluster's status.bootstrap says where it stands.
	// +optional
	Rotations *sitev1.ClusterRotations `json:"rotations,omitempty"`
}

// VaultKeyReference names a key of an entry of the global controller's Vault (see
// VaultReference).
type VaultKeyReference struct {
	// Path of the entry under <--vault-prefix>/<namespace>/: segments of letters, digits, '.',
	// '_' and '-', not starting with '.', separated by '/' (for example "sites/site-a").
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_-][A-Za-z0-9._-]*(/[A-Za-z0-9_-][A-Za-z0-9._-]*)*$`
	Path string `json:"path"`

	// Key within the entry.
	// +optional
	// +kubebuilder:default=kubeconfig
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	Key string `json:"key,omitempty"`
}

// SecretKeyReference names a key of a Secret in the referencing object's namespace.
type SecretKeyReference struct {
	// Name of the Secret.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name"`

	// Key within the Secret.
	// +optional
	// +kubebuilder:default=kubeconfig
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	Key string `json:"key,omitempty"`
}

// Location describes where a site is.
type Location struct {
	// Region, e.g. "eu-west".
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Region string `json:"region,omitempty"`
	// Zone within the region, e.g. a city or a store number.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Zone string `json:"zone,omitempty"`
	// Address is a free-form postal address or description.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Address string `json:"address,omitempty"`
	// Latitude in decimal degrees, as a string ("48.8566").
	// +optional
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('^-?[0-9]{1,2}([.][0-9]+)?$') && double(self) >= -90.0 && double(self) <= 90.0",message="must be a decimal number of degrees between -90 and 90"
	Latitude string `json:"latitude,omitempty"`
	// Longitude in decimal degrees, as a string ("2.3522").
	// +optional
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('^-?[0-9]{1,3}([.][0-9]+)?$') && double(self) >= -180.0 && double(self) <= 180.0",message="must be a decimal number of degrees between -180 and 180"
	Longitude string `json:"longitude,omitempty"`
}

// MaintenanceWindow is a recurring period during which disruptive work may start.
type MaintenanceWindow struct {
	// Schedule is a five-field cron expression (minute hour day-of-month month day-of-week) at
	// which the window opens, e.g. "0 2 * * 6" for Saturdays at 02:00.
	// +required
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:XValidation:rule="self.matches('^ *[^ ]+( +[^ ]+){4} *$')",message="must be a cron expression of five fields: minute hour day-of-month month day-of-week"
	Schedule string `json:"schedule"`

	// Duration is how long the window stays open, e.g. "4h".
	// +required
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s') && duration(self) <= duration('168h')",message="must be a duration between 0s (exclusive) and 168h, e.g. 4h or 90m"
	Duration metav1.Duration `json:"duration"`

	// TimeZone is the IANA time zone the schedule is read in, e.g. "Europe/Paris". Default UTC.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[A-Za-z][A-Za-z0-9_+-]*(/[A-Za-z0-9_+-]+)*$`
	TimeZone string `json:"timeZone,omitempty"`
}

// OperationAction is what an operation does to a site's application cluster.
// +kubebuilder:validation:Enum=install;patch;upgrade
type OperationAction string

// Operation actions.
const (
	// ActionInstall brings up the application cluster of a site that has none.
	ActionInstall OperationAction = "install"
	// ActionPatch updates packages and charts in place, node by node.
	ActionPatch OperationAction = "patch"
	// ActionUpgrade changes the Kubernetes version or OS image. Where the site's BPA builds the
	// nodes, a new Kubernetes version is patched in place, package by package and node by node
	// (API servers first, each node drained); a new OS image replaces the nodes one by one
	// through Cluster-API, control plane first.
	ActionUpgrade OperationAction = "upgrade"
)

// OperationStage is how far a dispatched operation may go.
// +kubebuilder:validation:Enum=PreCache;Apply
type OperationStage string

// Operation stages.
const (
	// StagePreCache only caches the release's artifacts at the site; the cluster is not touched.
	StagePreCache OperationStage = "PreCache"
	// StageApply makes the cluster run the release.
	StageApply OperationStage = "Apply"
)

// SiteOperation is one piece of work a campaign dispatched to a site.
type SiteOperation struct {
	// ID names the dispatch: the campaign's UID, with a suffix for a pre-cache, a rollback or
	// a step through an intermediate release (fleet.edgefleet.io StepIDSuffix). The site takes
	// each ID once; a campaign never dispatches the same ID twice.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	ID string `json:"id"`

	// Campaign is the name of the campaign that dispatched it.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Campaign string `json:"campaign"`

	// Action the campaign runs.
	// +required
	Action OperationAction `json:"action"`

	// Stage says whether to only pre-cache the release's artifacts or to apply it.
	// +required
	Stage OperationStage `json:"stage"`

	// Release the site goes to.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Release string `json:"release"`

	// PreviousRelease is the release the site ran before (empty: none), for rollback.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	PreviousRelease string `json:"previousRelease,omitempty"`

	// Target is the campaign's release when this operation is one step of the site's move
	// there through intermediate releases (Kubernetes moves one minor version per step);
	// empty when Release is the campaign's.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Target string `json:"target,omitempty"`

	// DispatchTime is when the campaign dispatched it.
	// +required
	DispatchTime metav1.Time `json:"dispatchTime"`

	// Deadline, when set, is when the operation times out if it has not finished.
	// +optional
	Deadline *metav1.Time `json:"deadline,omitempty"`
}

// OperationPhase is where a dispatched operation stands.
// +kubebuilder:validation:Enum=Pending;PreCaching;PreCached;InProgress;Succeeded;Failed;TimedOut
type OperationPhase string

// Operation phases. Succeeded, Failed and TimedOut are final: a site keeps its verdict.
const (
	// OperationPending is taken in but not started (e.g. the site is unreachable).
	OperationPending OperationPhase = "Pending"
	// OperationPreCaching is caching the release's artifacts at the site.
	OperationPreCaching OperationPhase = "PreCaching"
	// OperationPreCached has every artifact of the release cached at the site.
	OperationPreCached OperationPhase = "PreCached"
	// OperationInProgress is applying the release.
	OperationInProgress OperationPhase = "InProgress"
	// OperationSucceeded has the cluster running the release, Ready.
	OperationSucceeded OperationPhase = "Succeeded"
	// OperationFailed is reported failed by the site; the message says why.
	OperationFailed OperationPhase = "Failed"
	// OperationTimedOut passed its deadline before finishing.
	OperationTimedOut OperationPhase = "TimedOut"
)

// SiteOperationStatus reports how the site's last operation went.
type SiteOperationStatus struct {
	// ID of the operation (spec.operation.id).
	// +required
	ID string `json:"id"`
	// Campaign that dispatched it.
	// +optional
	Campaign string `json:"campaign,omitempty"`
	// Action of the operation.
	// +optional
	Action OperationAction `json:"action,omitempty"`
	// Stage of the operation.
	// +optional
	Stage OperationStage `json:"stage,omitempty"`
	// Release the site goes to.
	// +optional
	Release string `json:"release,omitempty"`
	// Phase of the operation.
	// +required
	Phase OperationPhase `json:"phase"`
	// OperationGeneration is the ApplicationCluster operation generation that carries it.
	// +optional
	OperationGeneration int64 `json:"operationGeneration,omitempty"`
	// StartTime is when the global controller took it in.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`
	// CompletionTime is when it reached a final phase.
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`
	// Message says what the operation is waiting for, or why it failed.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
}

// SiteStatus is what the global controller last saw of the site.
type SiteStatus struct {
	// Conditions: KubeconfigValid, Reachable, Ready; ClusterSynced and ClusterReady while
	// spec.cluster is set.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// ObservedGeneration is the generation last reconciled cleanly.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// LastCheckTime is when the global controller last probed the site.
	// +optional
	LastCheckTime *metav1.Time `json:"lastCheckTime,omitempty"`

	// LastHeartbeatTime is when the site's API server last answered.
	// +optional
	LastHeartbeatTime *metav1.Time `json:"lastHeartbeatTime,omitempty"`

	// KubernetesVersion of the site's local cluster, as its API server reports it.
	// +optional
	KubernetesVersion string `json:"kubernetesVersion,omitempty"`

	// LocalControllerVersion is the version the site's local controller publishes, empty while
	// none is installed.
	// +optional
	LocalControllerVersion string `json:"localControllerVersion,omitempty"`

	// Hosts counts the site's Host objects by role.
	// +optional
	Hosts HostCounts `json:"hosts,omitempty"`

	// LastOperation reports how the operation in spec.operation went.
	// +optional
	LastOperation *SiteOperationStatus `json:"lastOperation,omitempty"`

	// Cluster mirrors the summary the site reports of its application cluster, read from the
	// status of its ApplicationCluster on every heartbeat. It keeps the last summary while the
	// site is unreachable, and goes away with spec.cluster once the pushed objects are removed.
	// +optional
	Cluster *ClusterSummary `json:"cluster,omitempty"`
}

// ClusterSummary is the compact summary of a site's application cluster, copied from the
// status of its ApplicationCluster.
type ClusterSummary struct {
	// Phase in one word.
	// +optional
	Phase sitev1.ClusterPhase `json:"phase,omitempty"`
	// KubernetesVersion every node runs; empty while nodes run different versions.
	// +optional
	KubernetesVersion string `json:"kubernetesVersion,omitempty"`
	// ControlPlane counts the control-plane nodes.
	// +optional
	ControlPlane sitev1.NodeCounts `json:"controlPlane,omitempty"`
	// Workers counts the worker nodes.
	// +optional
	Workers sitev1.NodeCounts `json:"workers,omitempty"`
	// ObservedGeneration is the generation of the pushed ApplicationCluster the site last
	// reconciled cleanly.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// ObservedOperationGeneration is the operation generation the site last took in.
	// +optional
	ObservedOperationGeneration int64 `json:"observedOperationGeneration,omitempty"`
	// Message is the site's Ready condition message.
	// +optional
	Message string `json:"message,omitempty"`
	// LastError is the site's last error.
	// +optional
	LastError string `json:"lastError,omitempty"`

	// Bootstrap is the site's Binary Provisioning Agent's report: packages, charts, the
	// patch under way or the one that failed.
	// +optional
	Bootstrap *sitev1.BootstrapStatus `json:"bootstrap,omitempty"`
}

// HostCounts counts hosts by role; a count left out is zero.
type HostCounts struct {
	// Total number of hosts of the site.
	// +optional
	Total int32 `json:"total,omitempty"`
	// ControlPlane is the number of control-plane hosts.
	// +optional
	ControlPlane int32 `json:"controlPlane,omitempty"`
	// Worker is the number of worker hosts.
	// +optional
	Worker int32 `json:"worker,omitempty"`
}

// Site is an edge site: where its local controller is reached, where it is, and when work may
// run there.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=edgefleet
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reachable",type=string,JSONPath=`.status.conditions[?(@.type=="Reachable")].status`
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.status.kubernetesVersion`
// +kubebuilder:printcolumn:name="Hosts",type=integer,JSONPath=`.status.hosts.total`
// +kubebuilder:printcolumn:name="Release",type=string,JSONPath=`.spec.cluster.release`
// +kubebuilder:printcolumn:name="Operation",type=string,JSONPath=`.status.lastOperation.phase`
// +kubebuilder:printcolumn:name="Region",type=string,JSONPath=`.spec.location.region`,priority=1
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.status.cluster.phase`,priority=1
// +kubebuilder:printcolumn:name="Local-Controller",type=string,JSONPath=`.status.localControllerVersion`,priority=1
// +kubebuilder:printcolumn:name="Heartbeat",type=date,JSONPath=`.status.lastHeartbeatTime`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Site struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec   SiteSpec   `json:"spec"`
	Status SiteStatus `json:"status,omitempty"`
}

// SiteList is a list of Sites.
//
// +kubebuilder:object:root=true
type SiteList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Site `json:"items"`
}
