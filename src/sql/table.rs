//! [`TetTableProvider`]: one dataset of one file, or several datasets on one grid, as a
//! DataFusion table.

use super::archive::open_table;
use super::session_options::TetConfig;
use crate::exec::{ChunkFeed, TetScanExec};
use crate::io::TetSource;
use crate::plan::{AccessPlan, Axis, FilterKind, Limits, TableModel, classify};
use arrow::datatypes::SchemaRef;
use async_trait::async_trait;
use datafusion::catalog::{Session, TableProvider};
use datafusion::common::Result;
use datafusion::datasource::TableType;
use datafusion::execution::runtime_env::RuntimeEnv;
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::prelude::SessionConfig;
use std::sync::Arc;

/// A table over one dataset of a `.tet` file: one column per axis, then `v`; or over
/// several datasets of one shape and dimension names ([`TetTableProvider::open_datasets`]):
/// the axes, then one value column per dataset, named by the dataset.
///
/// [`TetTableProvider::open`] opens local paths and object store URLs (`s3://`, `gs://`,
/// `az://`, `http(s)://`) through a session; [`TetTableProvider::try_new`] is the
/// synchronous shortcut for local files (memory-mapped).
///
/// ```no_run
/// # async fn demo() -> datafusion::error::Result<()> {
/// use datafusion::prelude::SessionContext;
/// use datafusion_tet::TetTableProvider;
/// use std::sync::Arc;
/// let ctx = SessionContext::new();
/// let table = TetTableProvider::try_new("weather.tet", Some("temp"))?;
/// ctx.register_table("temp", Arc::new(table))?;
/// ctx.sql("SELECT lat, avg(v) FROM temp GROUP BY lat").await?.show().await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct TetTableProvider {
    table: Arc<TableModel>,
}

impl TetTableProvider {
    /// Open `location` (a local path or `file://` URL) and expose `dataset`, which may be
    /// omitted when the file has exactly one dataset.
    pub fn try_new(location: &str, dataset: Option<&str>) -> Result<Self> {
        let source = TetSource::open(location)?;
        Self::from_source(source, dataset)
    }

    /// Open `location` — a local path, or an object store URL read by range through the
    /// store `session` has registered for it (see [`crate::io::EnvObjectStoreRegistry`]) —
    /// and expose `dataset`. Files opened before in the session reuse their parsed file when
    /// the object is unchanged.
    ///
    /// `location` may name an archive: a glob (`era5/*.tet`, `s3://bucket/era5/2024-*.tet`,
    /// `**` for subfolders) or a folder or prefix ending in `/`. Its files are listed
    /// through the session's stores and concatenated along the one axis whose coordinates
    /// differ between them (or `tet.concat_axis`), as xarray's `combine_by_coords` does.
    ///
    /// ```no_run
    /// # async fn demo() -> datafusion::error::Result<()> {
    /// use datafusion::prelude::SessionContext;
    /// use datafusion_tet::TetTableProvider;
    /// use std::sync::Arc;
    /// let ctx = SessionContext::new();
    /// datafusion_tet::register(&ctx);
    /// // ctx.register_object_store(&url::Url::parse("s3://bucket")?, store);
    /// let table = TetTableProvider::open(&ctx.state(), "s3://bucket/era5.tet", Some("temp")).await?;
    /// ctx.register_table("temp", Arc::new(table))?;
    /// # Ok(()) }
    /// ```
    pub async fn open(session: &dyn Session, location: &str, dataset: Option<&str>) -> Result<Self> {
        Self::open_with(session.config(), session.runtime_env(), location, dataset).await
    }

    /// [`TetTableProvider::open`] from a session's parts, e.g. the `TaskContext` a plan is
    /// decoded with.
    pub async fn open_with(
        config: &SessionConfig,
        runtime: &RuntimeEnv,
        location: &str,
        dataset: Option<&str>,
    ) -> Result<Self> {
        let names: Vec<&str> = dataset.into_iter().collect();
        Ok(Self::from_model(
            open_table(config, runtime, location, &names, None).await?,
        ))
    }

