// Package problem is the error answer of the global controller's REST endpoints beside the
// artifact API (kubeconfigs, site logs; and the 405 of every path the API server's mux routes):
// an HTTP status, a message that tells the caller the fix, and the field at fault, written as
// restv1.Error.
package problem

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	restv1 "github.com/edgefleet/edgefleet/api/rest/v1"
)

// Problem is an error answer: the HTTP status, the message and the field at fault.
type Problem struct {
	Status  int
	Message string
	Field   string
}

func (p *Problem) Error() string { return p.Message }

// New returns the Problem of status, field (empty: none) and the formatted message.
func New(status int, field, format string, args ...any) *Problem {
	return &Problem{Status: status, Field: field, Message: fmt.Sprintf(format, args...)}
}

// Of returns the answer err calls for: its Problem, or a 500.
func Of(err error) *Problem {
	p := &Problem{}
	if !errors.As(err, &p) {
		p = New(http.StatusInternalServerError, "", "internal error: %v", err)
	}
	return p
}

// Write answers err as restv1.Error with its Problem's status.
func Write(w http.ResponseWriter, err error) {
	p := Of(err)
	WriteJSON(w, p.Status, restv1.Error{Message: p.Message, Field: p.Field})
}

// WriteJSON answers v as JSON with status, never cached.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// MethodNotAllowed answers a request of a method its path does not serve: 405, the Allow
// header, and a restv1.Error naming the methods to use.
func MethodNotAllowed(allow ...string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", strings.Join(allow, ", "))
		WriteJSON(w, http.StatusMethodNotAllowed, restv1.Error{Message: fmt.Sprintf("%s %s: this path answers %s only", r.Method, r.URL.Path, strings.Join(allow, " and "))})
	})
}
