package cmd

import (
	"context"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
	restv1 "github.com/edgefleet/edgefleet/api/rest/v1"
	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
	"github.com/edgefleet/edgefleet/pkg/artifactclient"
)

func newReleaseCmd(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:     "release",
		Aliases: []string{"releases"},
		Short:   "Releases: a Kubernetes version, an OS image, packages, charts and images, by digest; create, list, describe",
	}
	c.AddCommand(newReleaseCreateCmd(g), newObjectListCmd(g, releases, "  edgefleet release list -n fleet", nil), newReleaseDescribeCmd(g))
	return c
}

func newReleaseCreateCmd(g *globals) *cobra.Command {
	var (
		file, kubernetesVersion, osImage, arch string
		packages, charts, images               []string
		wait                                   *waitFlags
	)
	c := &cobra.Command{
		Use:   "create NAME --kubernetes-version V --os-image REF [--package REF]... [--chart REF]... [--image REF]... | create [NAME] -f FILE",
		Short: "Create a release from artifacts of the artifact store (REF: NAME@VERSION or sha256:DIGEST) or a Release manifest",
		Long: `Create a Release. Each artifact is given as NAME@VERSION, looked up in the artifact store
(--api-server) for --arch or noarch, or as sha256:DIGEST. -f reads a Release manifest (YAML or
JSON, - for stdin); flags given with it set the Kubernetes version and OS image and add artifacts.
The API server refuses a release naming a digest the artifact store lacks when the global
controller's webhook runs; otherwise the release stays not Ready until every digest is stored.
With --wait, wait until the global controller reports it Ready.`,
		Example: `  edgefleet release create edge-1.36.3 -n fleet --kubernetes-version v1.36.3 --os-image edge-os@1.0 \
    --package kubelet@1.36.3 --package containerd@1.7.24 --image pause@3.10 --chart coredns@1.12.0 --wait
  edgefleet release create -f release.yaml --wait --timeout 5m`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			rel := &fleetv1.Release{}
			if file != "" {
				if err := readRelease(file, cmd.InOrStdin(), rel); err != nil {
					return err
				}
			}
			if len(args) == 1 {
				rel.Name = args[0]
			}
			if rel.Name == "" {
				return fmt.Errorf("name the release: release create NAME, or metadata.name in -f FILE")
			}
			k, err := g.kube()
			if err != nil {
				return err
			}
			if rel.Namespace == "" || g.namespace != "" {
				rel.Namespace = k.namespace
			}
			k.namespace = rel.Namespace
			if kubernetesVersion != "" {
				rel.Spec.KubernetesVersion = kubernetesVersion
			}
			store := &artifactResolver{g: g, arch: arch}
			ctx := cmd.Context()
			if osImage != "" {
				ref, err := store.resolve(ctx, "--os-image", restv1.KindOSImage, osImage)
				if err != nil {
					return err
				}
				rel.Spec.OSImage.SHA256 = ref.SHA256
			}
			for _, list := range []struct {
				flag string
				kind restv1.ArtifactKind
				refs []string
				dst  *[]sitev1.ArtifactRef
			}{
				{"--package", restv1.KindBinaryPackage, packages, &rel.Spec.Packages},
				{"--chart", restv1.KindHelmChart, charts, &rel.Spec.Charts},
				{"--image", restv1.KindContainerImageArchive, images, &rel.Spec.Images},
			} {
				for _, s := range list.refs {
					ref, err := store.resolve(ctx, list.flag, list.kind, s)
					if err != nil {
						return err
					}
					*list.dst = append(*list.dst, ref)
				}
			}
			if err := k.Create(ctx, rel); err != nil {
				return fmt.Errorf("create release %s/%s: %w", rel.Namespace, rel.Name, err)
			}
			if !g.out.structured() {
				fmt.Fprintf(cmd.OutOrStdout(), "release %s/%s created\n", rel.Namespace, rel.Name)
			}
			if wait.wait {
				if err := waitReleaseReady(ctx, k, g.waitProgress(cmd.ErrOrStderr()), wait.timeout, rel); err != nil {
					return err
				}
			}
			_, err = g.out.data(cmd.OutOrStdout(), k.withKind(rel))
			return err
		},
	}
	f := c.Flags()
	f.StringVarP(&file, "filename", "f", "", "Release manifest to create (YAML or JSON; - reads stdin)")
	f.StringVar(&kubernetesVersion, "kubernetes-version", "", "Kubernetes version of every node, e.g. v1.36.3")
	f.StringVar(&osImage, "os-image", "", "OS image: NAME@VERSION or sha256:DIGEST")
	f.StringArrayVar(&packages, "package", nil, "Binary package: NAME@VERSION or sha256:DIGEST (repeatable)")
	f.StringArrayVar(&charts, "chart", nil, "Helm chart: NAME@VERSION or sha256:DIGEST (repeatable)")
	f.StringArrayVar(&images, "image", nil, "Container image archive: NAME@VERSION or sha256:DIGEST (repeatable)")
	f.StringVar(&arch, "arch", "amd64", "Architecture of the artifacts given as NAME@VERSION (noarch ones match any)")
	wait = addWaitFlags(c, "the release is Ready (every artifact it names is in the artifact store)", 2*time.Minute)
	return c
}

