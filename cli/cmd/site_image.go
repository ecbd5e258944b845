package cmd

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
	"github.com/edgefleet/edgefleet/pkg/artifactclient"
	"github.com/edgefleet/edgefleet/pkg/siteimage"
)

// siteImageFlags are `edgefleet site image`'s own flags.
type siteImageFlags struct {
	out, base, ttl, url, caFile, release string
	force                                bool
}

// newSiteImageCmd is `edgefleet site image`: a site's bootable image, the base image with the
// site's identity (the global controller's URL, its CA, a new enrollment token) written into it.
func newSiteImageCmd(g *globals) *cobra.Command {
	var f siteImageFlags
	c := &cobra.Command{
		Use:   "image SITE -o SITE.iso [--base PATH] [--ttl 4h] [--with-release RELEASE]",
		Short: "Write a site's bootable USB/ISO image: the base image with the global controller's URL, its CA and a new enrollment token",
		Long: `Write the bootable image of a site's bootstrap machine: a copy of the generic base image
(usb-image/build.sh; 'make usb-image' links it at bin/edgefleet-base.iso) with the site's identity in
its identity area — the global controller's URL (--url, default --api-server), the CA to pin
(--ca-file, default --api-ca-file) and a new single-use enrollment token of the site, issued as
'edgefleet site token create' does (you need the right to create the site's enrollment tokens).
The image is written 0600: it holds the token until the machine enrolls. Write it to a USB stick
with dd (docs/site-image.md). The request is checked (site name, output, base image, URL, CA)
before a token is asked for.

With --with-release, the image also carries the Release's artifacts (OS image, packages, image
archives, charts), downloaded from the artifact API and verified by digest, after the image's
ISO volume: the air-gapped site pack. At first boot they go into the site cache, so the site
builds its application cluster with no uplink to the artifact API. The Release must be Ready;
its artifacts are downloaded before a token is asked for.`,
		Example: `  edgefleet site image site-a -n fleet -o site-a.iso --base bin/edgefleet-base.iso --ttl 8h
  edgefleet site image site-a -n fleet -o site-a.iso --with-release edge-1.36`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.siteImage(cmd, args[0], f)
		},
	}
	fl := c.Flags()
	// Named output to shadow the global --output/-o (a format), which means nothing here.
	fl.StringVarP(&f.out, "output", "o", "", "The image file to write (required)")
	fl.StringVar(&f.base, "base", os.Getenv("EDGEFLEET_BASE_IMAGE"), "The base image (env EDGEFLEET_BASE_IMAGE)")
	fl.StringVar(&f.url, "url", "", "The global controller's URL the machine enrolls at (default: --api-server)")
	fl.StringVar(&f.caFile, "ca-file", "", "The CA certificate the machine pins for that URL, PEM (default: --api-ca-file)")
	fl.BoolVar(&f.force, "force", false, "Replace the output file when it exists")
	fl.StringVar(&f.release, "with-release", "", "Put this Release's artifacts on the image (the air-gapped site pack)")
	withTTL(c, &f.ttl)
	return c
}

func (g *globals) siteImage(cmd *cobra.Command, site string, f siteImageFlags) error {
	cl, ns, err := g.siteAPI()
	if err != nil {
		return err
	}
	id, err := g.checkSiteImage(ns, site, f)
	if err != nil {
		return err
	}
	// The work directory beside the output: the pack's downloads and the image before it is
	// complete; the finished image is renamed from it.
	work, err := os.MkdirTemp(filepath.Dir(f.out), "."+filepath.Base(f.out)+".work-")
	if err != nil {
		return fmt.Errorf("create a work directory beside %s: %w", f.out, err)
	}
	defer os.RemoveAll(work)
	var pack *sitePack
	if f.release != "" {
		if pack, err = g.downloadRelease(cmd, cl, ns, f.release, work); err != nil {
			return err
		}
	}
	t, err := cl.CreateEnrollmentToken(cmd.Context(), ns, site, f.ttl)
	if err != nil {
		return fmt.Errorf("create an enrollment token of site %s/%s: %w", ns, site, err)
	}
	id.Token = t.Token
	if err := writeSiteImage(f, id, pack, filepath.Join(work, "site.iso")); err != nil {
		// No image holds the token: revoke it rather than leave it valid.
		if _, rerr := cl.RevokeEnrollmentToken(cmd.Context(), ns, site, t.ID); rerr != nil {
			return fmt.Errorf("%w (and revoking the unused enrollment token %s failed: %w; revoke it with 'edgefleet site token revoke %s %s')", err, t.ID, rerr, site, t.ID)
		}
		return fmt.Errorf("%w (enrollment token %s revoked)", err, t.ID)
	}
	if !g.quiet {
		fmt.Fprintf(cmd.ErrOrStderr(), "wrote %s: site %s/%s, global controller %s, enrollment token %s valid until %s, single use\n",
			f.out, ns, site, id.URL, t.ID, t.Expires.Local().Format(time.RFC3339))
		if pack != nil {
			fmt.Fprintf(cmd.ErrOrStderr(), "with release %s/%s: %d artifacts, %s, verified by digest\n", ns, f.release, len(pack.files), size(pack.bytes))
		}
	}
	return nil
}

