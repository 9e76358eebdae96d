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
//   - gs:// and az:// drivers read their settings from the process
//     environment only: a job whose GCS or Azure settings differ from the
//     agent's is refused with a clear error instead of being served with
//     the agent's credentials.

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
	case "gs", "az", "azure":
		for k, v := range e {
			if storeEnvVar(k) && !strings.HasPrefix(k, "AWS_") && !strings.HasPrefix(k, "S3_") && os.Getenv(k) != v {
				return nil, &agentapi.Error{Code: agentapi.CodeInvalid, Message: fmt.Sprintf(
					"agent: open %s: this job sets %s differently from the environment the agent was started with; "+
						"per-job GCS/Azure settings are not supported by a shared agent: give the job its own SLUICE_AGENT_DIR",
					storage.RedactURL(u.String()), k)}
			}
		}
		for _, k := range []string{"GOOGLE_APPLICATION_CREDENTIALS", "STORAGE_EMULATOR_HOST", "AZURE_STORAGE_CONNECTION_STRING", "AZURE_STORAGE_KEY", "AZURE_STORAGE_ACCOUNT"} {
			if _, ok := e[k]; !ok && os.Getenv(k) != "" {
				return nil, &agentapi.Error{Code: agentapi.CodeInvalid, Message: fmt.Sprintf(
					"agent: open %s: the agent was started with %s, which this job does not set; "+
						"give the job its own SLUICE_AGENT_DIR", storage.RedactURL(u.String()), k)}
			}
		}
	}
	return p.base.Open(ctx, u.String())
}

// s3Options builds the S3 options of a job: URL query options first, then
// the job's S3_ENDPOINT_URL / AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL,
// AWS_REGION / AWS_DEFAULT_REGION, AWS_PROFILE and AWS_ACCESS_KEY_ID /
// AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN.
func s3Options(u *url.URL, e jobEnv) (*s3store.Options, error) {
	o := &s3store.Options{
		Endpoint: e.get("S3_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"),
		Region:   e.get("AWS_REGION", "AWS_DEFAULT_REGION"),
		Profile:  e.get("AWS_PROFILE"),
	}
	if id, secret := e.get("AWS_ACCESS_KEY_ID"), e.get("AWS_SECRET_ACCESS_KEY"); id != "" || secret != "" {
		if id == "" || secret == "" {
			return nil, fmt.Errorf("the job sets only one of AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY")
		}
		o.Credentials = credentials.NewStaticCredentialsProvider(id, secret, e.get("AWS_SESSION_TOKEN"))
	}
	for k, vs := range u.Query() {
		v := vs[len(vs)-1]
		var err error
		switch k {
		case "region":
			o.Region = v
		case "endpoint":
			o.Endpoint = v
		case "profile":
			o.Profile = v
		case "requester_pays":
			o.RequesterPays, err = strconv.ParseBool(v)
		case "anonymous":
			o.Anonymous, err = strconv.ParseBool(v)
		case "virtual_host":
			o.VirtualHostStyle, err = strconv.ParseBool(v)
		default:
			return nil, fmt.Errorf("unknown option %q (known: region, endpoint, profile, requester_pays, anonymous, virtual_host)", k)
		}
		if err != nil {
			return nil, fmt.Errorf("option %s=%q: want true or false", k, v)
		}
	}
	return o, nil
}