// readRelease reads a Release manifest from path ("-": stdin), refusing unknown fields.
func readRelease(path string, stdin io.Reader, rel *fleetv1.Release) error {
	var b []byte
	var err error
	if path == "-" {
		b, err = io.ReadAll(stdin)
	} else {
		b, err = os.ReadFile(path)
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	if err := yaml.UnmarshalStrict(b, rel); err != nil {
		return fmt.Errorf("%s is not a Release manifest: %w", path, err)
	}
	if gvk := rel.GroupVersionKind(); gvk.Kind != "" && gvk != fleetv1.GroupVersion.WithKind("Release") {
		return fmt.Errorf("%s holds a %s, not a %s", path, gvk, fleetv1.GroupVersion.WithKind("Release"))
	}
	return nil
}

// waitReleaseReady waits until the release is Ready, and fails at once when it never will be.
func waitReleaseReady(ctx context.Context, k *kube, p *progress, timeout time.Duration, rel *fleetv1.Release) error {
	what := fmt.Sprintf("release %s/%s to be Ready", rel.Namespace, rel.Name)
	return waitFor(ctx, p, timeout, time.Second, what, func(ctx context.Context) (bool, string, error) {
		if err := k.get(ctx, rel.Name, rel); err != nil {
			return false, "", err
		}
		return releaseReadiness(rel)
	})
}

// releaseReadiness says whether rel is Ready and what its Ready condition says; an error when it
// never will be (fleetv1.ReleaseNeverReady: its packages conflict or are invalid).
func releaseReadiness(rel *fleetv1.Release) (bool, string, error) {
	c := meta.FindStatusCondition(rel.Status.Conditions, fleetv1.ReleaseReadyCondition)
	if c == nil {
		return false, fmt.Sprintf("release %s/%s: no Ready condition yet (the global controller has not checked it)", rel.Namespace, rel.Name), nil
	}
	state := fmt.Sprintf("release %s/%s: Ready=%s %s: %s", rel.Namespace, rel.Name, c.Status, c.Reason, c.Message)
	if c.Status == metav1.ConditionFalse && fleetv1.ReleaseNeverReady(c.Reason) && c.ObservedGeneration == rel.Generation {
		return false, "", fmt.Errorf("release %s/%s will never be Ready: %s", rel.Namespace, rel.Name, c.Message)
	}
	return c.Status == metav1.ConditionTrue, state, nil
}

// digestRef is an artifact given by its digest.
var digestRef = regexp.MustCompile(`^sha256:[a-f0-9]{64}$`)

// artifactResolver turns artifacts given on the command line into a release's references,
// asking the artifact store for those given as NAME@VERSION.
type artifactResolver struct {
	g    *globals
	arch string
	// client is made on first use: artifacts given by digest need no artifact API.
	client *artifactclient.Client
}

func (r *artifactResolver) resolve(ctx context.Context, flag string, kind restv1.ArtifactKind, ref string) (sitev1.ArtifactRef, error) {
	if digestRef.MatchString(ref) {
		return sitev1.ArtifactRef{SHA256: strings.TrimPrefix(ref, "sha256:")}, nil
	}
	name, version, ok := strings.Cut(ref, "@")
	if !ok || name == "" || version == "" || strings.HasPrefix(ref, "sha256:") {
		return sitev1.ArtifactRef{}, fmt.Errorf("%s %q: give NAME@VERSION or sha256: and 64 lower-case hex digits", flag, ref)
	}
	if r.client == nil {
		cl, err := r.g.client()
		if err != nil {
			return sitev1.ArtifactRef{}, fmt.Errorf("%s %s: %w", flag, ref, err)
		}
		r.client = cl
	}
	var found *restv1.Artifact
	for cont := ""; ; {
		page, err := r.client.List(ctx, kind, name, "", 500, cont)
		if err != nil {
			return sitev1.ArtifactRef{}, fmt.Errorf("%s %s: %w", flag, ref, err)
		}
		for i, a := range page.Items {
			// The architecture asked for wins over noarch.
			if a.Version == version && (a.Architecture == r.arch || (a.Architecture == "noarch" && found == nil)) {
				found = &page.Items[i]
			}
		}
		if cont = page.Continue; cont == "" {
			break
		}
	}
	if found == nil {
		return sitev1.ArtifactRef{}, fmt.Errorf("%s %s: no %s %q version %q for %s (or noarch) in the artifact store: upload it first (edgefleet artifact upload)", flag, ref, kind, name, version, r.arch)
	}
	return sitev1.ArtifactRef{SHA256: found.SHA256, Name: fmt.Sprintf("%s %s %s", kind, name, version)}, nil
}

func newReleaseDescribeCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "describe NAME",
		Short: "Show a release as a tree: Ready or why not, its Kubernetes version, OS image, packages, images and charts",
		Long: `Show a release as a tree: Ready or why not (the digests the artifact store lacks), its
Kubernetes version, and each artifact by name and digest.
With -o json|yaml|jsonpath=..., the object the tree is drawn from: a List of the Release.`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: g.completeArg(releases),
		RunE: func(cmd *cobra.Command, args []string) error {
			k, err := g.kube()
			if err != nil {
				return err
			}
			rel := &fleetv1.Release{}
			if err := k.get(cmd.Context(), args[0], rel); err != nil {
				return err
			}
			if done, err := k.printObjects(g.out, cmd.OutOrStdout(), rel); done {
				return err
			}
			return printTree(cmd.OutOrStdout(), releaseTree(rel, g.out.wide()))
		},
	}
}

