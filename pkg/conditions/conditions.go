package conditions

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
)

// Set sets a condition, keeping its transition time when the status did not change.
func Set(conds *[]metav1.Condition, generation int64, t string, status metav1.ConditionStatus, reason, message string) {
	meta.SetStatusCondition(conds, metav1.Condition{
		Type: t, Status: status, Reason: reason, Message: message, ObservedGeneration: generation,
	})
}

// NotTrue returns a sentence about the first of types that is missing or not True, and false
// when all are True.
func NotTrue(conds []metav1.Condition, types ...string) (string, bool) {
	for _, t := range types {
		c := meta.FindStatusCondition(conds, t)
		if c == nil {
			return t + " is not set yet", true
		}
		if c.Status != metav1.ConditionTrue {
			return fmt.Sprintf("%s is %s: %s", t, c.Status, c.Message), true
		}
	}
	return "", false
}

// RecordChanges emits one event for each of types whose status or reason differs between
// before and after: Normal when it became True, Warning otherwise.
func RecordChanges(rec events.EventRecorder, obj runtime.Object, before, after []metav1.Condition, types ...string) {
	for _, t := range types {
		old, cur := meta.FindStatusCondition(before, t), meta.FindStatusCondition(after, t)
		if cur == nil || (old != nil && old.Status == cur.Status && old.Reason == cur.Reason) {
			continue
		}
		kind := corev1.EventTypeNormal
		if cur.Status != metav1.ConditionTrue {
			kind = corev1.EventTypeWarning
		}
		rec.Eventf(obj, nil, kind, cur.Reason, "Set"+t, "%s=%s: %s", t, cur.Status, cur.Message)
	}
}
