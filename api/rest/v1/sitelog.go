package v1

import "time"

// SiteLog is the answer of GET /api/v1/namespaces/{ns}/sites/{site}/log: the recent log lines
// of one of the site's components, as the component keeps them in memory.
type SiteLog struct {
	// Component is the component that answered: local-controller or bpa.
	Component string `json:"component"`
	// Instance names the process that answered (host, pid, start): a new one means the component
	// restarted, and lines from before the restart are gone.
	Instance string `json:"instance"`
	// Since is the time of the oldest line the component still keeps; nothing older can be
	// asked for. Absent when it keeps none.
	Since *time.Time `json:"since,omitempty"`
	// Truncated says that older lines matching the request were left out (the component's
	// bounded memory, the tail asked for, or the answer's size bound).
	Truncated bool `json:"truncated"`
	// Lines are the log lines, oldest first, each one JSON object as the component logged it
	// ("ts", "level", "logger", "msg", then its key/values); untrusted text.
	Lines []string `json:"lines"`
}
