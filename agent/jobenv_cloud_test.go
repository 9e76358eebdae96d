package agent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sluicedata/sluice/agentapi"
	"github.com/sluicedata/sluice/internal/s3test"
	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/storage/azstore"
	"github.com/sluicedata/sluice/storage/gcsstore"
	"github.com/sluicedata/sluice/storage/s3store"
)

// serveAgent runs an agent over reg, started with the test's environment
// (no store settings of the jobs), and returns a dialer.
func serveAgent(t *testing.T, reg *storage.Registry) func() *agentapi.Client {
	t.Helper()
	return serveAgentWith(t, &Options{Registry: reg, IdleTimeout: -1})
}

// uploadDataset writes n samples and uploads them to b; removed at the end.
func uploadDataset(t *testing.T, b storage.Bucket, n int) []string {
	t.Helper()
	src := t.TempDir()
	writeDataset(t, src, n, 1<<10)
	names := s3test.UploadDir(t, b, src)
	t.Cleanup(func() {
		for _, name := range names {
			b.Delete(context.Background(), name)
		}
	})
	return names
}

// readAll opens remote as a job with env and reads every sample, or
// returns the error of the open.
func readAll(t *testing.T, dial func() *agentapi.Client, remote string, env map[string]string, n int) error {
	t.Helper()
	ctx := context.Background()
	c := dial()
	world := agentapi.World{WorldSize: 1, LocalWorldSize: 1}
	ds := agentapi.Dataset{Remote: remote, Local: filepath.Join(t.TempDir(), "cache"), BatchSize: 4}
	op, err := c.Open(ctx, agentapi.Open{Dataset: ds, Job: "j", World: world, Env: env})
	if err != nil {
		return err
	}
	b, err := c.Begin(ctx, agentapi.Begin{Handle: op.Handle, World: world})
	if err != nil {
		return err
	}
	ids := drain(t, c, b.Iter, 0)
	slices.Sort(ids)
	if len(ids) != n || ids[0] != 0 || ids[n-1] != int64(n-1) {
		t.Fatalf("%s: %d samples, want %d distinct", remote, len(ids), n)
	}
	return nil
}

// jobEnvWith is what a job on this node sends (the store variables of its
// environment, here the test's), with set added.
func jobEnvWith(set map[string]string) map[string]string {
	e := map[string]string{}
	for _, kv := range os.Environ() {
		if k, v, ok := strings.Cut(kv, "="); ok && storeEnvVar(k) {
			e[k] = v
		}
	}
	for k, v := range set {
		e[k] = v
	}
	return e
}

func randPrefix(name string) string {
	var rb [6]byte
	rand.Read(rb[:])
	return "test/" + name + "-" + hex.EncodeToString(rb[:])
}

func needService(t *testing.T, vars ...string) {
	for _, v := range vars {
		if os.Getenv(v) == "" {
			if os.Getenv("SLUICE_REQUIRE_SERVICES") == "1" {
				t.Fatalf("%s is not set under CI", v)
			}
			t.Skipf("%s not set; run under .ci/with-services.sh", v)
		}
	}
}

// TestJobGCSSettings: an agent started without any GCS settings serves a
// job that names the fake-gcs-server with its own STORAGE_EMULATOR_HOST,
// and applies a job's GOOGLE_APPLICATION_CREDENTIALS (a missing file is
// reported, not replaced by the agent's credentials).
func TestJobGCSSettings(t *testing.T) {
	needService(t, "SLUICE_TEST_GCS_ENDPOINT", "SLUICE_TEST_GCS_BUCKET")
	endpoint, bucket := os.Getenv("SLUICE_TEST_GCS_ENDPOINT"), os.Getenv("SLUICE_TEST_GCS_BUCKET")
	t.Setenv("STORAGE_EMULATOR_HOST", "")
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", "")
	os.Unsetenv("STORAGE_EMULATOR_HOST")
	os.Unsetenv("GOOGLE_APPLICATION_CREDENTIALS")
	prefix := randPrefix("agent-jobenv-gcs")
	b, err := gcsstore.New(context.Background(), bucket, prefix, &gcsstore.Options{Endpoint: endpoint})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	const n = 120
	uploadDataset(t, b, n)
	reg := &storage.Registry{}
	reg.Register("gs", gcsstore.Open)
	dial := serveAgent(t, reg)
	remote := "gs://" + bucket + "/" + prefix
	host := strings.TrimPrefix(endpoint, "http://")
	if err := readAll(t, dial, remote, jobEnvWith(map[string]string{"STORAGE_EMULATOR_HOST": host}), n); err != nil {
		t.Fatalf("job with STORAGE_EMULATOR_HOST=%s: %v", host, err)
	}
	missing := filepath.Join(t.TempDir(), "no-such-credentials.json")
	err = readAll(t, dial, remote, jobEnvWith(map[string]string{"GOOGLE_APPLICATION_CREDENTIALS": missing}), n)
	if err == nil || !strings.Contains(err.Error(), "no-such-credentials.json") {
		t.Fatalf("job with GOOGLE_APPLICATION_CREDENTIALS=%s: %v, want an error naming the file", missing, err)
	}
}

