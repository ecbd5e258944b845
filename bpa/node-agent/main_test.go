package main

import (
	"io"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseFlags(t *testing.T) {
	base := []string{"--kubeconfig", "/etc/edgefleet/kubeconfig", "--kubelet-version", "v1.36.3"}
	tests := []struct {
		name    string
		args    []string
		wantErr string // a part of the error; empty: no error
		check   func(t *testing.T, cfg config)
	}{
		{
			name: "defaults",
			args: base,
			check: func(t *testing.T, cfg config) {
				if cfg.agent.NodeName != "host-a" || cfg.agent.KubeletVersion != "v1.36.3" || cfg.kubeconfig != "/etc/edgefleet/kubeconfig" {
					t.Errorf("got node %q, version %q, kubeconfig %q", cfg.agent.NodeName, cfg.agent.KubeletVersion, cfg.kubeconfig)
				}
				if cfg.agent.HeartbeatInterval != 10*time.Second || cfg.agent.StatusInterval != time.Minute {
					t.Errorf("got intervals %s, %s; want 10s, 1m", cfg.agent.HeartbeatInterval, cfg.agent.StatusInterval)
				}
			},
		},
		{
			name: "every flag",
			args: append(slices.Clone(base), "--node-name", "worker-1", "--provider-id", "edgefleet://site-a/worker-1",
				"--node-ip", "10.0.0.5", "--node-labels", "site=a, role=worker", "--heartbeat-interval", "2s", "--status-interval", "30s"),
			check: func(t *testing.T, cfg config) {
				a := cfg.agent
				if a.NodeName != "worker-1" || a.ProviderID != "edgefleet://site-a/worker-1" || a.NodeIP != "10.0.0.5" ||
					a.HeartbeatInterval != 2*time.Second || a.StatusInterval != 30*time.Second {
					t.Errorf("got %+v", a)
				}
				if want := map[string]string{"site": "a", "role": "worker"}; !maps.Equal(a.Labels, want) {
					t.Errorf("got labels %v, want %v", a.Labels, want)
				}
			},
		},
		{name: "no kubelet version", args: []string{"--kubeconfig", "/k"}, wantErr: "--kubelet-version is required"},
		{name: "no kubeconfig", args: []string{"--kubelet-version", "v1.36.3"}, wantErr: "--kubeconfig is required"},
		{name: "bad label", args: append(slices.Clone(base), "--node-labels", "site"), wantErr: `label "site" is not key=value`},
		{name: "extra argument", args: append(slices.Clone(base), "run"), wantErr: "unexpected arguments"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := parseFlags(tt.args, "host-a", io.Discard)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, cfg)
		})
	}
}
