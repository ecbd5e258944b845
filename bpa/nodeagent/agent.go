package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/sync/errgroup"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	utilversion "k8s.io/apimachinery/pkg/util/version"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
)

const (
	// DefaultHeartbeatInterval is how often the node's Lease is renewed when
	// Options.HeartbeatInterval is zero (kubelet's default).
	DefaultHeartbeatInterval = 10 * time.Second
	// DefaultStatusInterval is how often the node's status is posted when
	// Options.StatusInterval is zero.
	DefaultStatusInterval = time.Minute

	// leaseDurationSeconds is the Lease's duration, as kubelet's default.
	leaseDurationSeconds = 40
	// firstRetry and maxRetry bound the backoff between retries of a failed request; the cap
	// stays well below the Lease's duration, as kubelet's lease controller's does.
	firstRetry = 200 * time.Millisecond
	maxRetry   = 7 * time.Second
)

// Options configure the agent of one node.
type Options struct {
	// NodeName is the Node's name, a DNS-1123 subdomain. Required.
	NodeName string
	// ProviderID is written to spec.providerID when the Node is created; an existing Node's
	// spec is never changed.
	ProviderID string
	// KubeletVersion is reported as status.nodeInfo.kubeletVersion ("v1.36.3"). Required.
	KubeletVersion string
	// NodeIP is the InternalIP address reported. Empty: the host's first global unicast IPv4
	// address, if any.
	NodeIP string
	// Labels are added to the Node's well-known labels (they win over them on creation). On an
	// existing Node only the labels it lacks are added.
	Labels map[string]string
	// HeartbeatInterval is how often the Lease is renewed; below the Lease's 40 s duration.
	// Zero means DefaultHeartbeatInterval.
	HeartbeatInterval time.Duration
	// StatusInterval is how often the node's status (and its conditions' heartbeat time) is
	// posted. Zero means DefaultStatusInterval.
	StatusInterval time.Duration
	// Clock gives the time stamps, tickers and retry timers. Nil means the real clock.
	Clock clock.WithTicker
	// Log receives the retried errors and the lifecycle messages. The zero Logger discards.
	Log logr.Logger
}

// validate checks the options and fills the defaults in.
func (o *Options) validate() error {
	var errs []error
	if o.NodeName == "" {
		errs = append(errs, errors.New("NodeName is required"))
	} else if msgs := validation.IsDNS1123Subdomain(o.NodeName); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("NodeName %q is not a DNS-1123 subdomain: %v", o.NodeName, msgs))
	}
	if o.KubeletVersion == "" {
		errs = append(errs, errors.New("KubeletVersion is required"))
	} else if _, err := utilversion.ParseSemantic(o.KubeletVersion); err != nil {
		errs = append(errs, fmt.Errorf("KubeletVersion %q is not a semantic version: %w", o.KubeletVersion, err))
	}
	if o.NodeIP != "" && net.ParseIP(o.NodeIP) == nil {
		errs = append(errs, fmt.Errorf("NodeIP %q is not an IP address", o.NodeIP))
	}
	if err := metav1validation.ValidateLabels(o.Labels, field.NewPath("Labels")).ToAggregate(); err != nil {
		errs = append(errs, err)
	}
	switch {
	case o.HeartbeatInterval < 0:
		errs = append(errs, fmt.Errorf("HeartbeatInterval %s is negative", o.HeartbeatInterval))
	case o.HeartbeatInterval >= leaseDurationSeconds*time.Second:
		errs = append(errs, fmt.Errorf("HeartbeatInterval %s is not below the Lease's duration of %ds", o.HeartbeatInterval, leaseDurationSeconds))
	case o.HeartbeatInterval == 0:
		o.HeartbeatInterval = DefaultHeartbeatInterval
	}
	switch {
	case o.StatusInterval < 0:
		errs = append(errs, fmt.Errorf("StatusInterval %s is negative", o.StatusInterval))
	case o.StatusInterval == 0:
		o.StatusInterval = DefaultStatusInterval
	}
	if len(errs) > 0 {
		return fmt.Errorf("nodeagent: invalid options: %w", errors.Join(errs...))
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	return nil
}

