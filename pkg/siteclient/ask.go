package siteclient

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ErrNoAnswer is Ask's error when the wait ran out before the site answered.
var ErrNoAnswer = errors.New("no answer in time")

// DefaultPoll is how often Ask reads the request when poll is zero.
const DefaultPoll = 250 * time.Millisecond

// deleteTimeout bounds the deletion of a request, which runs even when the caller went away.
const deleteTimeout = 10 * time.Second

// Ask is how the global controller asks a site component something through the site's API
// server: it creates req on the site through c, reads it every poll until answered says the
// component answered (req then holds the answer), and always deletes it, even when the caller
// went away or wait ran out. Reads that fail for the link's sake are tried again until wait runs
// out. Errors: ErrNoAnswer (wrapped with the last failed read, if any) when wait ran out; the
// caller's context error when it went away; otherwise the failed create, or a read the site
// refused (not found, forbidden), naming the kind.
func Ask[T client.Object](ctx context.Context, c client.Client, req T, wait, poll time.Duration, answered func(T) bool) error {
	if poll <= 0 {
		poll = DefaultPoll
	}
	kind := reflect.TypeOf(req).Elem().Name()
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	if err := c.Create(wctx, req); err != nil {
		return fmt.Errorf("create %s: %w", kind, err)
	}
	defer func() {
		dctx, dcancel := context.WithTimeout(context.WithoutCancel(ctx), deleteTimeout)
		defer dcancel()
		_ = client.IgnoreNotFound(c.Delete(dctx, req))
	}()
	t := time.NewTicker(poll)
	defer t.Stop()
	var lastErr error
	for {
		select {
		case <-wctx.Done():
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if lastErr != nil {
				return fmt.Errorf("%w (last read of %s %s: %w)", ErrNoAnswer, kind, req.GetName(), lastErr)
			}
			return ErrNoAnswer
		case <-t.C:
		}
		err := c.Get(wctx, client.ObjectKeyFromObject(req), req)
		switch {
		case err == nil && answered(req):
			return nil
		case apierrors.IsNotFound(err) || apierrors.IsForbidden(err):
			// The site's answer, which another read will not change.
			return fmt.Errorf("read %s %s: %w", kind, req.GetName(), err)
		case err != nil:
			// A link's or the client's rate limiter's hiccup: read again until the wait ends.
			lastErr = err
		}
	}
}
