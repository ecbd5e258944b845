// Package edgefleet_test holds checks of the repository as a whole.
package edgefleet_test

import (
	"bufio"
	"os"
	"regexp"
	"strings"
	"testing"
)

// layoutRow is a row of README's layout table: | `folder/` | what it is |.
var layoutRow = regexp.MustCompile("^\\| `([^`/]+)/` \\|")

// TestReadmeLayoutNamesEveryFolder checks that README.md's layout table has a row for each
// top-level folder of the repository and none for a folder that is gone: the README is the
// front door, and a folder it does not name is one a newcomer has to guess at.
func TestReadmeLayoutNamesEveryFolder(t *testing.T) {
	f, err := os.Open("README.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	named := map[string]bool{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		if m := layoutRow.FindStringSubmatch(sc.Text()); m != nil {
			named[m[1]] = true
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(named) == 0 {
		t.Fatal("README.md has no layout table (rows | `folder/` | what it is |)")
	}
	ignored, err := ignoredFolders()
	if err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	exists := map[string]bool{}
	for _, e := range entries {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") || ignored[e.Name()] {
			continue
		}
		exists[e.Name()] = true
		if !named[e.Name()] {
			t.Errorf("README.md's layout table has no row for folder %s/: add one saying what it holds", e.Name())
		}
	}
	for name := range named {
		if !exists[name] {
			t.Errorf("README.md's layout table names %s/, which the repository does not have", name)
		}
	}
}

// ignoredFolders lists the top-level folders .gitignore leaves out (build output, such as bin/).
func ignoredFolders() (map[string]bool, error) {
	data, err := os.ReadFile(".gitignore")
	if err != nil {
		return nil, err
	}
	ignored := map[string]bool{}
	for _, l := range strings.Split(string(data), "\n") {
		if name, ok := strings.CutPrefix(strings.TrimSpace(l), "/"); ok {
			name = strings.TrimSuffix(name, "/")
			if name != "" && !strings.ContainsAny(name, "/*") {
				ignored[name] = true
			}
		}
	}
	return ignored, nil
}
