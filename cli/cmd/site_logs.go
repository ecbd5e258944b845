package cmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	restv1 "github.com/edgefleet/edgefleet/api/rest/v1"
	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
	"github.com/edgefleet/edgefleet/pkg/logline"
)

// Timing of `site logs`: each request is bounded (the global controller waits 15 s for the
// site by default); a follower asks again every siteLogFollowTime.
const (
	siteLogTimeout    = time.Minute
	siteLogFollowTime = 3 * time.Second
)

// siteLogFlags are the verb's flags.
type siteLogFlags struct {
	component string
	tail      int
	since     time.Duration
	follow    bool
}

func newSiteLogsCmd(g *globals) *cobra.Command {
	f := siteLogFlags{}
	c := &cobra.Command{
		Use:     "logs SITE",
		Aliases: []string{"log"},
		Short:   "Show the recent log lines of a site's local controller or BPA",
		Long: `Show the recent log lines a component of SITE keeps in memory: its local controller (the
default) or its BPA. The global controller checks that you may (get sites/log on the Site) and
asks the component through the site's API server. Lines older than the component keeps, or
from before it restarted, are gone (the answer names the process: a new one means a restart).
With --follow it asks again every few seconds and prints only new lines until interrupted.
Lines are rendered as time, level, logger, message, key=value pairs; -o json prints the
answers as the endpoint gives them (one JSON object per answer).`,
		Example:           "  edgefleet site logs site-a -n fleet\n  edgefleet site logs site-a --component bpa --since 10m -f\n  edgefleet site logs site-a --tail 50 -o json",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: g.completeArg(sites),
		RunE: func(cmd *cobra.Command, args []string) error {
			q, err := f.query()
			if err != nil {
				return err
			}
			if g.out.structured() && g.out.format != "json" {
				return fmt.Errorf("--output %s: site logs prints json or the rendered lines", g.output)
			}
			api, ns, err := g.siteAPI()
			if err != nil {
				return err
			}
			return siteLogs(cmd.Context(), api, ns, args[0], q, f.follow, g.out.format == "json", cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	c.Flags().StringVar(&f.component, "component", sitev1.LogComponentLocalController, "Component whose lines to show: local-controller or bpa")
	c.Flags().IntVar(&f.tail, "tail", 200, fmt.Sprintf("Newest lines to show, 1 to %d", sitev1.MaxLogLines))
	c.Flags().DurationVar(&f.since, "since", 0, "Only lines of this last while, e.g. 10m (default: any the component keeps)")
	c.Flags().BoolVarP(&f.follow, "follow", "f", false, "Keep asking every few seconds and print new lines, until interrupted")
	_ = c.RegisterFlagCompletionFunc("component", cobra.FixedCompletions([]cobra.Completion{sitev1.LogComponentLocalController, sitev1.LogComponentBPA}, cobra.ShellCompDirectiveNoFileComp))
	return c
}

// query checks the flags before anything is asked and returns the first request's parameters.
func (f siteLogFlags) query() (url.Values, error) {
	if f.component != sitev1.LogComponentLocalController && f.component != sitev1.LogComponentBPA {
		return nil, fmt.Errorf("--component %q: must be %s or %s", f.component, sitev1.LogComponentLocalController, sitev1.LogComponentBPA)
	}
	if f.tail < 1 || f.tail > sitev1.MaxLogLines {
		return nil, fmt.Errorf("--tail %d: must be from 1 to %d", f.tail, sitev1.MaxLogLines)
	}
	if f.since < 0 || (f.since > 0 && f.since < time.Second) {
		return nil, fmt.Errorf("--since %s: must be at least 1s", f.since)
	}
	q := url.Values{"component": {f.component}, "tailLines": {strconv.Itoa(f.tail)}}
	if f.since > 0 {
		q.Set("sinceSeconds", strconv.FormatInt(int64(f.since.Round(time.Second)/time.Second), 10))
	}
	return q, nil
}

// siteLogAPI is the part of the artifact API client the verb uses.
type siteLogAPI interface {
	SiteLog(ctx context.Context, ns, site string, q url.Values) (restv1.SiteLog, error)
}

// siteLogs prints the answer to q and, following, the lines logged after the newest printed,
// every siteLogFollowTime until ctx ends (answers without new lines print nothing). A follower's
// failed request is told on errOut and asked again. When the first answer has no line with a
// time, the follower starts from this machine's clock.
func siteLogs(ctx context.Context, api siteLogAPI, ns, site string, q url.Values, follow, asJSON bool, out, errOut io.Writer) error {
	ask := func(q url.Values) (restv1.SiteLog, error) {
		rctx, cancel := context.WithTimeout(ctx, siteLogTimeout)
		defer cancel()
		return api.SiteLog(rctx, ns, site, q)
	}
	asked := time.Now()
	log, err := ask(q)
	if err != nil {
		return err
	}
	newest := printSiteLog(out, log, asJSON, asked)
	if !follow {
		return nil
	}
	instance := log.Instance
	t := time.NewTicker(siteLogFollowTime)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		next := url.Values{"component": q["component"], "tailLines": {strconv.Itoa(sitev1.MaxLogLines)}, "sinceTime": {newest.UTC().Format(time.RFC3339Nano)}}
		log, err := ask(next)
		if errors.Is(ctx.Err(), context.Canceled) {
			return nil
		}
		if err != nil {
			fmt.Fprintf(errOut, "edgefleet: %v (asking again in %s)\n", err, siteLogFollowTime)
			continue
		}
		if len(log.Lines) == 0 {
			continue
		}
		if log.Instance != instance && !asJSON {
			fmt.Fprintf(errOut, "edgefleet: the %s restarted: now %s (lines of the earlier process that were not shown are gone)\n", log.Component, log.Instance)
		}
		instance = log.Instance
		newest = printSiteLog(out, log, asJSON, newest)
	}
}

// printSiteLog prints an answer and returns the time of its newest line (since when it has
// none).
func printSiteLog(out io.Writer, log restv1.SiteLog, asJSON bool, since time.Time) time.Time {
	newest := since
	for _, l := range log.Lines {
		e := logline.Parse(l)
		if !e.Time.IsZero() {
			newest = e.Time
		}
		if !asJSON {
			fmt.Fprintln(out, e.Render())
		}
	}
	if asJSON {
		_, _ = printer{format: "json"}.data(out, log)
	}
	return newest
}
