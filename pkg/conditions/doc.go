// Package conditions holds the small helpers every reconciler uses on metav1.Conditions:
// setting one, finding the first that is not True, and emitting an event for each change.
package conditions