// releaseTree is the describe tree of a release.
func releaseTree(rel *fleetv1.Release, all bool) *row {
	r := readyRow("Release/"+rel.Name, rel.Status.Conditions, fleetv1.ReleaseReadyCondition)
	r.message = "Kubernetes " + rel.Spec.KubernetesVersion
	r.add(conditionRows(rel.Status.Conditions, all, fleetv1.ReleaseReadyCondition)...)
	img := &row{name: "OSImage", message: "sha256:" + rel.Spec.OSImage.SHA256, severity: fine}
	if u := rel.Spec.OSImage.URL; u != "" {
		img.message += " from " + u
	}
	if f := rel.Spec.OSImage.Format; f != "" {
		img.message += " (" + f + ")"
	}
	r.add(img)
	for _, list := range []struct {
		name string
		refs []sitev1.ArtifactRef
	}{{"Packages", rel.Spec.Packages}, {"Images", rel.Spec.Images}, {"Charts", rel.Spec.Charts}} {
		group := &row{name: list.name, status: fmt.Sprint(len(list.refs)), severity: fine}
		for _, a := range list.refs {
			name := a.Name
			if name == "" {
				name = "sha256:" + a.SHA256[:12]
			}
			group.add(&row{name: name, message: "sha256:" + a.SHA256, severity: fine})
		}
		r.add(group)
	}
	return r
}