// sitePack is a Release's artifacts downloaded for the air-gapped site pack.
type sitePack struct {
	release, kubernetesVersion string
	files                      []siteimage.PackFile
	bytes                      int64
}

// downloadRelease downloads, verified, every artifact of the Ready release in ns into dir.
func (g *globals) downloadRelease(cmd *cobra.Command, cl *artifactclient.Client, ns, name, dir string) (*sitePack, error) {
	k, err := g.kube()
	if err != nil {
		return nil, err
	}
	rel := &fleetv1.Release{}
	if err := k.Get(cmd.Context(), client.ObjectKey{Namespace: ns, Name: name}, rel); err != nil {
		return nil, fmt.Errorf("release %s/%s for the site pack: %w", ns, name, err)
	}
	if c := meta.FindStatusCondition(rel.Status.Conditions, fleetv1.ReleaseReadyCondition); c == nil || c.Status != metav1.ConditionTrue || c.ObservedGeneration != rel.Generation {
		msg := "not checked by the global controller yet"
		if c != nil && c.Status != metav1.ConditionTrue {
			msg = c.Message
		}
		return nil, fmt.Errorf("release %s/%s is not Ready (%s): only a Ready release's artifacts go on a site's image", ns, name, msg)
	}
	p := &sitePack{release: ns + "/" + name, kubernetesVersion: rel.Spec.KubernetesVersion}
	for _, a := range rel.Spec.Artifacts() {
		path := filepath.Join(dir, a.SHA256)
		what := a.Name
		if what == "" {
			what = "sha256:" + a.SHA256[:12]
		}
		bar := g.bar(-1, "downloading "+what)
		err := cl.Download(cmd.Context(), a.SHA256, path, bar)
		g.done(bar)
		if err != nil {
			return nil, fmt.Errorf("release %s/%s: download %s for the site pack: %w", ns, name, what, err)
		}
		st, err := os.Stat(path)
		if err != nil {
			return nil, err
		}
		p.files = append(p.files, siteimage.PackFile{Name: a.Name, SHA256: a.SHA256, Path: path})
		p.bytes += st.Size()
	}
	return p, nil
}

// writeSiteImage writes the site's image at tmp (the identity injected, the pack appended when
// there is one), then puts it at f.out: linked (refusing an existing file) or, with --force,
// renamed over it.
func writeSiteImage(f siteImageFlags, id siteimage.Identity, pack *sitePack, tmp string) error {
	if err := siteimage.Inject(f.base, tmp, id, false); err != nil {
		return err
	}
	if pack != nil {
		if _, err := siteimage.AppendPack(tmp, pack.release, pack.kubernetesVersion, pack.files); err != nil {
			return fmt.Errorf("write the site pack: %w", err)
		}
	}
	if f.force {
		return os.Rename(tmp, f.out)
	}
	if err := os.Link(tmp, f.out); err != nil {
		return fmt.Errorf("write %s: %w", f.out, err)
	}
	return nil
}

// checkSiteImage refuses a malformed request before a token is issued, and returns the identity
// without its token.
func (g *globals) checkSiteImage(ns, site string, f siteImageFlags) (siteimage.Identity, error) {
	if errs := validation.IsDNS1123Subdomain(site); len(errs) > 0 {
		return siteimage.Identity{}, fmt.Errorf("site name %q: %s", site, strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Subdomain(f.release); f.release != "" && len(errs) > 0 {
		return siteimage.Identity{}, fmt.Errorf("--with-release %q: %s", f.release, strings.Join(errs, "; "))
	}
	if f.out == "" {
		return siteimage.Identity{}, errors.New("no output: give -o SITE.iso")
	}
	if _, err := os.Lstat(f.out); err == nil && !f.force {
		return siteimage.Identity{}, fmt.Errorf("%s exists: choose another output or replace it (--force)", f.out)
	}
	if st, err := os.Stat(filepath.Dir(f.out)); err != nil || !st.IsDir() {
		return siteimage.Identity{}, fmt.Errorf("the output's directory %s does not exist", filepath.Dir(f.out))
	}
	if f.base == "" {
		return siteimage.Identity{}, errors.New("no base image: give --base (make usb-image builds it at bin/edgefleet-base.iso) or EDGEFLEET_BASE_IMAGE")
	}
	if err := siteimage.Check(f.base); err != nil {
		return siteimage.Identity{}, fmt.Errorf("base image: %w", err)
	}
	id := siteimage.Identity{URL: f.url, Site: ns + "/" + site}
	if id.URL == "" {
		id.URL = g.apiServer
	}
	caFile := f.caFile
	if caFile == "" {
		caFile = g.apiCAFile
	}
	if caFile == "" {
		return siteimage.Identity{}, errors.New("no CA to pin: give --ca-file (or --api-ca-file), the CA certificate of the global controller's URL")
	}
	ca, err := os.ReadFile(caFile)
	if err != nil {
		return siteimage.Identity{}, fmt.Errorf("the CA to pin: %w", err)
	}
	id.CA = ca
	// Checked with a stand-in token: the real one is issued only for a well-formed request.
	probe := id
	probe.Token = "stand-in"
	return id, probe.Validate()
}
