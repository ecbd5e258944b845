package charts

import (
	"bytes"
	"fmt"

	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"k8s.io/apimachinery/pkg/util/validation"
)

// NamespaceAnnotation, in a chart's Chart.yaml annotations, names the namespace the BPA
// installs the chart's release into; without it the release goes to a namespace named after
// the chart.
const NamespaceAnnotation = "edgefleet.io/namespace"

// Metadata is what the BPA needs of a chart archive to install it.
type Metadata struct {
	// Name and Version of the chart; the release is named after the chart.
	Name, Version string
	// Namespace of the release (NamespaceAnnotation, else Name).
	Namespace string
}

// Describe reads a chart archive's metadata.
func Describe(archive []byte) (Metadata, error) {
	ch, err := loader.LoadArchive(bytes.NewReader(archive))
	if err != nil {
		return Metadata{}, fmt.Errorf("not a chart archive: %w", err)
	}
	m := Metadata{Name: ch.Metadata.Name, Version: ch.Metadata.Version, Namespace: ch.Metadata.Annotations[NamespaceAnnotation]}
	if m.Namespace == "" {
		m.Namespace = m.Name
	}
	if msgs := validation.IsDNS1123Label(m.Namespace); len(msgs) > 0 {
		return Metadata{}, fmt.Errorf("chart %s %s: namespace %q (annotation %s): %s", m.Name, m.Version, m.Namespace, NamespaceAnnotation, msgs[0])
	}
	return m, nil
}
