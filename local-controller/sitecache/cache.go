package sitecache

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-logr/logr"

	"github.com/edgefleet/edgefleet/pkg/artifactclient"
)

// Fetcher downloads the content with a sha256 into path, verifying it before path appears
// (artifactclient.Client does). It resumes from path+".part" when that exists.
type Fetcher interface {
	Download(ctx context.Context, digest, path string, progress artifactclient.Progress) error
}

// ErrCorrupt is wrapped by errors about cached content whose sha256 no longer matches its name.
var ErrCorrupt = errors.New("cached content does not match its sha256")

var digestRE = regexp.MustCompile(`^[a-f0-9]{64}$`)

// Cache is a content-addressed directory of verified artifacts:
//
//	<dir>/sha256/<digest>          published, verified content
//	<dir>/incoming/<digest>.part   a transfer in progress (resumed after a restart)
//
// A file is published only after its sha256 matched. The cache remembers the identity (inode,
// size, modification time) of each file at its last verification; a file whose identity changed
// since is hashed again before it is served, and removed when it no longer matches.
type Cache struct {
	dir string
	log logr.Logger
	// OnCorrupt, when set, is told the digest of every cached file found corrupted and removed.
	OnCorrupt func(digest string)
	// OnFetched, when set, is told the size of every published fetch.
	OnFetched func(bytes int64)

	mu       sync.Mutex
	verified map[string]identity
	fetches  map[string]*fetch
}

// identity is what a file looked like when its content was last verified.
type identity struct {
	ino   uint64
	size  int64
	mtime time.Time
}

func identityOf(fi fs.FileInfo) identity {
	id := identity{size: fi.Size(), mtime: fi.ModTime()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		id.ino = st.Ino
	}
	return id
}

// fetch is one transfer in flight; callers asking for the same digest wait for it.
type fetch struct {
	done chan struct{}
	err  error
}

// Entry is one published artifact.
type Entry struct {
	SHA256 string
	Size   int64
}

// New opens (creating when needed) a cache in dir.
func New(dir string, log logr.Logger) (*Cache, error) {
	for _, d := range []string{filepath.Join(dir, "sha256"), filepath.Join(dir, "incoming")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("site cache: %w", err)
		}
	}
	return &Cache{dir: dir, log: log, verified: map[string]identity{}, fetches: map[string]*fetch{}}, nil
}

// Path is where the content with digest is published.
func (c *Cache) Path(digest string) string { return filepath.Join(c.dir, "sha256", digest) }

func (c *Cache) partPath(digest string) string {
	return filepath.Join(c.dir, "incoming", digest)
}

// Check reports whether the content with digest is cached and intact. A file not verified since
// it last changed is hashed now; a file that no longer matches is removed and reported with an
// error wrapping ErrCorrupt (Check then reports it as not cached).
func (c *Cache) Check(digest string) (Entry, bool, error) {
	if !digestRE.MatchString(digest) {
		return Entry{}, false, fmt.Errorf("%q is not a sha256 digest (64 lower-case hex digits)", digest)
	}
	f, err := os.Open(c.Path(digest))
	if errors.Is(err, fs.ErrNotExist) {
		return Entry{}, false, nil
	}
	if err != nil {
		return Entry{}, false, err
	}
	defer f.Close()
	fi, err := c.verify(digest, f)
	if err != nil {
		return Entry{}, false, err
	}
	return Entry{SHA256: digest, Size: fi.Size()}, true, nil
}

// verify returns the file's info when its content matches digest: at once when its identity is
// the one recorded at the last verification, after hashing it otherwise. A mismatch removes the
// file and returns an error wrapping ErrCorrupt.
func (c *Cache) verify(digest string, f *os.File) (fs.FileInfo, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	id := identityOf(fi)
	c.mu.Lock()
	known, ok := c.verified[digest]
	c.mu.Unlock()
	if ok && known == id {
		return fi, nil
	}
	got, err := hashFile(f)
	if err != nil {
		return nil, fmt.Errorf("verify sha256:%s: %w", digest, err)
	}
	if got != digest {
		c.removeCorrupt(digest, id)
		return nil, fmt.Errorf("sha256:%s: %w (it hashes to %s); removed it, it will be fetched again", digest, ErrCorrupt, got)
	}
	c.mu.Lock()
	c.verified[digest] = id
	c.mu.Unlock()
	return fi, nil
}

// removeCorrupt removes the published file of digest when it still is the file that failed
// verification (a fresh fetch may have replaced it meanwhile).
func (c *Cache) removeCorrupt(digest string, bad identity) {
	c.mu.Lock()
	delete(c.verified, digest)
	c.mu.Unlock()
	if fi, err := os.Stat(c.Path(digest)); err == nil && identityOf(fi) == bad {
		if err := os.Remove(c.Path(digest)); err != nil {
			c.log.Error(err, "remove corrupted cached artifact", "sha256", digest)
		}
	}
	c.log.Info("cached artifact failed verification and was removed", "sha256", digest)
	if c.OnCorrupt != nil {
		c.OnCorrupt(digest)
	}
}

