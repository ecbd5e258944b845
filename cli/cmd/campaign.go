package cmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
)

// campaignGlobals are the flags of the campaign commands.
type campaignGlobals struct {
	*globals
	namespace string
}

func newCampaignCmd(g *globals) *cobra.Command {
	cg := &campaignGlobals{globals: g}
	c := &cobra.Command{
		Use:     "campaign",
		Aliases: []string{"campaigns"},
		Short:   "Roll releases out to sites: create, plan, pause, resume, abort and watch campaigns",
	}
	c.PersistentFlags().StringVarP(&cg.namespace, "namespace", "n", "", "Namespace of the campaign and its sites (default: the kubeconfig context's)")
	c.AddCommand(newCampaignCreateCmd(cg), newCampaignPlanCmd(cg), newCampaignWatchCmd(cg),
		newCampaignSetCmd(cg, "pause", "Stop dispatching new sites (sites in flight finish)", `{"spec":{"paused":true}}`),
		newCampaignSetCmd(cg, "resume", "Dispatch again after a pause", `{"spec":{"paused":false}}`),
		newCampaignSetCmd(cg, "abort", "Stop the campaign for good (sites in flight finish; cannot be undone)", `{"spec":{"abort":true}}`))
	return c
}

// kube returns a client of the global cluster and the namespace to work in.
func (cg *campaignGlobals) kube() (client.Client, string, error) {
	loader := cg.kubeconfigLoader()
	cfg, err := loader.ClientConfig()
	if err != nil {
		return nil, "", fmt.Errorf("load kubeconfig: %w", err)
	}
	ns := cg.namespace
	if ns == "" {
		if ns, _, err = loader.Namespace(); err != nil {
			return nil, "", fmt.Errorf("namespace of the kubeconfig context: %w", err)
		}
	}
	s := runtime.NewScheme()
	if err := fleetv1.AddToScheme(s); err != nil {
		return nil, "", err
	}
	c, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		return nil, "", fmt.Errorf("client of %s: %w", cfg.Host, err)
	}
	return c, ns, nil
}

