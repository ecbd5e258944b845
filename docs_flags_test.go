package edgefleet_test

import (
	"bufio"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	apiproxy "github.com/edgefleet/edgefleet/apiproxy/proxy"
	bpa "github.com/edgefleet/edgefleet/bpa/setup"
	"github.com/edgefleet/edgefleet/cli/cmd"
	global "github.com/edgefleet/edgefleet/global-controller/setup"
	kms "github.com/edgefleet/edgefleet/kms/setup"
	local "github.com/edgefleet/edgefleet/local-controller/setup"
)

// thirdPartyFlags are the flags the docs name of programs edgefleet runs or installs but does
// not build, by program: the docs show how edgefleet configures them.
var thirdPartyFlags = map[string][]string{
	"kube-apiserver": {"authentication-config", "authorization-mode", "client-ca-file", "encryption-provider-config", "event-ttl", "service-cluster-ip-range",
		"oidc-ca-file", "oidc-client-id", "oidc-groups-claim", "oidc-groups-prefix", "oidc-issuer-url", "oidc-username-claim", "oidc-username-prefix"},
	"kube-controller-manager and kube-scheduler": {"allocate-node-cidrs", "bind-address", "root-ca-file", "use-service-account-credentials"},
	"kubelet":                              {"pod-infra-container-image"},
	"kube-proxy":                           {"proxy-mode"},
	"etcd":                                 {"initial-cluster", "initial-cluster-state"},
	"kubectl":                              {"chunk-size", "clusterrole", "duration", "field-selector", "replicas", "server-side", "serviceaccount", "type"},
	"unshare and nsenter (the test hosts)": {"all", "cgroup", "fork", "ipc", "kill-child", "mount", "net", "pid", "propagation", "root", "target", "uts"},
	"journalctl and systemctl":             {"failed", "no-pager"},
	"mmdebstrap, dpkg-deb, tar and grub-install (the images' recipes)": {"fsys-tarfile", "include", "keep-directory-symlink", "variant"},
}

// docFlag is "--name" where a flag begins (after a space, a backtick, a bracket or a line's
// start), or "--prefix-*", a family of flags.
var docFlag = regexp.MustCompile("(?:^|[\\s`(\\[|])--([a-z][a-z0-9.-]*[a-z0-9])(-\\*)?")

// TestDocumentedFlagsExist reads every --flag the README and docs/ name and checks that one of
// edgefleet's programs has it (the global and local controllers, the BPA, the KMS plugin, the
// API servers' endpoint, the edgefleet CLI), or that it is one of thirdPartyFlags: a flag the
// docs tell a user to set that no program knows fails at start-up with "flag provided but not
// defined". TestDocumentedCommandsExist (cli/cmd) checks which edgefleet command takes each of
// the CLI's.
func TestDocumentedFlagsExist(t *testing.T) {
	known := ourFlags()
	if len(known) < 100 {
		t.Fatalf("found %d flags in edgefleet's programs; they have more: is the reader broken?", len(known))
	}
	for program, flags := range thirdPartyFlags {
		for _, f := range flags {
			if _, ok := known[f]; !ok {
				known[f] = program
			}
		}
	}
	files, err := filepath.Glob(filepath.Join("docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, file := range append(files, "README.md") {
		f, err := os.Open(file)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
		for n := 1; sc.Scan(); n++ {
			for _, m := range docFlag.FindAllStringSubmatch(sc.Text(), -1) {
				checked++
				if _, ok := known[m[1]]; !ok && (m[2] == "" || !anyPrefixed(known, m[1]+"-")) {
					t.Errorf("%s:%d: --%s is a flag of none of edgefleet's programs (nor of thirdPartyFlags): rename it in the docs, or add it where it belongs", file, n, m[1])
				}
			}
		}
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
		_ = f.Close()
	}
	if checked < 100 {
		t.Fatalf("found %d flags in the docs; they name more: is the reader broken?", checked)
	}
	t.Logf("%d flags the docs name checked against %d known", checked, len(known))
}

// ourFlags is every flag of edgefleet's programs, each with the program that has it.
func ourFlags() map[string]string {
	known := map[string]string{}
	add := func(program string, bind func(*flag.FlagSet)) {
		fs := flag.NewFlagSet(program, flag.ContinueOnError)
		bind(fs)
		// Every program prints its version; the controllers log through zap's flags.
		fs.Bool("version", false, "")
		(&zap.Options{}).BindFlags(fs)
		fs.VisitAll(func(f *flag.Flag) { known[f.Name] = program })
	}
	add("global-controller", (&global.Options{}).AddFlags)
	add("local-controller", (&local.Options{}).AddFlags)
	add("local-controller site-init", (&local.SiteInitOptions{}).AddFlags)
	add("local-controller pack-import", (&local.PackImportOptions{}).AddFlags)
	add("local-controller enroll", (&local.EnrollOptions{}).AddFlags)
	add("bpa", (&bpa.Options{}).AddFlags)
	add("edgefleet-kms", (&kms.Options{}).AddFlags)
	add("edgefleet-apiproxy", (&apiproxy.Options{}).AddFlags)
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.InitDefaultHelpFlag()
		c.InitDefaultVersionFlag()
		for _, fs := range []*pflag.FlagSet{c.Flags(), c.PersistentFlags()} {
			fs.VisitAll(func(f *pflag.Flag) { known[f.Name] = "edgefleet " + c.CommandPath() })
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(cmd.NewRoot())
	return known
}

// anyPrefixed reports whether a known flag's name begins with prefix.
func anyPrefixed(known map[string]string, prefix string) bool {
	for name := range known {
		if strings.HasPrefix(name, prefix) {
			return true
		}
	}
	return false
}
