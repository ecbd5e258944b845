package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/edgefleet/edgefleet/kms/setup"
	"github.com/edgefleet/edgefleet/pkg/version"
)

func main() {
	fs := flag.NewFlagSet("edgefleet-kms", flag.ExitOnError)
	opts := setup.DefaultOptions()
	opts.AddFlags(fs)
	showVersion := fs.Bool("version", false, "Print the version and exit.")
	_ = fs.Parse(os.Args[1:])
	if *showVersion {
		fmt.Println(version.Version)
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := setup.Run(ctx, opts, log); err != nil {
		fmt.Fprintln(os.Stderr, "edgefleet-kms:", err)
		os.Exit(1)
	}
}
