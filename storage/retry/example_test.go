package retry_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"strings"
	"time"

	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/storage/limit"
	"github.com/sluicedata/sluice/storage/memstore"
	"github.com/sluicedata/sluice/storage/retry"
	"github.com/sluicedata/sluice/storage/storagetest"
)

// The standard stack: a bound on requests in flight, retries around it.
// Here the store fails the first two reads with HTTP 503 and breaks the
// body once; the caller sees one clean read.
func ExampleNew() {
	ctx := context.Background()
	store := memstore.New("data")
	if _, err := storage.WriteFrom(ctx, store, "shard.00000.mds", strings.NewReader("hello, shards"), nil); err != nil {
		log.Fatal(err)
	}

	flaky := storagetest.NewFaulty(store)
	flaky.Inject(
		storagetest.Fault{Op: storagetest.OpOpen, Times: 2, Err: &storage.HTTPError{Op: "get", StatusCode: 503}},
		storagetest.Fault{Op: storagetest.OpRead, Times: 1, AfterBytes: 5, Err: io.ErrUnexpectedEOF},
	)
	limited, err := limit.New(flaky, 16)
	if err != nil {
		log.Fatal(err)
	}
	b, err := retry.New(limited, &retry.Options{
		InitialBackoff:  time.Millisecond,
		ThrottleBackoff: time.Millisecond,
		OnRetry:         func(e retry.Event) { fmt.Println("retry", e.Op, "after failed attempt", e.Attempt) },
	})
	if err != nil {
		log.Fatal(err)
	}
	data, err := storage.ReadAll(ctx, b, "shard.00000.mds", 1<<20)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s\n", data)
	// Output:
	// retry get after failed attempt 1
	// retry get after failed attempt 2
	// retry get after failed attempt 1
	// hello, shards
}
