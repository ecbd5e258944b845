package proxy

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
)

// Options are edgefleet-apiproxy's settings.
type Options struct {
	// Listen is where the host's clients connect, host:port; loopback in a cluster.
	Listen string
	// Backends are the API servers, host:port, in order of preference: a new connection goes
	// to the first ready one.
	Backends []string
	// HealthInterval is how often each API server's /readyz is asked; HealthTimeout bounds
	// each question.
	HealthInterval, HealthTimeout time.Duration
	// DialTimeout bounds each connection attempt to an API server.
	DialTimeout time.Duration
	// MoveAfter is how long an API server may stay not ready before the connections through
	// it are closed, so that their clients connect again, to a ready one. Closed only while
	// another API server is ready.
	MoveAfter time.Duration
	// MaxConnections bounds the connections forwarded at once; more are closed at once.
	MaxConnections int
}

// DefaultOptions returns the production defaults. The API servers' --shutdown-delay-duration
// (the kube-apiserver package's) outlasts HealthInterval, so that a stopping API server is
// seen not ready while it still serves.
func DefaultOptions() Options {
	return Options{
		Listen:         "127.0.0.1:6444",
		HealthInterval: time.Second,
		HealthTimeout:  time.Second,
		DialTimeout:    2 * time.Second,
		MoveAfter:      2 * time.Second,
		MaxConnections: 4096,
	}
}

// AddFlags registers the options' flags on fs.
func (o *Options) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.Listen, "listen", o.Listen, "Address (host:port) the host's clients of the API servers connect to.")
	fs.Var((*backendList)(&o.Backends), "backend", "An API server (host:port); repeat the flag, most preferred first (a control-plane host's own first).")
	fs.DurationVar(&o.HealthInterval, "health-interval", o.HealthInterval, "How often each API server's /readyz is asked.")
	fs.DurationVar(&o.HealthTimeout, "health-timeout", o.HealthTimeout, "Bound of each /readyz question.")
	fs.DurationVar(&o.DialTimeout, "dial-timeout", o.DialTimeout, "Bound of each connection attempt to an API server.")
	fs.DurationVar(&o.MoveAfter, "move-after", o.MoveAfter, "How long an API server may stay not ready before the connections through it are closed (while another is ready), so that their clients connect again to a ready one.")
	fs.IntVar(&o.MaxConnections, "max-connections", o.MaxConnections, "Most connections forwarded at once; more are closed at once.")
}

// Validate names every option at fault.
func (o Options) Validate() error {
	var errs []error
	if err := hostPort(o.Listen); err != nil {
		errs = append(errs, fmt.Errorf("--listen %q: %w", o.Listen, err))
	}
	if len(o.Backends) == 0 {
		errs = append(errs, errors.New("--backend: none; name each API server (host:port)"))
	}
	seen := map[string]bool{}
	for _, b := range o.Backends {
		if err := hostPort(b); err != nil {
			errs = append(errs, fmt.Errorf("--backend %q: %w", b, err))
		} else if seen[b] {
			errs = append(errs, fmt.Errorf("--backend %q: named twice", b))
		}
		seen[b] = true
	}
	for _, d := range []struct {
		name string
		d    time.Duration
	}{{"--health-interval", o.HealthInterval}, {"--health-timeout", o.HealthTimeout}, {"--dial-timeout", o.DialTimeout}, {"--move-after", o.MoveAfter}} {
		if d.d <= 0 {
			errs = append(errs, fmt.Errorf("%s %s: must be positive", d.name, d.d))
		}
	}
	if o.MaxConnections <= 0 {
		errs = append(errs, fmt.Errorf("--max-connections %d: must be positive", o.MaxConnections))
	}
	return errors.Join(errs...)
}

func hostPort(s string) error {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return errors.New("want host:port")
	}
	if host == "" {
		return errors.New("no host")
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("port %q: want 1-65535", port)
	}
	return nil
}

// backendList is the repeated --backend flag.
type backendList []string

func (l *backendList) String() string { return strings.Join(*l, ",") }

func (l *backendList) Set(v string) error {
	*l = append(*l, v)
	return nil
}