func hashFile(f *os.File) (string, error) {
	h := sha256.New()
	if _, err := io.Copy(h, io.NewSectionReader(f, 0, 1<<62)); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// Fetch makes sure the content with digest is cached, downloading it with fetcher when it is
// not. Concurrent calls for one digest share one transfer. A transfer broken earlier (even
// before a restart) is resumed from where it stopped.
func (c *Cache) Fetch(ctx context.Context, digest string, fetcher Fetcher) (Entry, error) {
	e, ok, err := c.Check(digest)
	if ok {
		return e, nil
	}
	if err != nil && !errors.Is(err, ErrCorrupt) {
		return Entry{}, err
	}
	c.mu.Lock()
	fl, running := c.fetches[digest]
	if !running {
		fl = &fetch{done: make(chan struct{})}
		c.fetches[digest] = fl
	}
	c.mu.Unlock()
	if !running {
		fl.err = c.download(ctx, digest, fetcher)
		c.mu.Lock()
		delete(c.fetches, digest)
		c.mu.Unlock()
		close(fl.done)
	}
	select {
	case <-fl.done:
	case <-ctx.Done():
		return Entry{}, ctx.Err()
	}
	if fl.err != nil {
		return Entry{}, fl.err
	}
	e, ok, err = c.Check(digest)
	if !ok && err == nil {
		err = fmt.Errorf("sha256:%s disappeared from the cache right after it was fetched", digest)
	}
	return e, err
}

// download fetches into incoming/ and publishes the verified file with a rename.
func (c *Cache) download(ctx context.Context, digest string, fetcher Fetcher) error {
	tmp := c.partPath(digest)
	// A complete download left by a crash before its publication is fetched again; its partial
	// sibling (tmp+".part") is what a broken transfer leaves, and is resumed.
	if err := os.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := fetcher.Download(ctx, digest, tmp, nil); err != nil {
		return err
	}
	fi, err := os.Stat(tmp)
	if err != nil {
		return err
	}
	// The fetcher verified the content; remember the file as verified before it is published
	// (a rename keeps inode and modification time).
	c.mu.Lock()
	c.verified[digest] = identityOf(fi)
	c.mu.Unlock()
	if err := os.Rename(tmp, c.Path(digest)); err != nil {
		return fmt.Errorf("publish sha256:%s: %w", digest, err)
	}
	c.log.Info("cached artifact", "sha256", digest, "size", fi.Size())
	if c.OnFetched != nil {
		c.OnFetched(fi.Size())
	}
	return nil
}

// List returns the published artifacts, without verifying them.
func (c *Cache) List() ([]Entry, error) {
	des, err := os.ReadDir(filepath.Join(c.dir, "sha256"))
	if err != nil {
		return nil, fmt.Errorf("list site cache: %w", err)
	}
	var out []Entry
	for _, de := range des {
		if !digestRE.MatchString(de.Name()) {
			continue
		}
		fi, err := de.Info()
		if err != nil {
			continue // removed meanwhile
		}
		out = append(out, Entry{SHA256: de.Name(), Size: fi.Size()})
	}
	return out, nil
}

// Keep removes every published artifact and partial transfer whose digest is not in keep
// (transfers in flight are left alone) and returns the digests removed.
func (c *Cache) Keep(keep map[string]bool) ([]string, error) {
	var removed []string
	var errs []error
	for _, sub := range []string{"sha256", "incoming"} {
		des, err := os.ReadDir(filepath.Join(c.dir, sub))
		if err != nil {
			return removed, fmt.Errorf("garbage-collect site cache: %w", err)
		}
		for _, de := range des {
			digest := strings.TrimSuffix(de.Name(), ".part")
			c.mu.Lock()
			_, busy := c.fetches[digest]
			c.mu.Unlock()
			if keep[digest] || busy {
				continue
			}
			if err := os.Remove(filepath.Join(c.dir, sub, de.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
				continue
			}
			if sub == "sha256" {
				c.mu.Lock()
				delete(c.verified, digest)
				c.mu.Unlock()
				removed = append(removed, digest)
			}
		}
	}
	return removed, errors.Join(errs...)
}

// VerifyAll hashes every published artifact again (catching corruption that kept a file's size
// and modification time) and returns how many were found corrupted and removed.
func (c *Cache) VerifyAll(ctx context.Context) (int, error) {
	entries, err := c.List()
	if err != nil {
		return 0, err
	}
	corrupt := 0
	for _, e := range entries {
		if ctx.Err() != nil {
			return corrupt, ctx.Err()
		}
		c.mu.Lock()
		delete(c.verified, e.SHA256)
		c.mu.Unlock()
		if _, _, err := c.Check(e.SHA256); errors.Is(err, ErrCorrupt) {
			corrupt++
		} else if err != nil {
			return corrupt, err
		}
	}
	return corrupt, nil
}
