package cli

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicedata/sluice/internal/stores"
	"github.com/sluicedata/sluice/storage/retry"
)

// silentListener accepts connections on 127.0.0.1 and never answers.
func silentListener(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String()
}

// TestStoreCommandsNeverAnsweringServer: every command that opens a store
// fails against a server that accepts and never answers, with an error
// naming the URL, the operation, the attempts and the timed-out wait; the
// --download-timeout and --retry-attempts flags reach every request (the
// old commands took the library's 10 attempts of 1 minute each).
func TestStoreCommandsNeverAnsweringServer(t *testing.T) {
	addr := silentListener(t)
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	fast := []string{"--download-timeout", "150ms", "--retry-attempts", "2"}
	for _, c := range []struct{ remote, named, tars string }{
		// Plain HTTP cannot list: index reads a pattern's shards.
		{"http://" + addr + "/data", "http://" + addr + "/data", "http://" + addr + "/data/shard-{0..1}.tar"},
		{"s3://bucket/data?endpoint=" + url.QueryEscape("http://user:hunter2@"+addr), "s3://bucket/data",
			"s3://bucket/data?endpoint=" + url.QueryEscape("http://user:hunter2@"+addr)},
	} {
		remote := c.remote
		scheme := strings.SplitN(remote, ":", 2)[0]
		for _, args := range [][]string{
			{"inspect", remote},
			{"inspect", "--no-stat", remote},
			{"verify", remote},
			{"ls", remote},
			{"dump", remote},
			{"cp", remote, t.TempDir()},
			{"plan", "--batch-size", "4", remote},
			{"index", c.tars},
		} {
			t.Run(scheme+"/"+args[0], func(t *testing.T) {
				// The test's own deadline is far beyond the one under test.
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				defer cancel()
				var out, errOut bytes.Buffer
				argv := append(append([]string{args[0]}, fast...), args[1:]...)
				err := Run(ctx, argv, &out, &errOut)
				var re *retry.Error
				if !errors.As(err, &re) || ctx.Err() != nil {
					t.Fatalf("sluice %s = %v, want a *retry.Error before the test's deadline", strings.Join(argv, " "), err)
				}
				if re.Attempts != 2 {
					t.Errorf("%d attempts, want the --retry-attempts 2", re.Attempts)
				}
				msg := err.Error()
				for _, want := range []string{"attempt timed out", "giving up after 2 attempts", re.Op + " " + c.named} {
					if !strings.Contains(msg, want) {
						t.Errorf("error %q does not contain %q", msg, want)
					}
				}
				if strings.Contains(msg, "hunter2") || strings.Contains(errOut.String(), "hunter2") {
					t.Errorf("output shows the endpoint's password: %q / %q", msg, errOut.String())
				}
				if !strings.Contains(errOut.String(), "retrying "+re.Op) {
					t.Errorf("stderr %q does not report the retry", errOut.String())
				}
			})
		}
	}
}

// TestStoreCommandsDefaultDeadline: without flags, a command that opens a
// store gives up on a never-answering server well within a minute: the
// worst case of its default policy (every attempt timing out, with the
// longest backoffs) is computed from the flags' defaults and the policy
// they resolve to.
func TestStoreCommandsDefaultDeadline(t *testing.T) {
	e := &env{stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}, registry: stores.Default()}
	for _, cmd := range []*cobra.Command{newInspectCommand(e), newVerifyCommand(e), newLsCommand(e),
		newDumpCommand(e), newCpCommand(e), newPlanCommand(e), newIndexCommand(e)} {
		fl := cmd.Flags()
		if err := fl.Parse(nil); err != nil {
			t.Fatal(err)
		}
		timeout, err := fl.GetDuration("download-timeout")
		if err != nil {
			t.Errorf("%s: %v", cmd.Name(), err)
			continue
		}
		attempts, err := fl.GetInt("retry-attempts")
		if err != nil {
			t.Errorf("%s: %v", cmd.Name(), err)
			continue
		}
		f := storeFlags{downloadTimeout: timeout, retryAttempts: attempts, stallTimeout: cliStallTimeout}
		o := f.retryOptions(e)
		// Backoff before attempt k+1 is at most InitialBackoff·2^(k-1)
		// (100ms default), capped by MaxBackoff.
		worst, backoff := time.Duration(0), 100*time.Millisecond
		for k := 1; k <= o.MaxAttempts; k++ {
			worst += o.AttemptTimeout
			if k < o.MaxAttempts {
				worst += backoff
				backoff *= 2
			}
		}
		if o.AttemptTimeout <= 0 || worst >= 45*time.Second {
			t.Errorf("%s: default policy %d attempts × %s gives up only after %s, want well under a minute",
				cmd.Name(), o.MaxAttempts, o.AttemptTimeout, worst)
		}
	}
	// A command that opens a store without registering the flags gets the
	// same policy.
	if f := storeFlagsFrom(context.Background()); *f != defaultStoreFlags {
		t.Errorf("policy without flags = %+v, want %+v", *f, defaultStoreFlags)
	}
}

// TestStoreFlagsRejected: values no request can run with are refused
// before any store is opened.
func TestStoreFlagsRejected(t *testing.T) {
	for _, args := range [][]string{
		{"ls", "--download-timeout", "0s", "."},
		{"inspect", "--retry-attempts", "0", "."},
		{"verify", "--stall-timeout", "-1s", "."},
	} {
		var out, errOut bytes.Buffer
		err := Run(context.Background(), args, &out, &errOut)
		if err == nil || !strings.Contains(err.Error(), args[1]) {
			t.Errorf("sluice %v = %v, want an error naming %s", args, err, args[1])
		}
	}
}
