package ironic

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestIronic starts real Ironic and checks what baremetal-operator relies on: an API new enough,
// authentication that refuses strangers, and a node's way from enroll to available and out.
func TestIronic(t *testing.T) {
	start := time.Now()
	ir := StartT(t, Options{})
	t.Logf("ironic answered %s in %s", ir.URL, time.Since(start).Round(time.Millisecond))
	ctx := t.Context()

	t.Run("microversion", func(t *testing.T) {
		resp, err := http.Get(ir.URL + "/v1")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		maxVersion := resp.Header.Get("X-OpenStack-Ironic-API-Maximum-Version")
		if !atLeast(maxVersion, MinAPIVersion) {
			t.Fatalf("GET /v1: maximum API version %q, want >= %s (baremetal-operator v0.13.2's floor)", maxVersion, MinAPIVersion)
		}
		t.Logf("API versions %s to %s", resp.Header.Get("X-OpenStack-Ironic-API-Minimum-Version"), maxVersion)
	})

	t.Run("authentication", func(t *testing.T) {
		for _, tc := range []struct {
			name     string
			user     string
			password string
		}{
			{name: "no credentials"},
			{name: "wrong password", user: ir.User, password: ir.Password + "x"},
			{name: "unknown user", user: "admin", password: ir.Password},
		} {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, ir.URL+"/v1/nodes", nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("X-OpenStack-Ironic-API-Version", MinAPIVersion)
			if tc.user != "" {
				req.SetBasicAuth(tc.user, tc.password)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("%s: GET /v1/nodes answered %s, want 401", tc.name, resp.Status)
			}
		}
		var nodes struct {
			Nodes []any `json:"nodes"`
		}
		ir.CallT(t, http.MethodGet, "/v1/nodes", nil, http.StatusOK, &nodes)
	})

	t.Run("fake node to available and deleted", func(t *testing.T) {
		var node struct {
			UUID           string `json:"uuid"`
			ProvisionState string `json:"provision_state"`
		}
		ir.CallT(t, http.MethodPost, "/v1/nodes", map[string]any{"name": "fake-0", "driver": "fake-hardware"}, http.StatusCreated, &node)
		if node.ProvisionState != "enroll" {
			t.Fatalf("new node %s is %q, want enroll", node.UUID, node.ProvisionState)
		}
		start := time.Now()
		for _, step := range []struct{ target, want string }{{"manage", "manageable"}, {"provide", "available"}} {
			ir.CallT(t, http.MethodPut, "/v1/nodes/"+node.UUID+"/states/provision", map[string]string{"target": step.target}, http.StatusAccepted, nil)
			waitState(ctx, t, ir, node.UUID, step.want)
			t.Logf("node %s: %s after %s", node.UUID, step.want, time.Since(start).Round(time.Millisecond))
		}
		ir.CallT(t, http.MethodDelete, "/v1/nodes/"+node.UUID, nil, http.StatusNoContent, nil)
		ir.CallT(t, http.MethodGet, "/v1/nodes/"+node.UUID, nil, http.StatusNotFound, nil)
	})

	t.Run("password not in the run's files", func(t *testing.T) {
		for _, f := range []string{ir.Log, ir.Dir + "/ironic.conf", ir.Dir + "/htpasswd"} {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Contains(b, []byte(ir.Password)) {
				t.Errorf("%s holds the password in clear", f)
			}
		}
	})
}

// waitState waits up to a minute for the node's provision state to be want, failing at once
// when the node lands in an error state.
func waitState(ctx context.Context, t *testing.T, ir *Ironic, uuid, want string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	var node struct {
		ProvisionState string `json:"provision_state"`
		LastError      string `json:"last_error"`
	}
	for {
		ir.CallT(t, http.MethodGet, "/v1/nodes/"+uuid, nil, http.StatusOK, &node)
		switch {
		case node.ProvisionState == want:
			return
		case strings.HasSuffix(node.ProvisionState, "failed") || node.ProvisionState == "error":
			t.Fatalf("node %s is %q, want %q: %s", uuid, node.ProvisionState, want, node.LastError)
		case time.Now().After(deadline):
			t.Fatalf("node %s still %q after a minute, want %q (last error %q)", uuid, node.ProvisionState, want, node.LastError)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// atLeast reports whether microversion v ("1.96") is at least floor.
func atLeast(v, floor string) bool {
	parse := func(s string) (int, int, error) {
		major, minor, ok := strings.Cut(s, ".")
		if !ok {
			return 0, 0, fmt.Errorf("no dot in %q", s)
		}
		a, err := strconv.Atoi(major)
		if err != nil {
			return 0, 0, err
		}
		b, err := strconv.Atoi(minor)
		return a, b, err
	}
	a, b, err := parse(v)
	if err != nil {
		return false
	}
	c, d, err := parse(floor)
	if err != nil {
		return false
	}
	return a > c || a == c && b >= d
}

func TestAtLeast(t *testing.T) {
	for _, tc := range []struct {
		v, floor string
		want     bool
	}{
		{"1.96", "1.89", true},
		{"1.89", "1.89", true},
		{"1.82", "1.89", false},
		{"2.0", "1.89", true},
		{"1.100", "1.89", true},
		{"", "1.89", false},
		{"1", "1.89", false},
	} {
		if got := atLeast(tc.v, tc.floor); got != tc.want {
			t.Errorf("atLeast(%q, %q) = %v, want %v", tc.v, tc.floor, got, tc.want)
		}
	}
}
