// Command edgefleet-node-agent is the simulated kubelet of the BPA's test hosts: it registers the
// host as a Node of the application cluster and keeps the Node Ready and its Lease renewed until
// SIGTERM or SIGINT (see package bpa/nodeagent). It is built statically: it runs in the test
// hosts' Debian root filesystems.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/edgefleet/edgefleet/bpa/nodeagent"
	"github.com/edgefleet/edgefleet/pkg/restconfig"
	"github.com/edgefleet/edgefleet/pkg/version"
)

const name = "edgefleet-node-agent"

// config is what the command line asks for.
type config struct {
	kubeconfig  string
	showVersion bool
	zap         zap.Options
	agent       nodeagent.Options
}

func main() {
	hostname, _ := os.Hostname() // unknown: --node-name is required
	cfg, err := parseFlags(os.Args[1:], strings.ToLower(hostname), os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(2)
	}
	if cfg.showVersion {
		fmt.Println(version.Version)
		return
	}
	if err := run(cfg); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(1)
	}
}

// run runs the agent until SIGTERM or SIGINT.
func run(cfg config) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	cfg.agent.Log = zap.New(zap.UseFlagOptions(&cfg.zap))

	rc, err := restconfig.Load(cfg.kubeconfig)
	if err != nil {
		return err
	}
	rc.UserAgent = name + "/" + version.Version
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return fmt.Errorf("client for --kubeconfig %s: %w", cfg.kubeconfig, err)
	}
	return nodeagent.Run(ctx, cs, cfg.agent)
}

// parseFlags parses args; the node name defaults to defaultNodeName. Usage and parse errors go
// to output.
func parseFlags(args []string, defaultNodeName string, output io.Writer) (config, error) {
	var cfg config
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(output)
	fs.StringVar(&cfg.kubeconfig, "kubeconfig", "", "Kubeconfig of the application cluster. Required.")
	fs.StringVar(&cfg.agent.NodeName, "node-name", defaultNodeName, "Name of the Node (default: the host name).")
	fs.StringVar(&cfg.agent.ProviderID, "provider-id", "", "spec.providerID of the Node when it is created.")
	fs.StringVar(&cfg.agent.KubeletVersion, "kubelet-version", "", "Kubelet version reported by the Node (v1.36.3). Required.")
	fs.StringVar(&cfg.agent.NodeIP, "node-ip", "", "InternalIP address of the Node (default: the host's first global unicast IPv4 address).")
	fs.Func("node-labels", "Labels of the Node, k=v,k2=v2; an existing Node only gets the ones it lacks.", func(s string) error {
		labels, err := parseLabels(s)
		cfg.agent.Labels = labels
		return err
	})
	fs.DurationVar(&cfg.agent.HeartbeatInterval, "heartbeat-interval", nodeagent.DefaultHeartbeatInterval, "How often the Node's Lease is renewed.")
	fs.DurationVar(&cfg.agent.StatusInterval, "status-interval", nodeagent.DefaultStatusInterval, "How often the Node's status is posted.")
	fs.BoolVar(&cfg.showVersion, "version", false, "Print the version and exit.")
	cfg.zap.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if cfg.showVersion {
		return cfg, nil
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	for _, required := range []struct{ flag, value string }{
		{"kubeconfig", cfg.kubeconfig},
		{"kubelet-version", cfg.agent.KubeletVersion},
		{"node-name", cfg.agent.NodeName},
	} {
		if required.value == "" {
			return config{}, fmt.Errorf("--%s is required", required.flag)
		}
	}
	return cfg, nil
}

// parseLabels parses k=v,k2=v2 (empty: none). The keys and values are checked by nodeagent.Run.
func parseLabels(s string) (map[string]string, error) {
	labels := map[string]string{}
	if strings.TrimSpace(s) == "" {
		return labels, nil
	}
	for kv := range strings.SplitSeq(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("label %q is not key=value", kv)
		}
		labels[k] = v
	}
	return labels, nil
}