// agent runs for one node.
type agent struct {
	cs   kubernetes.Interface
	opts Options
	// host is what the node reports about the machine; read once at start.
	host hostInfo
	log  logr.Logger
}

// Run registers the node opts.NodeName, then keeps its status and its Lease fresh until ctx is
// cancelled, when it returns nil and leaves the Node in place. It returns an error when opts are
// invalid, when the host cannot be inspected, or when the API server refuses a request for good
// (invalid, forbidden, unauthorized); every other error is logged and retried.
func Run(ctx context.Context, cs kubernetes.Interface, opts Options) error {
	if err := opts.validate(); err != nil {
		return err
	}
	host, err := readHost(opts.NodeIP)
	if err != nil {
		return fmt.Errorf("nodeagent %s: %w", opts.NodeName, err)
	}
	a := &agent{cs: cs, opts: opts, host: host, log: opts.Log.WithValues("node", opts.NodeName)}

	node, err := retryTransient(ctx, a, "register node", a.register)
	if err != nil {
		return unlessStopped(ctx, err)
	}
	a.log.Info("Node registered", "kubeletVersion", opts.KubeletVersion)

	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		return a.every(gctx, opts.HeartbeatInterval, "renew lease", func(ctx context.Context) error {
			return a.renewLease(ctx, node)
		})
	})
	g.Go(func() error {
		return a.every(gctx, opts.StatusInterval, "update node status", a.updateStatus)
	})
	if err := unlessStopped(ctx, g.Wait()); err != nil {
		return err
	}
	a.log.Info("Stopped")
	return nil
}

// unlessStopped returns err, or nil once ctx is done: cancelling ctx is the graceful stop, and
// the loops then end with ctx's error.
func unlessStopped(ctx context.Context, err error) error {
	select {
	case <-ctx.Done():
		return nil
	default:
		return err
	}
}

// every runs op now, then every interval, until ctx ends or op fails for good.
func (a *agent) every(ctx context.Context, interval time.Duration, what string, op func(context.Context) error) error {
	ticker := a.opts.Clock.NewTicker(interval)
	defer ticker.Stop()
	for {
		if _, err := retryTransient(ctx, a, what, func(ctx context.Context) (struct{}, error) {
			return struct{}{}, op(ctx)
		}); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ticker.C():
		}
	}
}

// retryTransient calls op until it succeeds, fails with an error that retrying cannot fix, or
// ctx ends. Transient errors are logged and retried after an exponential backoff capped at
// maxRetry.
func retryTransient[T any](ctx context.Context, a *agent, what string, op func(context.Context) (T, error)) (T, error) {
	backoff := wait.Backoff{Duration: firstRetry, Factor: 2, Jitter: 0.1, Steps: math.MaxInt32, Cap: maxRetry}
	for {
		v, err := op(ctx)
		if err == nil {
			return v, nil
		}
		if ctx.Err() != nil {
			return v, ctx.Err()
		}
		if !transient(err) {
			return v, err
		}
		delay := backoff.Step()
		a.log.Error(err, "Retrying", "step", what, "after", delay)
		timer := a.opts.Clock.NewTimer(delay)
		select {
		case <-ctx.Done():
			timer.Stop()
			return v, ctx.Err()
		case <-timer.C():
		}
	}
}

// transient tells whether retrying the request that failed with err may succeed: not when the
// API server found it invalid or refused the agent's credentials; yes for everything else
// (unreachable server, timeouts, conflicts, server errors, a namespace not created yet).
func transient(err error) bool {
	switch {
	case apierrors.IsInvalid(err),
		apierrors.IsBadRequest(err),
		apierrors.IsForbidden(err),
		apierrors.IsUnauthorized(err),
		apierrors.IsMethodNotSupported(err),
		apierrors.IsNotAcceptable(err),
		apierrors.IsUnsupportedMediaType(err),
		apierrors.IsRequestEntityTooLargeError(err):
		return false
	}
	return true
}
