package testutil

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// RepoRoot finds the repository root (the directory holding go.mod) from the working directory.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("testenv: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			if _, err := os.Stat(filepath.Join(dir, "hack", "tools.sh")); err == nil {
				return dir, nil
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("testenv: not inside the edgefleet repository (no go.mod with hack/tools.sh above the working directory)")
		}
		dir = parent
	}
}
