// Package cli implements the sluice command line. Each subcommand is built by
// a constructor that takes its dependencies; output goes to the injected
// writers, so every command is testable in-process with Run.
package cli

import (
	"context"
	"errors"
	"io"

	"github.com/spf13/cobra"

	"github.com/sluicedata/sluice/internal/stores"
	"github.com/sluicedata/sluice/internal/version"
	"github.com/sluicedata/sluice/storage"
)

// env carries what every subcommand needs: the output streams and the
// storage registry.
type env struct {
	stdout   io.Writer
	stderr   io.Writer
	registry *storage.Registry
}

// ExitError carries a process exit code for errors that need one other than 1
// (for example verify's "dataset is unsound").
type ExitError struct {
	Code int   // process exit code
	Err  error // what to print
}

// Error returns the wrapped error's message.
func (e *ExitError) Error() string { return e.Err.Error() }

// Unwrap returns the wrapped error.
func (e *ExitError) Unwrap() error { return e.Err }

// ExitCode maps an error returned by Run to a process exit code.
func ExitCode(err error) int {
	var ee *ExitError
	if errors.As(err, &ee) {
		return ee.Code
	}
	return 1
}

// Run executes the sluice command line with args (without the program name).
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	e := &env{stdout: stdout, stderr: stderr, registry: stores.Default()}
	root := newRootCommand(e)
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	return root.ExecuteContext(ctx)
}

func newRootCommand(e *env) *cobra.Command {
	root := &cobra.Command{
		Use:   "sluice",
		Short: "Stream sharded training data from object storage to GPUs",
		Long: `Sluice streams sharded datasets (MosaicML MDS, JSON lines, CSV/TSV, WebDataset)
from object storage (S3, GCS, Azure, HTTP, local) to training processes, with a
bounded node cache, planned prefetch, elastic deterministic order and exact resume.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version.Number(),
	}
	root.SetVersionTemplate(version.Long() + "\n")
	root.AddCommand(
		// format (issue: MDS format)
		newInspectCommand(e),
		newDumpCommand(e),
		newVerifyCommand(e),
		newMergeCommand(e),
		// storage
		newLsCommand(e),
		newCpCommand(e),
		// plan
		newPlanCommand(e),
		newSimulateCommand(e),
		newBenchCommand(e),
		newPlotCommand(e),
		// streaming
		newStreamCommand(e),
		newQuickstartCommand(e),
		// agent
		newAgentCommand(e),
		// conversion
		newConvertCommand(e),
		// writing (the Python writers' engine)
		newWriteCommand(e),
		// WebDataset tars
		newIndexCommand(e),
		// YAML-driven jobs (the container image's entry point)
		newRunCommand(e),
	)
	return root
}
