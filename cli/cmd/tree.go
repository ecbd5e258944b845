package cmd

import (
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
)

// severity orders a describe tree's rows: problems first.
type severity int

const (
	// problem: a condition that is False, something failed or is not ready.
	problem severity = iota
	// unknown: a condition that is Unknown, a state not reported.
	unknown
	// fine is everything else.
	fine
)

// row is one line of a describe tree, as in clusterctl describe: an object, a group or a
// condition, with a status word, since when, and what to say.
type row struct {
	name, status, message string
	since                 *metav1.Time
	severity              severity
	children              []*row
}

// add appends children and returns r.
func (r *row) add(children ...*row) *row {
	r.children = append(r.children, children...)
	return r
}

// worst is the severity of r's subtree.
func (r *row) worst() severity {
	s := r.severity
	for _, c := range r.children {
		s = min(s, c.worst())
	}
	return s
}

// printTree writes the tree under NAME STATUS SINCE MESSAGE; among siblings, the subtrees with
// problems come first, then those with unknowns, each group in the order it was built.
func printTree(w io.Writer, root *row) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSTATUS\tSINCE\tMESSAGE")
	var draw func(r *row, lead, indent string)
	draw = func(r *row, lead, indent string) {
		since := ""
		if r.since != nil {
			since = duration.HumanDuration(time.Since(r.since.Time))
		}
		fmt.Fprintf(tw, "%s%s\t%s\t%s\t%s\n", lead, r.name, r.status, since, r.message)
		children := slices.Clone(r.children)
		slices.SortStableFunc(children, func(a, b *row) int { return int(a.worst()) - int(b.worst()) })
		for i, c := range children {
			if i == len(children)-1 {
				draw(c, indent+"└─", indent+"  ")
			} else {
				draw(c, indent+"├─", indent+"│ ")
			}
		}
	}
	draw(root, "", "")
	return tw.Flush()
}

// conditionRows are rows of the conditions of types, in that order: those not True, or all
// of them when all is set.
func conditionRows(conds []metav1.Condition, all bool, types ...string) []*row {
	var rows []*row
	for _, t := range types {
		c := meta.FindStatusCondition(conds, t)
		if c == nil || (c.Status == metav1.ConditionTrue && !all) {
			continue
		}
		r := &row{name: c.Type, status: string(c.Status), since: &c.LastTransitionTime, message: c.Reason, severity: fine}
		if c.Message != "" {
			r.message += ": " + c.Message
		}
		switch c.Status {
		case metav1.ConditionFalse:
			r.severity = problem
		case metav1.ConditionUnknown:
			r.severity = unknown
		}
		rows = append(rows, r)
	}
	return rows
}

// readyRow is the line of an object summed up by its Ready condition: Ready, NotReady, or
// NotChecked while no controller has set it.
func readyRow(name string, conds []metav1.Condition, readyType string) *row {
	c := meta.FindStatusCondition(conds, readyType)
	switch {
	case c == nil:
		return &row{name: name, status: "NotChecked", severity: unknown}
	case c.Status == metav1.ConditionTrue:
		return &row{name: name, status: "Ready", since: &c.LastTransitionTime, severity: fine}
	case c.Status == metav1.ConditionUnknown:
		return &row{name: name, status: "Unknown", since: &c.LastTransitionTime, severity: unknown}
	}
	return &row{name: name, status: "NotReady", since: &c.LastTransitionTime, severity: problem}
}
