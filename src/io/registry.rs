//! [`EnvObjectStoreRegistry`]: object stores built on first use from the environment.

use datafusion::common::{Result, exec_datafusion_err};
use datafusion::execution::object_store::{DefaultObjectStoreRegistry, ObjectStoreRegistry};
use object_store::ObjectStore;
use object_store::aws::AmazonS3Builder;
use object_store::azure::MicrosoftAzureBuilder;
use object_store::gcp::GoogleCloudStorageBuilder;
use object_store::http::HttpBuilder;
use object_store::{ClientOptions, RetryConfig};
use std::sync::Arc;
use url::Url;

/// An [`ObjectStoreRegistry`] that, when asked for a store nobody registered, builds one
/// from the URL and the usual environment variables and keeps it:
///
/// - `s3://bucket/…`: `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`,
///   `AWS_REGION`, `AWS_ENDPOINT` (S3-compatible servers), `AWS_ALLOW_HTTP`,
///   `AWS_SKIP_SIGNATURE=true` (anonymous public buckets), …
/// - `gs://bucket/…`: `GOOGLE_SERVICE_ACCOUNT`, `GOOGLE_APPLICATION_CREDENTIALS`, …
/// - `az://container/…` (and `abfs(s)://`, `azure://`): `AZURE_STORAGE_ACCOUNT_NAME`,
///   `AZURE_STORAGE_ACCOUNT_KEY`, `AZURE_STORAGE_USE_EMULATOR`, …
/// - `http(s)://host/…`: plain GETs with `Range`.
///
/// Stores registered explicitly (`SessionContext::register_object_store`, or by
/// datafusion-cli for `CREATE EXTERNAL TABLE … OPTIONS ('aws.endpoint' …)`) take
/// precedence. `tet-sql` and the Ballista binaries use this registry.
#[derive(Debug)]
pub struct EnvObjectStoreRegistry {
    inner: Arc<dyn ObjectStoreRegistry>,
    retry: Option<RetryConfig>,
}

impl Default for EnvObjectStoreRegistry {
    fn default() -> Self {
        Self::new(Arc::new(DefaultObjectStoreRegistry::new()))
    }
}

impl EnvObjectStoreRegistry {
    /// Wrap `inner`, which keeps the stores (and answers first).
    pub fn new(inner: Arc<dyn ObjectStoreRegistry>) -> Self {
        EnvObjectStoreRegistry { inner, retry: None }
    }

    /// Use `retry` instead of object_store's default retry policy for the stores built here.
    pub fn with_retry(mut self, retry: RetryConfig) -> Self {
        self.retry = Some(retry);
        self
    }

    /// Build the store for `url` from the environment.
    pub fn store_from_env(&self, url: &Url) -> Result<Arc<dyn ObjectStore>> {
        let retry = self.retry.clone().unwrap_or_default();
        let store: Arc<dyn ObjectStore> = match url.scheme() {
            "s3" | "s3a" => Arc::new(
                AmazonS3Builder::from_env()
                    .with_url(url.as_str())
                    .with_retry(retry)
                    .build()?,
            ),
            "gs" => Arc::new(
                GoogleCloudStorageBuilder::from_env()
                    .with_url(url.as_str())
                    .with_retry(retry)
                    .build()?,
            ),
            "az" | "adl" | "azure" | "abfs" | "abfss" => Arc::new(
                MicrosoftAzureBuilder::from_env()
                    .with_url(url.as_str())
                    .with_retry(retry)
                    .build()?,
            ),
            "http" | "https" => Arc::new(
                HttpBuilder::new()
                    .with_url(url.origin().ascii_serialization())
                    .with_client_options(ClientOptions::new().with_allow_http(true))
                    .with_retry(retry)
                    .build()?,
            ),
            other => {
                return Err(exec_datafusion_err!(
                    "no object store for {other}:// URLs (supported: s3, gs, az, http, https)"
                ));
            }
        };
        Ok(store)
    }
}

impl ObjectStoreRegistry for EnvObjectStoreRegistry {
    fn register_store(&self, url: &Url, store: Arc<dyn ObjectStore>) -> Option<Arc<dyn ObjectStore>> {
        self.inner.register_store(url, store)
    }

    fn deregister_store(&self, url: &Url) -> Result<Arc<dyn ObjectStore>> {
        self.inner.deregister_store(url)
    }

    fn get_store(&self, url: &Url) -> Result<Arc<dyn ObjectStore>> {
        if let Ok(store) = self.inner.get_store(url) {
            return Ok(store);
        }
        let store = self.store_from_env(url)?;
        self.inner.register_store(url, store);
        self.inner.get_store(url)
    }
}
