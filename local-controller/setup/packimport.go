package setup

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/edgefleet/edgefleet/local-controller/sitecache"
	"github.com/edgefleet/edgefleet/pkg/siteimage"
)

// PackImportOptions are the settings of `local-controller pack-import`, run at the bootstrap
// machine's boot before the local controller starts: the air-gapped site pack on the boot
// medium (edgefleet site image --with-release) goes into the site cache.
type PackImportOptions struct {
	// From is the image file or the block device of the medium.
	From string
	// CacheDir is the site cache's directory (the local controller's --cache-dir).
	CacheDir string
	// Timeout bounds the import.
	Timeout time.Duration
}

// DefaultPackImportOptions returns the defaults of `local-controller pack-import`.
func DefaultPackImportOptions() PackImportOptions {
	return PackImportOptions{CacheDir: DefaultOptions().CacheDir, Timeout: time.Hour}
}

// AddFlags binds the options to flags.
func (o *PackImportOptions) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.From, "from", o.From, "The site's image file, or the block device of the medium written from it.")
	fs.StringVar(&o.CacheDir, "cache-dir", o.CacheDir, "Directory of the site artifact cache (the local controller's --cache-dir).")
	fs.DurationVar(&o.Timeout, "timeout", o.Timeout, "Give up when the import has not finished after this long.")
}

// PackImport is what an import did.
type PackImport struct {
	// Release is the pack's Release ("namespace/name"); empty when the medium carries no pack.
	Release string
	// Artifacts is how many the pack holds; Imported how many this run put into the cache (the
	// others were there already); Bytes their size.
	Artifacts, Imported int
	Bytes               int64
	// Before says the pack was imported by an earlier run (nothing was read).
	Before bool
}

// String is the console line of the import (edgefleet-pack.service).
func (p PackImport) String() string {
	switch {
	case p.Release == "":
		return "EDGEFLEET-PACK none: the medium carries no site pack"
	case p.Before:
		return fmt.Sprintf("EDGEFLEET-PACK release=%s artifacts=%d imported at an earlier boot", p.Release, p.Artifacts)
	}
	return fmt.Sprintf("EDGEFLEET-PACK release=%s artifacts=%d imported=%d bytes=%d", p.Release, p.Artifacts, p.Imported, p.Bytes)
}

// packsDir is where the cache directory records the packs imported, one file per manifest digest:
// a reboot does not read the medium again, and artifacts the cache has since garbage-collected
// (no ArtifactSet lists them any more) do not come back.
const packsDir = "packs"

// RunPackImport puts every artifact of the pack on o.From into the site cache, each verified
// against its sha256 before it is published, and records the pack as imported. A medium
// without a pack imports nothing; a damaged one fails naming the damage, with no damaged
// content published. Safe to run again after a crash: what is cached is kept.
func RunPackImport(ctx context.Context, o PackImportOptions) (PackImport, error) {
	switch {
	case o.From == "":
		return PackImport{}, errors.New("pack-import: --from must name the site's image or its medium's block device")
	case o.CacheDir == "":
		return PackImport{}, errors.New("pack-import: --cache-dir must not be empty")
	case o.Timeout <= 0:
		return PackImport{}, fmt.Errorf("pack-import: --timeout must be positive, got %s", o.Timeout)
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	p, err := siteimage.OpenPack(o.From)
	if errors.Is(err, siteimage.ErrNoPack) {
		return PackImport{}, nil
	}
	if err != nil {
		return PackImport{}, fmt.Errorf("pack-import: %w", err)
	}
	defer p.Close()
	res := PackImport{Release: p.Manifest.Release, Artifacts: len(p.Manifest.Artifacts)}
	marker := filepath.Join(o.CacheDir, packsDir, p.Digest)
	if _, err := os.Stat(marker); err == nil {
		res.Before = true
		return res, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return res, fmt.Errorf("pack-import: %w", err)
	}
	log := ctrl.Log.WithName("pack-import")
	cache, err := sitecache.New(o.CacheDir, log)
	if err != nil {
		return res, err
	}
	cache.OnFetched = func(n int64) { res.Imported++; res.Bytes += n }
	for _, a := range p.Manifest.Artifacts {
		if _, err := cache.Fetch(ctx, a.SHA256, p); err != nil {
			return res, fmt.Errorf("pack-import: %s of release %s: %w", a.Name, res.Release, err)
		}
	}
	if err := os.MkdirAll(filepath.Dir(marker), 0o755); err != nil {
		return res, fmt.Errorf("pack-import: %w", err)
	}
	if err := os.WriteFile(marker, []byte(res.Release+"\n"), 0o644); err != nil {
		return res, fmt.Errorf("pack-import: %w", err)
	}
	log.Info("Site pack imported", "release", res.Release, "artifacts", res.Artifacts, "imported", res.Imported, "bytes", res.Bytes)
	return res, nil
}
