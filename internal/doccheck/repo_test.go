package doccheck

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/corralcache/corral/internal/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// repo is the repository as the checks see it: its root directory and its files, as
// slash-separated paths relative to the root.
type repo struct {
	root  string
	files []string        // sorted
	set   map[string]bool // files and every directory above one
}

var (
	repoOnce sync.Once
	theRepo  *repo
	repoErr  error
)

// loadRepo returns the repository the test runs in, read once.
func loadRepo(tb testing.TB) *repo {
	tb.Helper()
	repoOnce.Do(func() { theRepo, repoErr = readRepo() })
	if repoErr != nil {
		tb.Fatal(repoErr)
	}
	return theRepo
}

// readRepo finds the root (two levels above this package, where go.mod names the module)
// and lists its files: the ones git tracks and the new ones it does not ignore, so that a
// document is checked before its first commit; without git (a tarball), every file under
// the root but hidden directories and bin/.
func readRepo() (*repo, error) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		return nil, err
	}
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		return nil, err
	}
	if !bytes.Contains(mod, []byte("module github.com/corralcache/corral\n")) {
		return nil, fs.ErrNotExist
	}
	r := &repo{root: root, set: map[string]bool{".": true}}
	cmd := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	cmd.Dir = root
	if out, err := cmd.Output(); err == nil {
		for _, f := range strings.Split(string(out), "\x00") {
			// A file deleted in the work tree but not yet in the index is listed; it is gone.
			if f != "" && fileExists(filepath.Join(root, filepath.FromSlash(f))) {
				r.files = append(r.files, f)
			}
		}
	} else {
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, p)
			rel = filepath.ToSlash(rel)
			if d.IsDir() {
				if rel != "." && (strings.HasPrefix(d.Name(), ".") || rel == "bin") {
					return filepath.SkipDir
				}
				return nil
			}
			r.files = append(r.files, rel)
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	slices.Sort(r.files)
	r.files = slices.Compact(r.files)
	for _, f := range r.files {
		for p := f; p != "." && !r.set[p]; p = path.Dir(p) {
			r.set[p] = true
		}
	}
	return r, nil
}

func fileExists(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir()
}

// withSuffix returns the repository's files whose names end in suffix.
func (r *repo) withSuffix(suffix string) []string {
	var out []string
	for _, f := range r.files {
		if strings.HasSuffix(f, suffix) {
			out = append(out, f)
		}
	}
	return out
}

// read returns the text of the file at rel.
func (r *repo) read(tb testing.TB, rel string) string {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join(r.root, filepath.FromSlash(rel)))
	if err != nil {
		tb.Fatal(err)
	}
	return string(b)
}
