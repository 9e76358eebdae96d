package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/sluicedata/sluice/agentapi"
	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/storage/azstore"
	"github.com/sluicedata/sluice/storage/gcsstore"
	"github.com/sluicedata/sluice/storage/s3store"
	"github.com/sluicedata/sluice/storage/stack"
)

// A job's store settings come from the process that opens the dataset
// (agentapi.Open.Env), not from the agent's own environment: the agent is
// shared by every job on the node and was started by whichever came first.
//
//   - s3:// stores are opened with the job's endpoint, region, profile and
//     keys (see s3Options); jobs with different settings get different
//     stores, and datasets opened with different settings are different
//     shared datasets, so one job is never served through another's store.
//   - gs:// stores are opened with the job's GCS_KEY and GCS_SECRET (HMAC
//     keys, through the XML API) or its STORAGE_EMULATOR_HOST and
//     GOOGLE_APPLICATION_CREDENTIALS, az:// stores with the job's
//     AZURE_STORAGE_* settings (connection string, account, key, SAS,
//     endpoint); see gcsOptions and azstore.OptionsFrom. Settings that the
//     cloud libraries read from the agent's own environment whatever the
//     job says (DefaultAzureCredential's AZURE_CLIENT_*, gcloud's
//     CLOUDSDK_*, an agent's STORAGE_EMULATOR_HOST the job does not set)
//     must be the same in the job and the agent: otherwise the job is
//     refused with a clear error instead of being served with the agent's
//     credentials.

// jobEnv is the store-related environment of the process that opened a
// dataset. nil means "not sent" (an older client or a Go consumer): the
// agent's own environment applies, as before.
type jobEnv map[string]string

// storeEnvVar reports whether an environment variable configures a store.
// The Python client sends the same set (sluice._agent.store_env).
func storeEnvVar(k string) bool {
	for _, p := range []string{"AWS_", "S3_", "GOOGLE_", "GCS_", "AZURE_", "CLOUDSDK_"} {
		if strings.HasPrefix(k, p) {
			return true
		}
	}
	return k == "STORAGE_EMULATOR_HOST"
}

// fingerprint identifies the settings without revealing them; "" for nil.
func (e jobEnv) fingerprint() string {
	if e == nil {
		return ""
	}
	keys := make([]string, 0, len(e))
	for k := range e {
		if storeEnvVar(k) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	h := sha256.New()
	h.Write([]byte("env\x00"))
	for _, k := range keys {
		fmt.Fprintf(h, "%s=%s\x00", k, e[k])
	}
	return hex.EncodeToString(h.Sum(nil))[:32]
}

type envKey struct{}

// metricsNameKey carries, for the pool's openers, the metrics name of the
// dataset whose stores are being opened (metricsName).
type metricsNameKey struct{}

// withDataset returns ctx naming the dataset name for the pool's openers.
func withDataset(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, metricsNameKey{}, name)
}

func datasetFrom(ctx context.Context) string {
	n, _ := ctx.Value(metricsNameKey{}).(string)
	return n
}

// withEnv returns ctx carrying e for the pool's openers.
func withEnv(ctx context.Context, e jobEnv) context.Context {
	if e == nil {
		return ctx
	}
	return context.WithValue(ctx, envKey{}, e)
}

func envFrom(ctx context.Context) jobEnv {
	e, _ := ctx.Value(envKey{}).(jobEnv)
	return e
}

func (e jobEnv) get(names ...string) string {
	for _, n := range names {
		if v := strings.TrimSpace(e[n]); v != "" {
			return v
		}
	}
	return ""
}

