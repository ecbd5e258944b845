package controlplane

import (
	"testing"

	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Update reads obj afresh, applies change and writes it back, again from a fresh read while the
// write conflicts with a controller's (as a person's kubectl edit would be retried). obj holds
// what was written.
func Update[T client.Object](t testing.TB, c client.Client, obj T, change func(T)) {
	t.Helper()
	write(t, c, obj, change, func(obj T) error { return c.Update(t.Context(), obj) })
}

// UpdateStatus is Update for the status subresource: it writes obj's status as its controller
// would.
func UpdateStatus[T client.Object](t testing.TB, c client.Client, obj T, change func(T)) {
	t.Helper()
	write(t, c, obj, change, func(obj T) error { return c.Status().Update(t.Context(), obj) })
}

func write[T client.Object](t testing.TB, c client.Client, obj T, change func(T), put func(T) error) {
	t.Helper()
	key := client.ObjectKeyFromObject(obj)
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		if err := c.Get(t.Context(), key, obj); err != nil {
			return err
		}
		change(obj)
		return put(obj)
	})
	if err != nil {
		t.Fatalf("update %T %s: %v", obj, key, err)
	}
}