    /// Open `location` (as [`TetTableProvider::open`]) and expose the datasets `names`
    /// (one or more, of one shape and dimension names) as one table: the axes of the first,
    /// then a value column per dataset named by it (one name gives the table of that dataset,
    /// its value column `v`).
    ///
    /// ```no_run
    /// # async fn demo() -> datafusion::error::Result<()> {
    /// use datafusion::prelude::SessionContext;
    /// use datafusion_tet::TetTableProvider;
    /// use std::sync::Arc;
    /// let ctx = SessionContext::new();
    /// let table = TetTableProvider::open_datasets(&ctx.state(), "era5.tet", &["t2m", "sst"]).await?;
    /// ctx.register_table("era5", Arc::new(table))?;
    /// ctx.sql("SELECT avg(t2m - sst) FROM era5").await?.show().await?;
    /// # Ok(()) }
    /// ```
    pub async fn open_datasets(session: &dyn Session, location: &str, names: &[&str]) -> Result<Self> {
        let (config, runtime) = (session.config(), session.runtime_env());
        Ok(Self::from_model(
            open_table(config, runtime, location, names, None).await?,
        ))
    }

    /// The datasets `names` of an already opened file whose axes can be read without
    /// fetching, as one table (see [`TetTableProvider::open_datasets`]), within the
    /// default [`Limits`].
    pub fn from_datasets(source: Arc<TetSource>, names: &[&str]) -> Result<Self> {
        Ok(Self::from_model(TableModel::from_datasets(
            source,
            names,
            Limits::default(),
        )?))
    }

    /// Expose `dataset` of an already opened file, fetching what the axes need (an object
    /// store file's coordinate variables) on demand.
    pub async fn for_source(source: Arc<TetSource>, dataset: Option<&str>) -> Result<Self> {
        Ok(Self::from_model(
            TableModel::for_source(source, dataset, Limits::default()).await?,
        ))
    }

    /// Expose `dataset` of an already opened file (for object stores, prefer
    /// [`TetTableProvider::for_source`], which fetches coordinate variables as needed),
    /// within the default [`Limits`].
    pub fn from_source(source: Arc<TetSource>, dataset: Option<&str>) -> Result<Self> {
        Ok(Self::from_model(TableModel::from_source(
            source,
            dataset,
            Limits::default(),
        )?))
    }

    /// The table of a dataset model.
    pub fn from_model(table: TableModel) -> Self {
        Self::from_shared(Arc::new(table))
    }

    /// The table of a shared dataset model.
    pub fn from_shared(table: Arc<TableModel>) -> Self {
        TetTableProvider { table }
    }

    /// The table model: file, dataset, axes and schema.
    pub fn model(&self) -> &Arc<TableModel> {
        &self.table
    }

    /// The opened file.
    pub fn source(&self) -> &Arc<TetSource> {
        &self.table.source
    }

    /// The (first) dataset's name.
    pub fn dataset_name(&self) -> &str {
        self.table.dataset().name()
    }

    /// The axis columns.
    pub fn axes(&self) -> &[Axis] {
        &self.table.axes
    }
}

#[async_trait]
impl TableProvider for TetTableProvider {
    fn schema(&self) -> SchemaRef {
        self.table.schema.clone()
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    fn supports_filters_pushdown(&self, filters: &[&Expr]) -> Result<Vec<TableProviderFilterPushDown>> {
        let has_zone_maps = match &self.table.files {
            Some(f) => f
                .members
                .iter()
                .any(|m| m.table.values.iter().any(|v| v.dataset().zones.is_some())),
            None => self.table.values.iter().any(|v| v.dataset().zones.is_some()),
        };
        Ok(filters
            .iter()
            .map(|f| match classify(&self.table, f) {
                FilterKind::Axis(_) => TableProviderFilterPushDown::Exact,
                FilterKind::Value if has_zone_maps => TableProviderFilterPushDown::Inexact,
                _ => TableProviderFilterPushDown::Unsupported,
            })
            .collect())
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let config = TetConfig::of(state.config());
        let table = &config.table(&self.table);
        let access = AccessPlan::build(table, state, filters)?;
        let projection: Vec<usize> = match projection {
            Some(p) => p.clone(),
            None => (0..table.schema.fields().len()).collect(),
        };
        let read: Vec<usize> = projection.iter().filter_map(|&c| Some(table.value_at(c)?.0)).collect();
        let partitions = access.partitions(table, state.config().target_partitions(), &read, &[]);
        Ok(Arc::new(TetScanExec::try_new(
            table.clone(),
            ChunkFeed::new(access, &partitions)?,
            projection,
            limit,
            config.fetch_options(),
        )?))
    }
}