func newCampaignCreateCmd(cg *campaignGlobals) *cobra.Command {
	var (
		action, release, selector, canaries, maxConc, initial, maxFailures string
		sites, exclude, blockedBy, windows                                 []string
		ramp, minFinished                                                  int32
		timeout, soak                                                      time.Duration
		preCache, rollback, dryRun, paused                                 bool
	)
	c := &cobra.Command{
		Use:   "create NAME --action ACTION --release RELEASE (--selector SELECTOR | --sites A,B)",
		Short: "Create a campaign (with --dry-run: only its plan, see 'campaign plan')",
		Example: `  edgefleet campaign create patch-11 --action patch --release edge-1.36.3-p1 --selector region=eu-west \
    --canaries 1% --initial-concurrency 2% --max-concurrency 20% --ramp 2 --max-failures 2% --min-finished 20 \
    --site-timeout 2h --window "0 2 * * 6/4h" --pre-cache --rollback --dry-run`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			kc, ns, err := cg.kube()
			if err != nil {
				return err
			}
			camp := &fleetv1.Campaign{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: args[0]},
				Spec: fleetv1.CampaignSpec{
					Action: fleetv1.OperationAction(action), Release: release,
					Targets:   fleetv1.CampaignTargets{Names: sites, Exclude: exclude},
					BlockedBy: blockedBy, Paused: paused, DryRun: dryRun,
					Strategy: fleetv1.CampaignStrategy{
						RampFactor: ramp, PreCache: preCache, RollbackOnFailure: rollback,
						SiteTimeout: &metav1.Duration{Duration: timeout},
					},
				},
			}
			st := &camp.Spec.Strategy
			if soak > 0 {
				st.Soak = &metav1.Duration{Duration: soak}
			}
			if selector != "" {
				sel, err := metav1.ParseToLabelSelector(selector)
				if err != nil {
					return fmt.Errorf("--selector: %w", err)
				}
				camp.Spec.Targets.Selector = sel
			}
			for _, f := range []struct {
				value string
				dst   **intstr.IntOrString
			}{{canaries, &st.Canaries}, {maxConc, &st.MaxConcurrency}, {initial, &st.InitialConcurrency}} {
				if f.value != "" {
					x := intstr.Parse(f.value)
					*f.dst = &x
				}
			}
			if maxFailures != "" {
				st.FailureBudget = &fleetv1.FailureBudget{MaxFailures: intstr.Parse(maxFailures), MinFinished: minFinished}
			}
			for _, w := range windows {
				i := strings.LastIndexByte(w, '/')
				if i < 0 {
					return fmt.Errorf("--window must be \"CRON/DURATION\", e.g. \"0 2 * * 6/4h\", got %q", w)
				}
				sched, dur := w[:i], w[i+1:]
				d, err := time.ParseDuration(dur)
				if err != nil {
					return fmt.Errorf("--window must be \"CRON/DURATION\", e.g. \"0 2 * * 6/4h\", got %q", w)
				}
				st.MaintenanceWindows = append(st.MaintenanceWindows, fleetv1.MaintenanceWindow{Schedule: sched, Duration: metav1.Duration{Duration: d}})
			}
			if err := kc.Create(cmd.Context(), camp); err != nil {
				return fmt.Errorf("create campaign %s/%s: %w", ns, args[0], err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "campaign %s/%s created\n", ns, args[0])
			return nil
		},
	}
	f := c.Flags()
	f.StringVar(&action, "action", "", "install, patch or upgrade")
	f.StringVar(&release, "release", "", "Release the sites go to")
	f.StringVar(&selector, "selector", "", "Label selector of the target sites, e.g. region=eu-west,tier!=lab")
	f.StringSliceVar(&sites, "sites", nil, "Target sites by name, dispatched first and in this order")
	f.StringSliceVar(&exclude, "exclude", nil, "Sites never dispatched")
	f.StringVar(&canaries, "canaries", "", "Canary sites, a count or a percentage (\"1%\"); the rest waits for all of them to succeed")
	f.StringVar(&maxConc, "max-concurrency", "", "Most sites in flight at once, count or percentage (default 10)")
	f.StringVar(&initial, "initial-concurrency", "", "Window of the first wave after the canaries (default: --max-concurrency)")
	f.Int32Var(&ramp, "ramp", 0, "Factor the window grows by after each wave that succeeded (default 1: none)")
	f.StringVar(&maxFailures, "max-failures", "", "Failure budget: failed sites (count, or percentage of finished sites) above which nothing new is dispatched (default 0: the first failed or timed-out site stops the campaign)")
	f.Int32Var(&minFinished, "min-finished", 0, "Finished sites needed before the failure budget can trip (default 1)")
	f.DurationVar(&timeout, "site-timeout", 2*time.Hour, "Time a site has to finish")
	f.DurationVar(&soak, "soak", 0, "Time a site must stay succeeded before it counts")
	f.StringArrayVar(&windows, "window", nil, "Maintenance window \"CRON/DURATION\" (UTC), repeatable; sites' own windows apply too")
	f.BoolVar(&preCache, "pre-cache", false, "Cache the release's artifacts at every target before the first dispatch")
	f.BoolVar(&rollback, "rollback", false, "Patch failed sites back to their previous release")
	f.StringSliceVar(&blockedBy, "blocked-by", nil, "Campaigns that must succeed first")
	f.BoolVar(&dryRun, "dry-run", false, "Only write the wave plan (see 'campaign plan'); touch no site")
	f.BoolVar(&paused, "paused", false, "Create the campaign paused")
	for _, req := range []string{"action", "release"} {
		_ = c.MarkFlagRequired(req)
	}
	return c
}

func newCampaignSetCmd(cg *campaignGlobals, verb, short, patch string) *cobra.Command {
	return &cobra.Command{
		Use:   verb + " NAME",
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			kc, ns, err := cg.kube()
			if err != nil {
				return err
			}
			camp := &fleetv1.Campaign{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: args[0]}}
			if err := kc.Patch(cmd.Context(), camp, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
				return fmt.Errorf("%s campaign %s/%s: %w", verb, ns, args[0], err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "campaign %s/%s: %s requested\n", ns, args[0], verb)
			return nil
		},
	}
}

func newCampaignPlanCmd(cg *campaignGlobals) *cobra.Command {
	var wait time.Duration
	c := &cobra.Command{
		Use:   "plan NAME",
		Short: "Print the waves of a dry-run campaign (create it with --dry-run)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			kc, ns, err := cg.kube()
			if err != nil {
				return err
			}
			var camp *fleetv1.Campaign
			err = poll(cmd.Context(), wait, func() (bool, error) {
				camp = &fleetv1.Campaign{}
				if err := kc.Get(cmd.Context(), types.NamespacedName{Namespace: ns, Name: args[0]}, camp); err != nil {
					return false, fmt.Errorf("get campaign %s/%s: %w", ns, args[0], err)
				}
				if !camp.Spec.DryRun {
					return false, fmt.Errorf("campaign %s/%s is not a dry run: only a dry run has a plan (create one with --dry-run)", ns, args[0])
				}
				return camp.Status.Plan != nil, nil
			})
			if err != nil {
				return err
			}
			return cg.printPlan(cmd.OutOrStdout(), camp)
		},
	}
	c.Flags().DurationVar(&wait, "wait", 30*time.Second, "How long to wait for the controller to write the plan")
	return c
}

