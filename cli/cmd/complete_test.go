package cmd

import (
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
)

func TestCompletionScripts(t *testing.T) {
	for shell, want := range map[string]string{"bash": "__start_edgefleet", "zsh": "#compdef edgefleet", "fish": "complete -c edgefleet"} {
		out, err := run(t, "completion", shell)
		if err != nil || !strings.Contains(out, want) {
			t.Errorf("completion %s: %v, lacks %q", shell, err, want)
		}
	}
}

// TestCompletionListsLiveObjects checks that arguments and flags naming sites, hosts,
// releases and campaigns complete with the objects of the namespace.
func TestCompletionListsLiveObjects(t *testing.T) {
	ns := global.Namespace(t)
	fleetFixture(t, ns)
	for _, name := range []string{"edge-1", "edge-2"} {
		rel := &fleetv1.Release{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: fleetv1.ReleaseSpec{KubernetesVersion: "v1.36.3", OSImage: sitev1.OSImage{SHA256: strings.Repeat("ab", 32)}}}
		if err := global.Client.Create(t.Context(), rel); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := run(t, "campaign", "create", "patch-1", "-n", ns, "--action", "patch", "--release", "edge-1", "--sites", "store-1"); err != nil {
		t.Fatalf("campaign create: %v\n%s", err, out)
	}

	// No file names (":4"); for -o, no space after the word either (":6").
	for _, c := range []struct {
		args string
		want []string
	}{
		{"site describe ", []string{"store-1", "store-2", ":4"}},
		{"site describe store-1 ", []string{":4"}},
		{"site logs store-", []string{"store-1", "store-2", ":4"}},
		{"site logs store-1 --component ", []string{"local-controller", "bpa", ":4"}},
		{"host describe store-1-w", []string{"store-1-w0", "store-1-w1", "store-1-w2", ":4"}},
		{"host list --site ", []string{"store-1", "store-2", ":4"}},
		{"release describe ", []string{"edge-1", "edge-2", ":4"}},
		{"campaign watch ", []string{"patch-1", ":4"}},
		{"campaign abort p", []string{"patch-1", ":4"}},
		{"campaign create c --release edge-", []string{"edge-1", "edge-2", ":4"}},
		{"campaign create c --sites store-1,store-", []string{"store-1,store-1", "store-1,store-2", ":4"}},
		{"campaign create c --blocked-by ", []string{"patch-1", ":4"}},
		{"site list -o ", []string{"table", "wide", "json", "yaml", "jsonpath=", ":6"}},
	} {
		// As the shell asks: the word being completed last, empty for a new word.
		args := append([]string{"__complete", "-n", ns}, strings.Split(c.args, " ")...)
		out, err := run(t, args...)
		if err != nil {
			t.Errorf("%s: %v\n%s", c.args, err, out)
			continue
		}
		// The completions, then the directive; cobra's note on stderr goes.
		got := slices.DeleteFunc(strings.Split(strings.TrimSpace(out), "\n"), func(l string) bool { return strings.HasPrefix(l, "Completion ended") })
		if !slices.Equal(got, c.want) {
			t.Errorf("%q completes %q, want %q", c.args, got, c.want)
		}
	}
}
