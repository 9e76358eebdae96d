// Package azstore is the storage.Bucket driver for Azure Blob Storage, built
// on the Azure SDK for Go (azblob).
//
// # URLs
//
//	az://CONTAINER/PREFIX
//	azure://CONTAINER/PREFIX     (MosaicML Streaming's form; the same)
//
// Keys are blob names relative to PREFIX. The storage account comes from
// the environment.
//
// # Environment
//
// The first of these that is set decides how the driver connects:
//
//  1. AZURE_STORAGE_CONNECTION_STRING: a connection string with an account
//     key or a SAS and, for emulators and sovereign clouds, the endpoint
//     (BlobEndpoint=...).
//  2. AZURE_STORAGE_ACCOUNT (or AZURE_ACCOUNT_NAME, MosaicML's name) with
//     one of: AZURE_STORAGE_KEY (or AZURE_STORAGE_ACCOUNT_KEY,
//     AZURE_ACCOUNT_ACCESS_KEY) for shared-key signing; AZURE_STORAGE_SAS_TOKEN
//     for a shared access signature; or neither, for DefaultAzureCredential
//     (service principal in AZURE_CLIENT_ID/AZURE_TENANT_ID/
//     AZURE_CLIENT_SECRET or AZURE_CLIENT_CERTIFICATE_PATH, workload
//     identity on AKS, managed identity, Azure CLI, Azure Developer CLI),
//     which refreshes its tokens itself. The endpoint is
//     https://ACCOUNT.blob.core.windows.net/ unless AZURE_STORAGE_BLOB_ENDPOINT
//     names another.
//
// # Azurite
//
// Point the driver at the Azurite emulator with a connection string naming
// its well-known development account and blob endpoint:
//
//	AZURE_STORAGE_CONNECTION_STRING='DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==;BlobEndpoint=http://127.0.0.1:10000/devstoreaccount1;'
//
// (.ci/services.sh starts Azurite this way; run it with
// --skipApiVersionCheck, since the SDK may speak a newer API version than
// the emulator knows.)
//
// # Retries
//
// The SDK's retry policy is switched off (MaxRetries < 0): failures surface
// as errors that storage.IsRetryable classifies (HTTP failures are
// *storage.HTTPError wrapping *azcore.ResponseError), so that retries,
// backoff and their budget live in the storage retry decorator only.
//
// # Errors
//
// A missing blob or container (404) matches storage.ErrNotExist; refused
// access (401/403) matches storage.ErrPermission and names the credential
// source in use. errors.As reaches *azcore.ResponseError.
//
// # Uploads
//
// Writers stream through the SDK's block upload: blocks of
// WriteOptions.PartSize (default 8 MiB) are staged in parallel and the
// blob appears only when the block list is committed by Close.
package azstore
