package cli

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/sluicedata/sluice/format/hashing"
)

// One name per concept on every command:
//
//	world shape      --nodes, --ranks-per-node, --workers-per-rank
//	                 (--world-size, --local-world-size and --workers stay
//	                 as hidden, deprecated aliases)
//	I/O parallelism  -j/--concurrency (convert's --workers is an alias)
//	progress         --progress auto|bar|plain|none
//	machine output   --json

// shuffleAlgoHelp is the --shuffle-algo help, listing every algorithm.
const shuffleAlgoHelp = "shuffle algorithm: naive, py1s, py2s, py1br, py1e or py1b"

// validateHashHelp is the --validate-hash help, listing every algorithm.
func validateHashHelp() string {
	return "hash algorithm to validate downloads with: " + strings.Join(hashing.Names(), ", ") + " (default: none)"
}

// worldAliases are the deprecated world-shape flags, kept so that older
// command lines still run.
type worldAliases struct {
	worldSize, localWorldSize, workers int
}

// addWorldAliases registers --world-size, --local-world-size and
// --workers as hidden, deprecated aliases of the canonical world flags.
func addWorldAliases(fl *pflag.FlagSet, a *worldAliases) {
	fl.IntVar(&a.worldSize, "world-size", 0, "number of ranks in all (deprecated: use --nodes and --ranks-per-node)")
	fl.IntVar(&a.localWorldSize, "local-world-size", 0, "ranks per node (deprecated: use --ranks-per-node)")
	fl.IntVar(&a.workers, "workers", 0, "DataLoader workers per rank (deprecated: use --workers-per-rank)")
	// Hidden rather than cobra-deprecated: cobra prints its notice on
	// stdout, which would corrupt --json output; applyWorldAliases warns
	// on stderr instead.
	for _, n := range []string{"world-size", "local-world-size", "workers"} {
		_ = fl.MarkHidden(n)
	}
}

// warnDeprecated prints one line on w for each deprecated flag given.
func warnDeprecated(cmd *cobra.Command, w io.Writer, replacements map[string]string) {
	names := make([]string, 0, len(replacements))
	for n := range replacements {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if cmd.Flags().Changed(n) {
			fmt.Fprintf(w, "sluice: --%s is deprecated, use %s\n", n, replacements[n])
		}
	}
}

// applyWorldAliases folds the deprecated flags that were given into the
// canonical values (nodes = world size / ranks per node), and checks the
// shape: at least one node and one rank per node, no negative worker count.
func applyWorldAliases(cmd *cobra.Command, a *worldAliases, nodes, ranksPerNode, workersPerRank *int) error {
	fl := cmd.Flags()
	warnDeprecated(cmd, cmd.ErrOrStderr(), map[string]string{
		"world-size": "--nodes and --ranks-per-node", "local-world-size": "--ranks-per-node", "workers": "--workers-per-rank",
	})
	if fl.Changed("local-world-size") {
		if fl.Changed("ranks-per-node") && *ranksPerNode != a.localWorldSize {
			return fmt.Errorf("--local-world-size %d and --ranks-per-node %d disagree", a.localWorldSize, *ranksPerNode)
		}
		*ranksPerNode = a.localWorldSize
	}
	if fl.Changed("workers") {
		*workersPerRank = a.workers
	}
	if *ranksPerNode < 1 {
		return fmt.Errorf("--ranks-per-node must be at least 1, got %d", *ranksPerNode)
	}
	if fl.Changed("world-size") {
		if a.worldSize < 1 || a.worldSize%*ranksPerNode != 0 {
			return fmt.Errorf("--world-size %d must be a positive multiple of the ranks per node (%d)", a.worldSize, *ranksPerNode)
		}
		*nodes = a.worldSize / *ranksPerNode
	}
	if *nodes < 1 {
		return fmt.Errorf("--nodes must be at least 1, got %d", *nodes)
	}
	if *workersPerRank < 0 {
		return fmt.Errorf("--workers-per-rank must not be negative, got %d", *workersPerRank)
	}
	return nil
}

// checkStreamCounts rejects counts no run can have: a given world flag
// below 1, a negative worker count, limit or save interval.
func checkStreamCounts(cmd *cobra.Command, f *streamFlags) error {
	fl := cmd.Flags()
	warnDeprecated(cmd, cmd.ErrOrStderr(), map[string]string{
		"world-size": "--nodes and --ranks-per-node", "local-world-size": "--ranks-per-node", "workers": "--workers-per-rank",
	})
	for _, c := range []struct {
		name string
		v    int
	}{{"nodes", f.nodes}, {"ranks-per-node", f.ranksPerNode}, {"world-size", f.worldSize}, {"local-world-size", f.localWorldSize}} {
		if fl.Changed(c.name) && c.v < 1 {
			return fmt.Errorf("stream: --%s must be at least 1, got %d", c.name, c.v)
		}
	}
	if f.workers < 0 {
		return fmt.Errorf("stream: --workers-per-rank must not be negative, got %d", f.workers)
	}
	if fl.Changed("rank") && f.rank < 0 {
		return fmt.Errorf("stream: --rank must not be negative, got %d", f.rank)
	}
	if f.limit < 0 {
		return fmt.Errorf("stream: --limit must not be negative (0: the whole epoch), got %d", f.limit)
	}
	if f.saveEvery < 0 {
		return fmt.Errorf("stream: --save-every must not be negative, got %d", f.saveEvery)
	}
	if f.batchSize < 1 {
		return fmt.Errorf("stream: --batch-size must be at least 1, got %d", f.batchSize)
	}
	return nil
}
