package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The site components that answer LogRequests (spec.component).
const (
	// LogComponentLocalController is the site's local controller.
	LogComponentLocalController = "local-controller"
	// LogComponentBPA is the site's Binary Provisioning Agent.
	LogComponentBPA = "bpa"
)

// Bounds of a LogRequest's answer: the answer lives in the site's etcd until the global
// controller deletes it, so it is kept far below the object size limit.
const (
	// MaxLogLines is the most lines a LogRequest may ask for (spec.tailLines).
	MaxLogLines = 2000
	// MaxLogBytes is the most bytes of log lines an answer holds; older lines are left out first.
	MaxLogBytes = 512 * 1024
)

// LogRequestSpec names the component whose recent log lines the global controller asks for.
type LogRequestSpec struct {
	// Component is the site component that answers: local-controller or bpa.
	// +kubebuilder:validation:Enum=local-controller;bpa
	// +required
	Component string `json:"component"`
	// TailLines is how many of the newest lines to return (at most 2000).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=2000
	// +required
	TailLines int32 `json:"tailLines"`
	// SinceTime, when set, leaves out lines logged at or before it (microseconds: a follower asks
	// for what came after the newest line it has).
	// +optional
	SinceTime *metav1.MicroTime `json:"sinceTime,omitempty"`
}

// LogRequestStatus is the component's answer.
type LogRequestStatus struct {
	// Answered is set when the component has answered; Lines may then be empty (nothing logged
	// since SinceTime).
	// +optional
	Answered bool `json:"answered,omitempty"`
	// Lines are the component's log lines, oldest first, each one JSON object as the component
	// logged it: "ts" (RFC 3339 with nanoseconds), "level", "logger", "msg", then its key/values.
	// +kubebuilder:validation:MaxItems=2000
	// +optional
	Lines []string `json:"lines,omitempty"`
	// Truncated says that older lines matching the request were left out: the component keeps a
	// bounded number of recent lines, or the answer would have been too large.
	// +optional
	Truncated bool `json:"truncated,omitempty"`
	// Since is the time of the oldest line the component still keeps: nothing older can be asked
	// for.
	// +optional
	Since *metav1.MicroTime `json:"since,omitempty"`
	// Instance names the process that answered (host name and process start), so that a reader
	// sees when the component restarted.
	// +optional
	Instance string `json:"instance,omitempty"`
}

// LogRequest asks a site component for its recent log lines. The global controller creates one
// per request of the log viewer (UI, REST, `edgefleet site logs`), reads the answer and deletes
// it; the named component answers each once, from the lines it keeps in memory.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=edgefleet
// +kubebuilder:printcolumn:name="Component",type=string,JSONPath=`.spec.component`
// +kubebuilder:printcolumn:name="Answered",type=boolean,JSONPath=`.status.answered`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type LogRequest struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec   LogRequestSpec   `json:"spec"`
	Status LogRequestStatus `json:"status,omitempty"`
}

// LogRequestList is a list of LogRequests.
//
// +kubebuilder:object:root=true
type LogRequestList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []LogRequest `json:"items"`
}
