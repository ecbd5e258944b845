package conditions

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
)

func cond(t string, s metav1.ConditionStatus, reason string) metav1.Condition {
	return metav1.Condition{Type: t, Status: s, Reason: reason, Message: "msg " + reason}
}

func TestRecordChanges(t *testing.T) {
	tests := []struct {
		name          string
		before, after []metav1.Condition
		want          []string // event prefixes "Type Reason"
	}{
		{"nothing changed", []metav1.Condition{cond("A", "True", "Fine")}, []metav1.Condition{cond("A", "True", "Fine")}, nil},
		{"first time set", nil, []metav1.Condition{cond("A", "True", "Fine")}, []string{corev1.EventTypeNormal + " Fine"}},
		{"went false", []metav1.Condition{cond("A", "True", "Fine")}, []metav1.Condition{cond("A", "False", "Broken")}, []string{corev1.EventTypeWarning + " Broken"}},
		{"reason changed, status not", []metav1.Condition{cond("A", "False", "X")}, []metav1.Condition{cond("A", "False", "Y")}, []string{corev1.EventTypeWarning + " Y"}},
		{"only the message changed", []metav1.Condition{cond("A", "False", "X")}, []metav1.Condition{{Type: "A", Status: "False", Reason: "X", Message: "other"}}, nil},
		{"unknown is a warning", nil, []metav1.Condition{cond("A", "Unknown", "NotChecked")}, []string{corev1.EventTypeWarning + " NotChecked"}},
		{"untracked type ignored", nil, []metav1.Condition{cond("Other", "True", "Fine")}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := events.NewFakeRecorder(10)
			RecordChanges(rec, &corev1.ConfigMap{}, tt.before, tt.after, "A")
			close(rec.Events)
			var got []string
			for e := range rec.Events {
				got = append(got, e)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("events = %q, want %d starting with %q", got, len(tt.want), tt.want)
			}
			for i := range got {
				if !strings.HasPrefix(got[i], tt.want[i]) {
					t.Errorf("event %q does not start with %q", got[i], tt.want[i])
				}
			}
		})
	}
}

func TestNotTrue(t *testing.T) {
	conds := []metav1.Condition{cond("A", "True", "Fine"), cond("B", "False", "Broken")}
	if why, bad := NotTrue(conds, "A"); bad || why != "" {
		t.Errorf("NotTrue(A) = %q, %v; want all true", why, bad)
	}
	if why, bad := NotTrue(conds, "A", "B"); !bad || why != "B is False: msg Broken" {
		t.Errorf("NotTrue(A, B) = %q, %v", why, bad)
	}
	if why, bad := NotTrue(conds, "C"); !bad || why != "C is not set yet" {
		t.Errorf("NotTrue(C) = %q, %v", why, bad)
	}
}