// openWithEnv opens u with the job's settings e (non-nil).
func (p *bucketPool) openWithEnv(ctx context.Context, u *url.URL, e jobEnv) (storage.Bucket, error) {
	switch strings.ToLower(u.Scheme) {
	case "s3":
		o, err := s3Options(u, e)
		if err != nil {
			return nil, fmt.Errorf("agent: open %s: %w", storage.RedactURL(u.String()), err)
		}
		b, err := s3store.New(ctx, u.Host, u.Path, o)
		if err != nil {
			return nil, err
		}
		return stack.Wrap(b, stack.OptionsFrom(ctx))
	case "gs":
		if err := refuseAgentEnv(u, e, gcsVar, gcsHandled); err != nil {
			return nil, err
		}
		o, err := gcsOptions(u, e)
		if err != nil {
			return nil, fmt.Errorf("agent: open %s: %w", storage.RedactURL(u.String()), err)
		}
		b, err := gcsstore.NewStore(ctx, u.Host, u.Path, o)
		if err != nil {
			return nil, err
		}
		return stack.Wrap(b, stack.OptionsFrom(ctx))
	case "az", "azure":
		if err := refuseAgentEnv(u, e, azVar, azHandled); err != nil {
			return nil, err
		}
		if len(u.Query()) > 0 {
			return nil, fmt.Errorf("agent: open %s: az:// URLs take no options (the account comes from the environment)", storage.RedactURL(u.String()))
		}
		b, err := azstore.New(ctx, u.Host, u.Path, azstore.OptionsFrom(func(k string) string { return e[k] }))
		if err != nil {
			return nil, err
		}
		return stack.Wrap(b, stack.OptionsFrom(ctx))
	}
	return p.openBase(ctx, u)
}

// s3Options builds the S3 options of a job from the job's
// S3_ENDPOINT_URL / AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL,
// AWS_REGION / AWS_DEFAULT_REGION, AWS_PROFILE, AWS_CONFIG_FILE,
// AWS_SHARED_CREDENTIALS_FILE and AWS_ACCESS_KEY_ID /
// AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN, with the URL's query options
// (s3store.Options.ApplyQuery) over them.
func s3Options(u *url.URL, e jobEnv) (*s3store.Options, error) {
	o := &s3store.Options{
		Endpoint: e.get("S3_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"),
		Region:   e.get("AWS_REGION", "AWS_DEFAULT_REGION"),
		Profile:  e.get("AWS_PROFILE"),
	}
	if f := e.get("AWS_CONFIG_FILE"); f != "" {
		o.SharedConfigFiles = []string{f}
	}
	if f := e.get("AWS_SHARED_CREDENTIALS_FILE"); f != "" {
		o.SharedCredentialsFiles = []string{f}
	}
	if id, secret := e.get("AWS_ACCESS_KEY_ID"), e.get("AWS_SECRET_ACCESS_KEY"); id != "" || secret != "" {
		if id == "" || secret == "" {
			return nil, fmt.Errorf("the job sets only one of AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY")
		}
		o.Credentials = credentials.NewStaticCredentialsProvider(id, secret, e.get("AWS_SESSION_TOKEN"))
	}
	if err := o.ApplyQuery(u.Query()); err != nil {
		return nil, err
	}
	return o, nil
}

func gcsVar(k string) bool {
	return strings.HasPrefix(k, "GOOGLE_") || strings.HasPrefix(k, "GCS_") ||
		strings.HasPrefix(k, "CLOUDSDK_") || k == "STORAGE_EMULATOR_HOST"
}

// gcsHandled reports the GCS settings a job's store takes from the job.
// The HMAC keys are taken from the job alone: an agent's own GCS_KEY and
// GCS_SECRET never reach a job's store (gcsstore.NewStore reads no
// environment), so a job without them is not refused for them.
func gcsHandled(k string) bool {
	switch k {
	case "GOOGLE_APPLICATION_CREDENTIALS", "STORAGE_EMULATOR_HOST", "GCS_KEY", "GCS_SECRET":
		return true
	}
	return false
}

func azVar(k string) bool { return strings.HasPrefix(k, "AZURE_") }

