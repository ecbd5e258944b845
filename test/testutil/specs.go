package testutil

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/onsi/ginkgo/v2"
)

// SpecReportDirEnv names the directory where RunSpecs writes each suite's ginkgo JSON report;
// `make test` sets it, and hack/testreport lists the slow specs from the reports.
const SpecReportDirEnv = "EDGEFLEET_SPEC_REPORT_DIR"

// RunSpecs runs the package's ginkgo suite. With SpecReportDirEnv set it writes the suite's
// JSON report there, named after the package's directory (e2e/realhosts:
// e2e-realhosts.ginkgo.json).
func RunSpecs(t *testing.T, description string) bool {
	t.Helper()
	suite, reporter := ginkgo.GinkgoConfiguration()
	if dir := os.Getenv(SpecReportDirEnv); dir != "" {
		root, err := RepoRoot()
		if err != nil {
			t.Fatal(err)
		}
		wd, err := os.Getwd()
		if err != nil {
			t.Fatal(err)
		}
		rel, err := filepath.Rel(root, wd)
		if err != nil {
			t.Fatal(err)
		}
		reporter.JSONReport = filepath.Join(dir, strings.ReplaceAll(rel, string(filepath.Separator), "-")+".ginkgo.json")
	}
	return ginkgo.RunSpecs(t, description, suite, reporter)
}