// TestJobAzureSettings: an agent started without any Azure settings
// serves a job with its own AZURE_STORAGE_CONNECTION_STRING (Azurite), and
// a job with the same account but a wrong key is refused.
func TestJobAzureSettings(t *testing.T) {
	needService(t, "SLUICE_TEST_AZURE_CONNSTR", "SLUICE_TEST_AZURE_CONTAINER")
	connstr, cont := os.Getenv("SLUICE_TEST_AZURE_CONNSTR"), os.Getenv("SLUICE_TEST_AZURE_CONTAINER")
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "AZURE_") {
			t.Setenv(k, "")
			os.Unsetenv(k)
		}
	}
	prefix := randPrefix("agent-jobenv-az")
	b, err := azstore.New(context.Background(), cont, prefix, &azstore.Options{ConnectionString: connstr})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	const n = 120
	uploadDataset(t, b, n)
	reg := &storage.Registry{}
	reg.Register("az", azstore.Open)
	dial := serveAgent(t, reg)
	remote := "az://" + cont + "/" + prefix
	if err := readAll(t, dial, remote, jobEnvWith(map[string]string{"AZURE_STORAGE_CONNECTION_STRING": connstr}), n); err != nil {
		t.Fatalf("job with its connection string: %v", err)
	}
	var parts []string
	for _, p := range strings.Split(connstr, ";") {
		if strings.HasPrefix(p, "AccountKey=") {
			p = "AccountKey=" + "d3Jvbmcta2V5LW5vdC10aGUtYWNjb3VudHMta2V5LXdyb25nLWtleQ=="
		}
		parts = append(parts, p)
	}
	if err := readAll(t, dial, remote, jobEnvWith(map[string]string{"AZURE_STORAGE_CONNECTION_STRING": strings.Join(parts, ";")}), n); err == nil {
		t.Fatal("a job with a wrong account key was served")
	}
}

