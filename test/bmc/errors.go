package bmc

import (
	"net/http"
	"strings"
)

// apiError is a Redfish error answer: an HTTP status and a message of the Base message
// registry (Base.1.8), naming the properties it is about.
type apiError struct {
	status    int
	messageID string // of the Base registry: PropertyValueNotInList, ResourceNotFound, ...
	message   string
	related   []string // JSON pointers of the properties at fault, "#/Boot/BootSourceOverrideTarget"
}

func (e *apiError) Error() string { return e.message }

func errorf(status int, messageID, message string, related ...string) *apiError {
	return &apiError{status: status, messageID: messageID, message: message, related: related}
}

// pointer is the JSON pointer of a property path written with slashes ("Boot/Target").
func pointer(path string) string { return "#/" + strings.TrimPrefix(path, "/") }

// writeError writes e as Redfish's error object: a general message and one extended message
// that clients (sushy) show, with the properties it is about.
func writeError(w http.ResponseWriter, e *apiError) {
	info := map[string]any{
		"@odata.type": "#Message.v1_1_1.Message",
		"MessageId":   "Base.1.8." + e.messageID,
		"Message":     e.message,
		"Severity":    "Warning",
	}
	if len(e.related) > 0 {
		info["RelatedProperties"] = e.related
	}
	if e.status >= 500 {
		info["Severity"] = "Critical"
	}
	writeJSON(w, e.status, map[string]any{"error": map[string]any{
		"code":                  "Base.1.8.GeneralError",
		"message":               e.message,
		"@Message.ExtendedInfo": []any{info},
	}})
}
