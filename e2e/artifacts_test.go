package e2e_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	restv1 "github.com/edgefleet/edgefleet/api/rest/v1"
	"github.com/edgefleet/edgefleet/test/builders"
)

var _ = Describe("Artifacts through the edgefleet CLI", Ordered, func() {
	var (
		file, digest string
		data         []byte
		id           string
	)
	BeforeAll(func() {
		var err error
		data, digest, err = builders.StandInPackage("node-agent", "1.0.0", "amd64", 3<<20+17, 17)
		Expect(err).NotTo(HaveOccurred())
		file = filepath.Join(GinkgoT().TempDir(), "node-agent-1.0.0.tar.gz")
		Expect(os.WriteFile(file, data, 0o600)).To(Succeed())
	})

	It("uploads a package and shows it in the list", func(ctx context.Context) {
		out, err := fleet.Edgefleet(ctx, "artifact", "upload", file, "--kind", "binary-package", "--name", "node-agent",
			"--version", "1.0.0", "--label", "edgefleet.io/component=node", "-o", "json")
		Expect(err).NotTo(HaveOccurred())
		var a restv1.Artifact
		Expect(json.Unmarshal(out, &a)).To(Succeed(), string(out))
		Expect(a.SHA256).To(Equal(digest))
		Expect(a.Size).To(Equal(int64(len(data))))
		Expect(a.Creator).To(Equal("system:serviceaccount:edgefleet-system:fleet-admin"))
		id = a.ID

		out, err = fleet.Edgefleet(ctx, "artifact", "list", "-l", "edgefleet.io/component=node")
		Expect(err).NotTo(HaveOccurred())
		rows := columns(out)
		Expect(rows).To(HaveLen(2))
		Expect(rows[0]).To(Equal([]string{"ID", "KIND", "NAME", "VERSION", "ARCH", "SIZE", "AGE"}))
		Expect(rows[1][:6]).To(Equal([]string{id, "binary-package", "node-agent", "1.0.0", "amd64", "3.0MiB"}))
	})

	It("refuses the same artifact twice, saying which exists", func(ctx context.Context) {
		_, err := fleet.Edgefleet(ctx, "artifact", "upload", file, "--kind", "binary-package", "--name", "node-agent", "--version", "1.0.0")
		Expect(err).To(MatchError(ContainSubstring("409")))
		Expect(err).To(MatchError(ContainSubstring(id)))
	})

	It("keeps artifacts across a restart of the global controller", func(ctx context.Context) {
		Expect(fleet.StopController()).To(Succeed())
		Expect(fleet.StartController(ctx, controllerArgs...)).To(Succeed())
		Eventually(func(g Gomega) {
			out, err := fleet.Edgefleet(ctx, "artifact", "get", id, "-o", "yaml")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(string(out)).To(ContainSubstring("sha256: " + digest))
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
	})

	It("downloads the content, verified", func(ctx context.Context) {
		dst := filepath.Join(GinkgoT().TempDir(), "out.tar.gz")
		out, err := fleet.Edgefleet(ctx, "artifact", "download", id, "-f", dst)
		Expect(err).NotTo(HaveOccurred())
		Expect(string(out)).To(ContainSubstring("verified"))
		got, err := os.ReadFile(dst)
		Expect(err).NotTo(HaveOccurred())
		Expect(got).To(Equal(data))
	})

	It("deletes it", func(ctx context.Context) {
		_, err := fleet.Edgefleet(ctx, "artifact", "delete", id)
		Expect(err).NotTo(HaveOccurred())
		out, err := fleet.Edgefleet(ctx, "artifact", "list")
		Expect(err).NotTo(HaveOccurred())
		Expect(strings.TrimSpace(string(out))).To(Equal("ID   KIND   NAME   VERSION   ARCH   SIZE   AGE"))
	})
})
