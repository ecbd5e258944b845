package testfleet

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/edgefleet/edgefleet/test/controlplane"
)

// Enroll registers a site's control plane with the global controller the way a bootstrap
// machine does at its first boot, without anyone handling a kubeconfig: an operator asks for a
// one-time enrollment token (edgefleet site token create), and the site runs bin/local-controller
// enroll with it, pinning the artifact API's CA, which applies deploy/rbac/site on the site and
// hands the global controller a credential of that least-privilege identity. The Site must exist
// (Apply with the site among enrolling) and the fleet must serve TLS (FleetOptions.TLS). The
// token reaches the command through a 0600 file only, and is removed with it. It returns what the
// command printed.
func (f *Fleet) Enroll(ctx context.Context, ns, site, machine string) ([]byte, error) {
	if f.APICAFile == "" {
		return nil, errors.New("enroll: the fleet serves no TLS (FleetOptions.TLS): enrollment pins the API's CA")
	}
	if _, ok := f.Sites[site]; !ok {
		return nil, fmt.Errorf("enroll: no site control plane %q", site)
	}
	out, err := f.Edgefleet(ctx, "site", "token", "create", site, "-n", ns, "--ttl", "1h")
	if err != nil {
		return nil, err
	}
	return f.RunEnroll(ctx, ns, site, machine, strings.TrimSpace(string(out)))
}

// RunEnroll runs bin/local-controller enroll on site's control plane with token, as its machine
// does at its first boot: the token in a 0600 file only (removed with it), the artifact API's
// CA pinned, deploy/rbac/site applied; args are more flags of the command. It returns what the
// command printed.
func (f *Fleet) RunEnroll(ctx context.Context, ns, site, machine, token string, args ...string) ([]byte, error) {
	dir, err := os.MkdirTemp(f.Dir, "enroll-"+site+"-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	f.record("the enrollment token of site "+ns+"/"+site, []byte(token))
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, filepath.Join(f.root, "bin", "local-controller"), append([]string{"enroll",
		"--kubeconfig", f.SiteKubeconfig(site), "--global-url", f.APIURL, "--global-ca-file", f.APICAFile,
		"--token-file", tokenFile, "--site", ns + "/" + site, "--machine", machine,
		"--site-access-manifest", filepath.Join(f.root, controlplane.SiteAccessManifest),
		"--deadline", "2m"}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("local-controller enroll of site %s/%s: %w: %s", ns, site, err, out)
	}
	return out, nil
}