func (cg *campaignGlobals) printPlan(w io.Writer, camp *fleetv1.Campaign) error {
	if done, err := cg.printStructured(w, camp.Status.Plan); done {
		return err
	}
	p := camp.Status.Plan
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	fmt.Fprintln(tw, "WAVE\tSIZE\tWINDOW\tSITES")
	for _, wave := range p.Waves {
		name := fmt.Sprint(wave.Index)
		if wave.Canary {
			name += " (canaries)"
		}
		sites := strings.Join(wave.Sites, ",")
		if int32(len(wave.Sites)) < wave.Size {
			sites += fmt.Sprintf(",… (%d more)", wave.Size-int32(len(wave.Sites)))
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\n", name, wave.Size, wave.Window, sites)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(p.Skipped) > 0 {
		fmt.Fprintf(w, "\nskipped (%d):\n", camp.Status.Counts.Skipped)
		for _, s := range p.Skipped {
			fmt.Fprintf(w, "  %s: %s\n", s.Name, s.Reason)
		}
	}
	return nil
}

// printStructured prints v as JSON or YAML when asked to, and reports whether it did.
func (cg *campaignGlobals) printStructured(w io.Writer, v any) (bool, error) {
	switch cg.output {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return true, enc.Encode(v)
	case "yaml":
		b, err := yaml.Marshal(v)
		if err != nil {
			return true, err
		}
		_, err = w.Write(b)
		return true, err
	}
	return false, nil
}

func newCampaignWatchCmd(cg *campaignGlobals) *cobra.Command {
	var interval time.Duration
	c := &cobra.Command{
		Use:   "watch NAME",
		Short: "Show a campaign's progress per state until it finishes (exit 1 if it failed or was aborted)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			kc, ns, err := cg.kube()
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			redraw := isTerminal(out) && !cg.quiet
			lines, last := 0, ""
			var camp *fleetv1.Campaign
			err = poll(cmd.Context(), 0, func() (bool, error) {
				camp = &fleetv1.Campaign{}
				if err := kc.Get(cmd.Context(), types.NamespacedName{Namespace: ns, Name: args[0]}, camp); err != nil {
					return false, fmt.Errorf("get campaign %s/%s: %w", ns, args[0], err)
				}
				frame := progressFrame(camp)
				switch {
				case redraw:
					if lines > 0 {
						fmt.Fprintf(out, "\033[%dA\033[J", lines)
					}
					fmt.Fprint(out, frame)
					lines = strings.Count(frame, "\n")
				case frame != last:
					fmt.Fprint(out, frame)
				}
				last = frame
				return camp.Status.Phase.Final(), nil
			}, interval)
			if err != nil {
				return err
			}
			if camp.Status.Phase != fleetv1.CampaignSucceeded {
				return fmt.Errorf("campaign %s/%s %s", ns, args[0], strings.ToLower(string(camp.Status.Phase)))
			}
			return nil
		},
	}
	c.Flags().DurationVar(&interval, "interval", time.Second, "How often the campaign is read")
	return c
}

// progressFrame draws one bar per state, with the phase, wave and window.
func progressFrame(c *fleetv1.Campaign) string {
	s := c.Status
	var b strings.Builder
	fmt.Fprintf(&b, "%s  %s → %s  phase %s  wave %d/%d  window %d  done %s\n", c.Name, c.Spec.Action, c.Spec.Release, orDash(string(s.Phase)), s.CurrentWave, s.Waves, s.Window, orDash(s.Progress))
	total := max(s.Total, 1)
	for _, row := range []struct {
		name string
		n    int32
	}{
		{"pending", s.Counts.Pending}, {"pre-caching", s.Counts.PreCaching}, {"in progress", s.Counts.InProgress},
		{"succeeded", s.Counts.Succeeded}, {"failed", s.Counts.Failed}, {"timed out", s.Counts.TimedOut}, {"skipped", s.Counts.Skipped},
	} {
		const width = 40
		filled := int(int64(row.n) * width / int64(total))
		fmt.Fprintf(&b, "  %-12s [%s%s] %d/%d\n", row.name, strings.Repeat("#", filled), strings.Repeat(".", width-filled), row.n, s.Total)
	}
	for _, cond := range s.Conditions {
		if cond.Type == fleetv1.CampaignProgressingCondition {
			fmt.Fprintf(&b, "  %s: %s\n", cond.Reason, cond.Message)
		}
	}
	return b.String()
}

// poll calls check every interval (default 1s) until it is done or fails; timeout 0 means no
// limit but ctx.
func poll(ctx context.Context, timeout time.Duration, check func() (bool, error), interval ...time.Duration) error {
	every := time.Second
	if len(interval) > 0 && interval[0] > 0 {
		every = interval[0]
	}
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	for {
		done, err := check()
		if err != nil || done {
			return err
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return fmt.Errorf("gave up after %s", timeout)
			}
			return ctx.Err()
		case <-time.After(every):
		}
	}
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
