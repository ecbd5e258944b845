// Package command is the main of edgefleet's small single-purpose commands (edgefleet-kms,
// edgefleet-apiproxy): their flags and -version, a context that SIGINT or SIGTERM ends, a text
// logger on standard error, and the exit status.
package command

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/edgefleet/edgefleet/pkg/version"
)

// Main parses the command line into the flags addFlags registers, prints the version for
// -version, and runs run until it returns; an error is printed after the command's name and
// exits 1.
func Main(name string, addFlags func(*flag.FlagSet), run func(context.Context, *slog.Logger) error) {
	fs := flag.NewFlagSet(name, flag.ExitOnError)
	addFlags(fs)
	showVersion := fs.Bool("version", false, "Print the version and exit.")
	_ = fs.Parse(os.Args[1:])
	if *showVersion {
		fmt.Println(version.Version)
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, slog.New(slog.NewTextHandler(os.Stderr, nil)))
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(1)
	}
}