// azHandled reports the Azure settings a job's store takes from the job
// (azstore.OptionsFrom).
func azHandled(k string) bool {
	switch k {
	case "AZURE_STORAGE_CONNECTION_STRING", "AZURE_STORAGE_ACCOUNT", "AZURE_ACCOUNT_NAME",
		"AZURE_STORAGE_KEY", "AZURE_STORAGE_ACCOUNT_KEY", "AZURE_ACCOUNT_ACCESS_KEY",
		"AZURE_STORAGE_SAS_TOKEN", "AZURE_STORAGE_BLOB_ENDPOINT":
		return true
	}
	return false
}

// refuseAgentEnv refuses a job whose store would otherwise see a setting
// of the agent's own environment that differs from the job's: a variable
// of the store's family (family) that the job's store does not take from
// the job (handled), or STORAGE_EMULATOR_HOST / GOOGLE_APPLICATION_
// CREDENTIALS set for the agent and not for the job (the GCS library
// reads them from the process environment when the job gives nothing;
// a job with HMAC keys does not use that library).
func refuseAgentEnv(u *url.URL, e jobEnv, family, handled func(string) bool) error {
	agentEnv := map[string]string{}
	for _, kv := range os.Environ() {
		if k, v, ok := strings.Cut(kv, "="); ok && family(k) {
			agentEnv[k] = v
		}
	}
	keys := map[string]bool{}
	for k := range agentEnv {
		keys[k] = true
	}
	for k := range e {
		if family(k) {
			keys[k] = true
		}
	}
	for k := range keys {
		jv, inJob := e[k]
		av, inAgent := agentEnv[k]
		if handled(k) {
			// A job's HMAC keys open a store (gcsstore.NewHMAC) that
			// reads neither variable from the agent's environment.
			_, _, hmac := gcsstore.HMACFromEnv(func(k string) string { return e.get(k) })
			lent := inAgent && !inJob && av != "" && !hmac &&
				(k == "STORAGE_EMULATOR_HOST" || (k == "GOOGLE_APPLICATION_CREDENTIALS" && e.get("STORAGE_EMULATOR_HOST") == ""))
			if !lent {
				continue
			}
		} else if jv == av {
			continue
		}
		return &agentapi.Error{Code: agentapi.CodeInvalid, Message: fmt.Sprintf(
			"agent: open %s: the job's %s differs from the environment the shared agent was started with, "+
				"and the store would read the agent's; set it the same, or give the job its own SLUICE_AGENT_DIR",
			storage.RedactURL(u.String()), k)}
	}
	return nil
}

// gcsOptions builds the GCS options of a job: the URL's options (endpoint,
// anonymous, user_project, region), and either the job's HMAC keys
// (GCS_KEY and GCS_SECRET both set, as MosaicML Streaming selects them:
// the XML API, gcsstore.NewHMAC) or its STORAGE_EMULATOR_HOST as the
// endpoint when the URL gives none and its GOOGLE_APPLICATION_CREDENTIALS.
func gcsOptions(u *url.URL, e jobEnv) (*gcsstore.Options, error) {
	o := &gcsstore.Options{CredentialsFile: e.get("GOOGLE_APPLICATION_CREDENTIALS")}
	if key, secret, ok := gcsstore.HMACFromEnv(func(k string) string { return e.get(k) }); ok {
		o = &gcsstore.Options{HMACKey: key, HMACSecret: secret, HMACSource: "the job's GCS_KEY and GCS_SECRET"}
	} else if h := e.get("STORAGE_EMULATOR_HOST"); h != "" {
		if !strings.Contains(h, "://") {
			h = "http://" + h
		}
		o.Endpoint = h
		o.CredentialsFile = "" // an emulator takes no credentials
	}
	for k, vs := range u.Query() {
		v := vs[len(vs)-1]
		switch k {
		case "endpoint":
			o.Endpoint = v
		case "user_project":
			o.UserProject = v
		case "region":
			o.Region = v
		case "anonymous":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return nil, fmt.Errorf("option anonymous=%q: want true or false", v)
			}
			o.Anonymous = b
		default:
			return nil, fmt.Errorf("unknown option %q (known: endpoint, anonymous, user_project, region)", k)
		}
	}
	return o, nil
}
