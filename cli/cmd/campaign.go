package cmd

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
)

func newCampaignCmd(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:     "campaign",
		Aliases: []string{"campaigns"},
		Short:   "Roll releases out to sites: create, plan, pause, resume, abort and watch campaigns",
	}
	c.AddCommand(newCampaignCreateCmd(g), newCampaignPlanCmd(g), newCampaignWatchCmd(g),
		newCampaignSetCmd(g, "pause", "Stop dispatching new sites (sites in flight finish)", `{"spec":{"paused":true}}`,
			"is paused already", "the controller took the pause in", false),
		newCampaignSetCmd(g, "resume", "Dispatch again after a pause", `{"spec":{"paused":false}}`,
			"is not paused", "the controller took the resume in", false),
		newCampaignSetCmd(g, "abort", "Stop the campaign for good (sites in flight finish; cannot be undone)", `{"spec":{"abort":true}}`,
			"is being aborted already", "the campaign ended (sites in flight finish first)", true))
	return c
}

func newCampaignCreateCmd(g *globals) *cobra.Command {
	var (
		action, release, selector, canaries, maxConc, initial, maxFailures string
		targets, exclude, blockedBy, windows                               []string
		ramp, minFinished                                                  int32
		timeout, soak                                                      time.Duration
		preCache, rollback, dryRun, paused                                 bool
		wait                                                               *waitFlags
	)
	c := &cobra.Command{
		Use:   "create NAME --action ACTION --release RELEASE (--selector SELECTOR | --sites A,B)",
		Short: "Create a campaign (with --dry-run: only its plan, see 'campaign plan')",
		Example: `  edgefleet campaign create patch-11 --action patch --release edge-1.36.3-p1 --selector region=eu-west \
    --canaries 1% --initial-concurrency 2% --max-concurrency 20% --ramp 2 --max-failures 2% --min-finished 20 \
    --site-timeout 2h --window "0 2 * * 6/4h" --pre-cache --rollback --dry-run`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			k, err := g.kube()
			if err != nil {
				return err
			}
			ns := k.namespace
			camp := &fleetv1.Campaign{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: args[0]},
				Spec: fleetv1.CampaignSpec{
					Action: fleetv1.OperationAction(action), Release: release,
					Targets:   fleetv1.CampaignTargets{Names: targets, Exclude: exclude},
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
			if err := k.Create(cmd.Context(), camp); err != nil {
				return fmt.Errorf("create campaign %s/%s: %w", ns, args[0], err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "campaign %s/%s created\n", ns, args[0])
			switch {
			case !wait.wait:
				return nil
			case dryRun:
				camp, err := waitPlan(cmd.Context(), k, wait.timeout, args[0])
				if err != nil {
					return err
				}
				return printPlan(g.out, cmd.OutOrStdout(), camp)
			}
			camp, err = waitCampaign(cmd.Context(), k, g.waitProgress(cmd.ErrOrStderr()), wait.timeout, time.Second, args[0], campaignFinal)
			if err != nil {
				return err
			}
			return succeeded(camp)
		},
	}
	f := c.Flags()
	f.StringVar(&action, "action", "", "install, patch or upgrade")
	f.StringVar(&release, "release", "", "Release the sites go to")
	f.StringVar(&selector, "selector", "", "Label selector of the target sites, e.g. region=eu-west,tier!=lab")
	f.StringSliceVar(&targets, "sites", nil, "Target sites by name, dispatched first and in this order")
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
	wait = addWaitFlags(c, "the campaign ends (a dry run: until its plan is written, then print it)", 0)
	_ = c.RegisterFlagCompletionFunc("action", cobra.FixedCompletions([]cobra.Completion{string(fleetv1.ActionInstall), string(fleetv1.ActionPatch), string(fleetv1.ActionUpgrade)}, cobra.ShellCompDirectiveNoFileComp))
	_ = c.RegisterFlagCompletionFunc("release", g.completeNames(releases))
	for _, flag := range []string{"sites", "exclude"} {
		_ = c.RegisterFlagCompletionFunc(flag, g.completeNames(sites))
	}
	_ = c.RegisterFlagCompletionFunc("blocked-by", g.completeNames(campaigns))
	return c
}

// newCampaignSetCmd is a verb that patches a campaign's spec; with --wait it waits until the
// controller reconciled the change (untilFinal: until the campaign ended). A campaign that
// ended is refused (the verb would change nothing); a patch that changes nothing says so
// (already: what the campaign is then), rather than "requested".
func newCampaignSetCmd(g *globals, verb, short, patch, already, until string, untilFinal bool) *cobra.Command {
	var wait *waitFlags
	c := &cobra.Command{
		Use:               verb + " NAME",
		Short:             short,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: g.completeArg(campaigns),
		RunE: func(cmd *cobra.Command, args []string) error {
			k, err := g.kube()
			if err != nil {
				return err
			}
			before := &fleetv1.Campaign{}
			if err := k.get(cmd.Context(), args[0], before); err != nil {
				return err
			}
			if before.Status.Phase.Final() {
				return fmt.Errorf("campaign %s/%s ended (phase %s): nothing to %s", k.namespace, args[0], before.Status.Phase, verb)
			}
			camp := &fleetv1.Campaign{ObjectMeta: metav1.ObjectMeta{Namespace: k.namespace, Name: args[0]}}
			if err := k.Patch(cmd.Context(), camp, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
				if apierrors.IsNotFound(err) {
					return fmt.Errorf("campaign %q not found in namespace %q", args[0], k.namespace)
				}
				return fmt.Errorf("%s campaign %s/%s: %w", verb, k.namespace, args[0], err)
			}
			if camp.Generation == before.Generation {
				fmt.Fprintf(cmd.OutOrStdout(), "campaign %s/%s %s: nothing changed\n", k.namespace, args[0], already)
			} else {
				fmt.Fprintf(cmd.OutOrStdout(), "campaign %s/%s: %s requested\n", k.namespace, args[0], verb)
			}
			if !wait.wait {
				return nil
			}
			// The patch answered the generation that carries the change. A campaign that ended
			// is not reconciled any more: it is done whatever was asked.
			generation := camp.Generation
			_, err = waitCampaign(cmd.Context(), k, g.waitProgress(cmd.ErrOrStderr()), wait.timeout, time.Second, args[0], func(c *fleetv1.Campaign) (bool, error) {
				final := c.Status.Phase.Final()
				return final || (!untilFinal && c.Status.ObservedGeneration >= generation), nil
			})
			return err
		},
	}
	wait = addWaitFlags(c, until, 0)
	return c
}

// campaignFinal is done once the campaign reached a final phase.
func campaignFinal(c *fleetv1.Campaign) (bool, error) { return c.Status.Phase.Final(), nil }

// succeeded fails unless the campaign succeeded.
func succeeded(c *fleetv1.Campaign) error {
	if c.Status.Phase != fleetv1.CampaignSucceeded {
		return fmt.Errorf("campaign %s/%s %s", c.Namespace, c.Name, strings.ToLower(string(c.Status.Phase)))
	}
	return nil
}

// waitCampaign shows the campaign's progress until done says it is done; it returns the
// campaign as last read.
func waitCampaign(ctx context.Context, k *kube, p *progress, timeout, interval time.Duration, name string, done func(*fleetv1.Campaign) (bool, error)) (*fleetv1.Campaign, error) {
	camp := &fleetv1.Campaign{}
	err := waitFor(ctx, p, timeout, interval, fmt.Sprintf("campaign %s/%s", k.namespace, name), func(ctx context.Context) (bool, string, error) {
		if err := k.get(ctx, name, camp); err != nil {
			return false, "", err
		}
		ok, err := done(camp)
		return ok, progressFrame(camp), err
	})
	return camp, err
}

func newCampaignPlanCmd(g *globals) *cobra.Command {
	var timeout time.Duration
	c := &cobra.Command{
		Use:               "plan NAME",
		Short:             "Print the waves of a dry-run campaign (create it with --dry-run)",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: g.completeArg(campaigns),
		RunE: func(cmd *cobra.Command, args []string) error {
			k, err := g.kube()
			if err != nil {
				return err
			}
			camp, err := waitPlan(cmd.Context(), k, timeout, args[0])
			if err != nil {
				return err
			}
			return printPlan(g.out, cmd.OutOrStdout(), camp)
		},
	}
	c.Flags().DurationVar(&timeout, "timeout", 30*time.Second, "How long to wait for the controller to write the plan")
	return c
}

// waitPlan waits until the controller wrote a dry run's plan.
func waitPlan(ctx context.Context, k *kube, timeout time.Duration, name string) (*fleetv1.Campaign, error) {
	return waitCampaign(ctx, k, &progress{w: io.Discard}, timeout, time.Second, name, func(c *fleetv1.Campaign) (bool, error) {
		if !c.Spec.DryRun {
			return false, fmt.Errorf("campaign %s/%s is not a dry run: only a dry run has a plan (create one with --dry-run)", c.Namespace, c.Name)
		}
		return c.Status.Plan != nil, nil
	})
}

func printPlan(out printer, w io.Writer, camp *fleetv1.Campaign) error {
	if done, err := out.data(w, camp.Status.Plan); done {
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
	if len(p.Steps) > 0 {
		fmt.Fprintln(w, "\nmoved through a release of each Kubernetes minor version between (one minor version per step):")
		for _, s := range p.Steps {
			fmt.Fprintf(w, "  %s: %s\n", s.Name, strings.Join(s.Releases, " → "))
		}
	}
	if len(p.Skipped) > 0 {
		fmt.Fprintf(w, "\nskipped (%d):\n", camp.Status.Counts.Skipped)
		for _, s := range p.Skipped {
			fmt.Fprintf(w, "  %s: %s\n", s.Name, s.Reason)
		}
	}
	return nil
}

func newCampaignWatchCmd(g *globals) *cobra.Command {
	var interval time.Duration
	c := &cobra.Command{
		Use:               "watch NAME",
		Short:             "Show a campaign's progress per state until it finishes (exit 1 if it failed or was aborted)",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: g.completeArg(campaigns),
		RunE: func(cmd *cobra.Command, args []string) error {
			k, err := g.kube()
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			camp, err := waitCampaign(cmd.Context(), k, &progress{w: out, redraw: isTerminal(out) && !g.quiet}, 0, interval, args[0], campaignFinal)
			if err != nil {
				return err
			}
			return succeeded(camp)
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

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
