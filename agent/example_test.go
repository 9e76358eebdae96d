package agent_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/sluicedata/sluice/agent"
	"github.com/sluicedata/sluice/agentapi"
	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/format/mds"
	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/storage/filestore"
)

// Example runs an agent on a Unix socket and reads one epoch through the
// Go client: every sample arrives once, as a location in a cached shard.
func Example() {
	dir, _ := os.MkdirTemp("", "sluice-agent-example")
	defer os.RemoveAll(dir)
	remote := filepath.Join(dir, "remote")
	w, _ := mds.NewWriter(remote, &mds.WriterOptions{Columns: map[string]string{"id": "int"}, SizeLimit: 256})
	for i := range 100 {
		w.Write(format.Sample{"id": int64(i)})
	}
	w.Finish()

	reg := &storage.Registry{}
	reg.Register("file", filestore.Open)
	a, _ := agent.New(&agent.Options{Registry: reg, IdleTimeout: -1})
	lock, err := agent.AcquireLock(filepath.Join(dir, "agent"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer lock.Release()
	ln, _ := lock.Listen()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- a.Serve(ctx, ln) }()
	defer func() { cancel(); <-served }()

	c, err := agentapi.Dial(ctx, agent.SocketPath(filepath.Join(dir, "agent")), nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	world := agentapi.World{WorldSize: 1, LocalWorldSize: 1, NumWorkers: 1}
	op, err := c.Open(ctx, agentapi.Open{Job: "example", World: world,
		Dataset: agentapi.Dataset{Remote: remote, Local: filepath.Join(dir, "cache"), BatchSize: 8, Shuffle: true}})
	if err != nil {
		fmt.Println(err)
		return
	}
	it, _ := c.Begin(ctx, agentapi.Begin{Handle: op.Handle, World: world})
	seen := map[int64]bool{}
	var release []int64
	for {
		b, err := c.Next(ctx, agentapi.Next{Iter: it.Iter, Max: 32, Release: release})
		if err != nil {
			fmt.Println(err)
			return
		}
		if b.Done {
			break
		}
		release = []int64{b.ID}
		for _, e := range b.Entries {
			seen[e.Sample] = true
		}
	}
	fmt.Println("epoch", it.Epoch, "samples", len(seen), "of", op.NumSamples)
	// Output: epoch 0 samples 100 of 100
}