// TestJobAWSSharedFiles: a job's AWS_SHARED_CREDENTIALS_FILE,
// AWS_CONFIG_FILE and AWS_PROFILE (and no key variables) reach its S3
// store; a profile the job's files lack is an error.
func TestJobAWSSharedFiles(t *testing.T) {
	needService(t, "SLUICE_TEST_S3_ENDPOINT", "SLUICE_TEST_S3_BUCKET")
	endpoint, bucket := os.Getenv("SLUICE_TEST_S3_ENDPOINT"), os.Getenv("SLUICE_TEST_S3_BUCKET")
	region := os.Getenv("SLUICE_TEST_S3_REGION")
	if region == "" {
		region = "us-east-1"
	}
	key, secret := os.Getenv("SLUICE_TEST_S3_ACCESS_KEY"), os.Getenv("SLUICE_TEST_S3_SECRET_KEY")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_ACCESS_KEY_ID", key)
	t.Setenv("AWS_SECRET_ACCESS_KEY", secret)
	prefix := randPrefix("agent-jobenv-awsfiles")
	b, err := s3store.New(context.Background(), bucket, prefix, &s3store.Options{Endpoint: endpoint, Region: region})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	const n = 80
	uploadDataset(t, b, n)
	// The agent itself has no keys.
	os.Unsetenv("AWS_ACCESS_KEY_ID")
	os.Unsetenv("AWS_SECRET_ACCESS_KEY")
	dir := t.TempDir()
	creds := filepath.Join(dir, "credentials")
	conf := filepath.Join(dir, "config")
	if err := os.WriteFile(creds, []byte(fmt.Sprintf("[trainer]\naws_access_key_id = %s\naws_secret_access_key = %s\n", key, secret)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(conf, []byte("[profile trainer]\nregion = "+region+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	reg := &storage.Registry{}
	reg.Register("s3", s3store.Open)
	dial := serveAgent(t, reg)
	remote := "s3://" + bucket + "/" + prefix + "?" + url.Values{"endpoint": {endpoint}}.Encode()
	env := jobEnvWith(map[string]string{"AWS_SHARED_CREDENTIALS_FILE": creds, "AWS_CONFIG_FILE": conf,
		"AWS_PROFILE": "trainer", "AWS_EC2_METADATA_DISABLED": "true"})
	if err := readAll(t, dial, remote, env, n); err != nil {
		t.Fatalf("job with its shared credentials file and profile: %v", err)
	}
	env["AWS_PROFILE"] = "absent"
	if err := readAll(t, dial, remote, env, n); err == nil {
		t.Fatal("a job whose profile is not in its files was served")
	}
}

// TestJobGCSHMACKeys: jobs on one agent (started without GCS_KEY or
// GCS_SECRET, with a GOOGLE_APPLICATION_CREDENTIALS the jobs lack) read a gs:// dataset through the XML API with their own
// HMAC keys (the S3 server standing in for GCS's XML endpoint): a job with
// the right keys is served; a job with the same key and a wrong secret,
// opened after it, is refused rather than served through the first job's
// store; a job without keys does not get the HMAC store either.
func TestJobGCSHMACKeys(t *testing.T) {
	srv := s3test.Require(t)
	for _, k := range []string{"GCS_KEY", "GCS_SECRET", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	// The agent has a credentials file of its own (it was started by a
	// job using one); jobs with HMAC keys and without a file are served
	// all the same, since their store does not read it.
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", "/nonexistent/agent-credentials.json")
	t.Setenv("STORAGE_EMULATOR_HOST", "")
	os.Unsetenv("STORAGE_EMULATOR_HOST")
	prefix := randPrefix("agent-jobenv-gcshmac")
	const n = 120
	uploadDataset(t, srv.Open(t, prefix), n)
	reg := &storage.Registry{}
	reg.Register("gs", gcsstore.Open)
	dial := serveAgent(t, reg)
	remote := "gs://" + srv.Bucket + "/" + prefix + "?" + url.Values{"endpoint": {srv.Endpoint}, "region": {srv.Region}}.Encode()
	keys := func(secret string) map[string]string {
		e := jobEnvWith(map[string]string{"GCS_KEY": srv.AccessKey, "GCS_SECRET": secret})
		delete(e, "GOOGLE_APPLICATION_CREDENTIALS")
		return e
	}
	if err := readAll(t, dial, remote, keys(srv.SecretKey), n); err != nil {
		t.Fatalf("job with its GCS_KEY and GCS_SECRET: %v", err)
	}
	err := readAll(t, dial, remote, keys("not-the-secret-0123456789"), n)
	if err == nil {
		t.Fatal("a job with a wrong GCS_SECRET was served (through the other job's store?)")
	}
	t.Logf("wrong secret: %v", err)
	if !strings.Contains(err.Error(), "GCS_KEY and GCS_SECRET") || strings.Contains(err.Error(), "not-the-secret") {
		t.Errorf("wrong secret: %v; want the key's source named and the secret not shown", err)
	}
	if err := readAll(t, dial, remote, jobEnvWith(nil), n); err == nil {
		t.Fatal("a job without HMAC keys was served through the HMAC store")
	} else {
		t.Logf("no keys: %v", err)
	}
	if err := readAll(t, dial, remote, keys(srv.SecretKey), n); err != nil {
		t.Fatalf("the first job's keys again: %v", err)
	}
}
