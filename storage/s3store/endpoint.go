package s3store

import (
	"context"
	"reflect"
	"sync"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	smithyauth "github.com/aws/smithy-go/auth"
	smithyendpoints "github.com/aws/smithy-go/endpoints"
)

// The SDK resolves every request's endpoint twice (once for the auth
// scheme, once for the URL) by evaluating S3's endpoint rules, and the
// rules compile the partition regular expressions on every evaluation:
// about half of the client's CPU per small GET against a custom endpoint.
// The answer depends only on the request's endpoint parameters, and of
// those the object key, prefix and copy source never enter S3's rules, so
// a Bucket (one bucket, one region, one endpoint) gets one answer for all
// its requests. cachedResolver remembers the answers of the SDK's own
// resolver by the other parameters and hands out a copy of one per
// request; what it returns is exactly what the SDK's resolver would.

// maxCachedEndpoints bounds a cachedResolver (the Client is public, so
// requests for other buckets may come through it); past it, answers are
// computed, not stored.
const maxCachedEndpoints = 64

// endpointParamKeyed reports whether the cache keys on the
// s3.EndpointParameters field named name (known is false for a field the
// cache does not know). Key, Prefix and CopySource are known and left out:
// S3's rules do not read them.
func endpointParamKeyed(name string) (keyed, known bool) {
	switch name {
	case "Key", "Prefix", "CopySource":
		return false, true
	case "Bucket", "Region", "Endpoint",
		"UseFIPS", "UseDualStack", "ForcePathStyle", "Accelerate",
		"UseGlobalEndpoint", "UseObjectLambdaEndpoint", "DisableAccessPoints",
		"DisableMultiRegionAccessPoints", "UseArnRegion",
		"UseS3ExpressControlEndpoint", "DisableS3ExpressSessionAuth":
		return true, true
	}
	return false, false
}

// endpointParamsKnown reports whether the cache knows every field of
// s3.EndpointParameters: with an SDK that added a parameter it would
// confuse requests that differ in it, so it is not used.
func endpointParamsKnown() bool {
	t := reflect.TypeFor[s3.EndpointParameters]()
	for i := range t.NumField() {
		if _, known := endpointParamKeyed(t.Field(i).Name); !known {
			return false
		}
	}
	return true
}

// optString and optBool hold an optional parameter by value.
type optString struct {
	set bool
	v   string
}

type optBool uint8 // 0 unset, 1 false, 2 true

func ostr(p *string) optString {
	if p == nil {
		return optString{}
	}
	return optString{true, *p}
}

func obool(p *bool) optBool {
	switch {
	case p == nil:
		return 0
	case *p:
		return 2
	default:
		return 1
	}
}

// endpointKey is s3.EndpointParameters without Key, Prefix and CopySource,
// comparable.
type endpointKey struct {
	bucket, region, endpoint                               optString
	fips, dualStack, pathStyle, accelerate, globalEndpoint optBool
	objectLambda, noAccessPoints, noMRAP, arnRegion        optBool
	expressControl, noExpressSessionAuth                   optBool
}

func keyOf(p *s3.EndpointParameters) endpointKey {
	return endpointKey{
		bucket: ostr(p.Bucket), region: ostr(p.Region), endpoint: ostr(p.Endpoint),
		fips: obool(p.UseFIPS), dualStack: obool(p.UseDualStack), pathStyle: obool(p.ForcePathStyle),
		accelerate: obool(p.Accelerate), globalEndpoint: obool(p.UseGlobalEndpoint),
		objectLambda: obool(p.UseObjectLambdaEndpoint), noAccessPoints: obool(p.DisableAccessPoints),
		noMRAP: obool(p.DisableMultiRegionAccessPoints), arnRegion: obool(p.UseArnRegion),
		expressControl: obool(p.UseS3ExpressControlEndpoint), noExpressSessionAuth: obool(p.DisableS3ExpressSessionAuth),
	}
}

// cachedResolver is an s3.EndpointResolverV2 that remembers the answers of
// another one (see above). Errors are not remembered.
type cachedResolver struct {
	next s3.EndpointResolverV2
	mu   sync.Mutex
	seen map[endpointKey]smithyendpoints.Endpoint
}

var _ s3.EndpointResolverV2 = (*cachedResolver)(nil)

func newCachedResolver(next s3.EndpointResolverV2) *cachedResolver {
	return &cachedResolver{next: next, seen: make(map[endpointKey]smithyendpoints.Endpoint)}
}

// ResolveEndpoint implements s3.EndpointResolverV2.
func (r *cachedResolver) ResolveEndpoint(ctx context.Context, params s3.EndpointParameters) (smithyendpoints.Endpoint, error) {
	k := keyOf(&params)
	r.mu.Lock()
	e, ok := r.seen[k]
	r.mu.Unlock()
	if ok {
		return copyEndpoint(e), nil
	}
	e, err := r.next.ResolveEndpoint(ctx, params)
	if err != nil {
		return e, err
	}
	r.mu.Lock()
	if len(r.seen) < maxCachedEndpoints {
		r.seen[k] = copyEndpoint(e)
	}
	r.mu.Unlock()
	return e, nil
}

// copyEndpoint copies e deeply enough that nothing the SDK changes in one
// request's endpoint (headers, properties, the auth options it rebases and
// renames in place) is shared with another's.
func copyEndpoint(e smithyendpoints.Endpoint) smithyendpoints.Endpoint {
	out := smithyendpoints.Endpoint{URI: e.URI, Headers: e.Headers.Clone()}
	out.Properties.SetAll(&e.Properties)
	if opts, ok := smithyauth.GetAuthOptions(&e.Properties); ok {
		cp := make([]*smithyauth.Option, len(opts))
		for i, o := range opts {
			c := &smithyauth.Option{SchemeID: o.SchemeID}
			c.IdentityProperties = copyProps(&o.IdentityProperties)
			c.SignerProperties = copyProps(&o.SignerProperties)
			cp[i] = c
		}
		smithyauth.SetAuthOptions(&out.Properties, cp)
	}
	return out
}

func copyProps(p *smithy.Properties) smithy.Properties {
	var out smithy.Properties
	out.SetAll(p)
	return out
}
