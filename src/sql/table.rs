//! [`TetTableProvider`]: one dataset of one file as a DataFusion table.

use super::axes::{Axis, arrow_type, axes_of};
use super::pruning::ZonePruning;
use crate::exec::{ChunkFeed, ScanSummary, TetScanExec};
use crate::format::FormatError;
use crate::io::{CatalogCache, TetSource};
use crate::plan::{AxisSelection, chunk_tasks, split_balanced};
use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::{Field, Schema, SchemaRef};
use async_trait::async_trait;
use datafusion::catalog::{Session, TableProvider};
use datafusion::common::stats::Precision;
use datafusion::common::{ColumnStatistics, DFSchema, Result, ScalarValue, Statistics, plan_err};
use datafusion::datasource::TableType;
use datafusion::error::DataFusionError;
use datafusion::execution::runtime_env::RuntimeEnv;
use datafusion::logical_expr::utils::conjunction;
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::prelude::SessionConfig;
use std::sync::Arc;

/// Name of the value column.
pub const VALUE_COLUMN: &str = "v";
/// Axis predicates are evaluated over the axis values in blocks of this many positions.
const EVAL_BLOCK: u64 = 1 << 16;

/// A table over one dataset of a `.tet` file: one column per axis, then `v`.
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
    source: Arc<TetSource>,
    dataset: usize,
    axes: Arc<Vec<Axis>>,
    schema: SchemaRef,
}

/// The outcome of [`TetTableProvider::plan_chunks`].
#[derive(Debug)]
pub(crate) struct PlannedChunks {
    pub selection: Vec<AxisSelection>,
    /// Chunk tasks in file order.
    pub tasks: Vec<crate::plan::ChunkTask>,
    pub pruned_by_zone: u64,
    /// Whether a value predicate was pushed (row counts are then not exact).
    pub value_filters: bool,
}

/// How a pushed filter is used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FilterKind {
    /// Depends on one axis column only: resolved exactly to positions.
    Axis(usize),
    /// Depends on `v` only: prunes chunks by zone maps, then DataFusion filters rows.
    Value,
    Other,
}

impl TetTableProvider {
    /// Open `location` (a local path or `file://` URL) and expose `dataset`, which may be
    /// omitted when the file has exactly one dataset.
    pub fn try_new(location: &str, dataset: Option<&str>) -> Result<Self> {
        let source = TetSource::open(location).map_err(to_df)?;
        Self::from_source(source, dataset)
    }

    /// Open `location` — a local path, or an object store URL read by range through the
    /// store `session` has registered for it (see [`crate::io::EnvObjectStoreRegistry`]) —
    /// and expose `dataset`. Files opened before in the session reuse their catalog when
    /// the object is unchanged.
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
        Self::for_source(open_source_with(config, runtime, location).await?, dataset).await
    }

    /// Expose `dataset` of an already opened file, fetching what the axes need (an object
    /// store file's coordinate variables) on demand.
    pub async fn for_source(source: Arc<TetSource>, dataset: Option<&str>) -> Result<Self> {
        let ds = Self::pick(&source, dataset)?;
        let file = source.catalog.clone();
        let axes = source
            .resolve(|r| axes_of(r, &file, &file.datasets[ds]))
            .await
            .map_err(to_df)?;
        Self::build(source, ds, axes)
    }

    /// Expose `dataset` of an already opened file (for object stores, prefer
    /// [`TetTableProvider::for_source`], which fetches coordinate variables as needed).
    pub fn from_source(source: Arc<TetSource>, dataset: Option<&str>) -> Result<Self> {
        let ds = Self::pick(&source, dataset)?;
        let file = source.catalog.clone();
        let axes =
            axes_of(source.as_ref(), &file, &file.datasets[ds]).map_err(|e| to_df(e.in_file(&source.location)))?;
        Self::build(source, ds, axes)
    }

    /// The directory position of `dataset` (or of the only dataset).
    fn pick(source: &TetSource, dataset: Option<&str>) -> Result<usize> {
        let file = &source.catalog;
        match dataset {
            Some(name) => Ok(file.dataset(name).map_err(|e| to_df(e.in_file(&source.location)))?.id),
            None if file.datasets.len() == 1 => Ok(0),
            None => plan_err!(
                "{}: the file has {} datasets ({}); name one, e.g. tet('{}', '{}')",
                source.location,
                file.datasets.len(),
                file.dataset_list(),
                source.location,
                file.datasets.first().map(|d| d.name()).unwrap_or("")
            ),
        }
    }

    fn build(source: Arc<TetSource>, ds: usize, axes: Vec<Axis>) -> Result<Self> {
        let file = source.catalog.clone();
        let ds = &file.datasets[ds];
        let mut fields: Vec<Field> = axes.iter().map(|a| Field::new(&a.name, a.data_type(), false)).collect();
        if axes.iter().any(|a| a.name == VALUE_COLUMN) {
            return plan_err!(
                "{}: dataset {:?} has an axis named {VALUE_COLUMN:?}, which clashes with the value column",
                source.location,
                ds.name()
            );
        }
        fields.push(Field::new(
            VALUE_COLUMN,
            arrow_type(ds.dtype()),
            ds.fill_value_le().is_some(),
        ));
        Ok(TetTableProvider {
            dataset: ds.id,
            source,
            axes: Arc::new(axes),
            schema: Arc::new(Schema::new(fields)),
        })
    }

    /// The opened file.
    pub fn source(&self) -> &Arc<TetSource> {
        &self.source
    }

    /// The dataset's name.
    pub fn dataset_name(&self) -> &str {
        self.source.catalog.datasets[self.dataset].name()
    }

    /// The axis columns.
    pub fn axes(&self) -> &[Axis] {
        &self.axes
    }

    fn classify(&self, e: &Expr) -> FilterKind {
        if e.is_volatile() {
            return FilterKind::Other;
        }
        let cols = e.column_refs();
        if cols.len() != 1 {
            return FilterKind::Other;
        }
        let name = &cols.iter().next().map(|c| c.name.clone()).unwrap_or_default();
        if name == VALUE_COLUMN {
            return FilterKind::Value;
        }
        match self.axes.iter().position(|a| &a.name == name) {
            Some(d) => FilterKind::Axis(d),
            None => FilterKind::Other,
        }
    }

    fn has_zone_maps(&self) -> bool {
        self.source.catalog.datasets[self.dataset].zones.is_some()
    }

    /// Positions of axis `d` where `expr` (over that axis column alone) is true.
    fn resolve_axis(&self, state: &dyn Session, d: usize, expr: &Expr) -> Result<AxisSelection> {
        let axis = &self.axes[d];
        let schema = Arc::new(Schema::new(vec![self.schema.field(d).clone()]));
        let df_schema = DFSchema::try_from(schema.clone())?;
        let phys = state.create_physical_expr(expr.clone(), &df_schema)?;
        let mut ranges = Vec::new();
        let mut lo = 0;
        while lo < axis.extent {
            let hi = (lo + EVAL_BLOCK).min(axis.extent);
            let batch = RecordBatch::try_new(schema.clone(), vec![axis.values_range(lo, hi)])?;
            let mask = phys.evaluate(&batch)?.into_array(batch.num_rows())?;
            let mask = mask
                .as_boolean_opt()
                .ok_or_else(|| DataFusionError::Plan(format!("filter {expr} on axis {} is not boolean", axis.name)))?;
            let mut run: Option<u64> = None;
            for i in 0..mask.len() {
                let on = mask.is_valid(i) && mask.value(i);
                match (on, run) {
                    (true, None) => run = Some(lo + i as u64),
                    (false, Some(s)) => {
                        ranges.push((s, lo + i as u64));
                        run = None;
                    }
                    _ => {}
                }
            }
            if let Some(s) = run {
                ranges.push((s, hi));
            }
            lo = hi;
        }
        Ok(AxisSelection::from_sorted_ranges(axis.extent, ranges))
    }

    /// Resolve pushed filters: per-axis selections from axis predicates, the chunk tasks
    /// they touch (in file order), minus those zone maps rule out for value predicates.
    pub(crate) fn plan_chunks(&self, state: &dyn Session, filters: &[Expr]) -> Result<PlannedChunks> {
        let file = &self.source.catalog;
        let ds = &file.datasets[self.dataset];
        let mut sel: Vec<AxisSelection> = self.axes.iter().map(|a| AxisSelection::all(a.extent)).collect();
        let mut value_filters = Vec::new();
        for f in filters {
            match self.classify(f) {
                FilterKind::Axis(d) => sel[d] = sel[d].intersect(&self.resolve_axis(state, d, f)?),
                FilterKind::Value => value_filters.push(f.clone()),
                FilterKind::Other => {}
            }
        }
        let mut tasks = chunk_tasks(&ds.record, &sel);
        let selected = tasks.len() as u64;
        let has_value_filters = !value_filters.is_empty();
        if let (Some(pred), Some(zones)) = (conjunction(value_filters), &ds.zones) {
            let df_schema = DFSchema::try_from(self.schema.clone())?;
            let phys = state.create_physical_expr(pred, &df_schema)?;
            let keep = ZonePruning::new(&tasks, zones, ds.dtype(), self.schema.clone()).prune(phys)?;
            let mut k = keep.into_iter();
            tasks.retain(|_| k.next().unwrap_or(true));
        }
        tasks.sort_by_key(|t| file.chunk(ds, t.linear).1.payload_offset);
        Ok(PlannedChunks {
            pruned_by_zone: selected - tasks.len() as u64,
            selection: sel,
            tasks,
            value_filters: has_value_filters,
        })
    }

    /// Directory position of the dataset.
    pub fn dataset_index(&self) -> usize {
        self.dataset
    }

    /// Shared axes.
    pub(crate) fn axes_arc(&self) -> Arc<Vec<Axis>> {
        self.axes.clone()
    }

    /// The scan of `projection` (indices into the table schema) over the chunks of
    /// `feed`; `sel` is the per-axis selection they were cut from.
    pub(crate) fn scan_exec(
        &self,
        sel: Vec<AxisSelection>,
        feed: ChunkFeed,
        pruned_by_zone: u64,
        value_filters: bool,
        projection: Vec<usize>,
        limit: Option<usize>,
    ) -> Result<TetScanExec> {
        let ds = &self.source.catalog.datasets[self.dataset];
        let schema = Arc::new(self.schema.project(&projection)?);
        let statistics = self.statistics_for(&sel, !value_filters)?.project(Some(&projection));
        let selection = self
            .axes
            .iter()
            .zip(&sel)
            .filter(|(_, s)| !s.is_all())
            .map(|(a, s)| format!("{}: {}/{}", a.name, s.count(), a.extent))
            .collect();
        let summary = ScanSummary {
            chunks_total: ds.record.chunk_count,
            chunks_selected: feed.len() as u64,
            chunks_pruned_by_zone: pruned_by_zone,
            selection,
            axis_selection: sel,
            value_filters,
            statistics,
        };
        Ok(TetScanExec::new(
            self.source.clone(),
            self.dataset,
            self.axes.clone(),
            projection,
            schema,
            feed,
            limit,
            summary,
        ))
    }

    fn statistics_for(&self, sel: &[AxisSelection], exact: bool) -> Result<Statistics> {
        let rows: u64 = sel.iter().map(|s| s.count()).product();
        let p = |v| {
            if exact {
                Precision::Exact(v)
            } else {
                Precision::Inexact(v)
            }
        };
        let mut cols = Vec::with_capacity(self.schema.fields().len());
        for (d, axis) in self.axes.iter().enumerate() {
            let mut c = ColumnStatistics::new_unknown();
            c.null_count = Precision::Exact(0);
            if rows > 0
                && let Some((lo, hi)) = sel[d].bounds()
            {
                match &axis.values {
                    None => {
                        c.min_value = Precision::Exact(ScalarValue::Int64(Some(lo as i64)));
                        c.max_value = Precision::Exact(ScalarValue::Int64(Some(hi as i64)));
                    }
                    Some(_) if sel[d].count() <= 1 << 20 => {
                        let positions: Vec<u64> = sel[d].positions().collect();
                        let vals = axis.take(&positions)?;
                        if let (Ok(mn), Ok(mx)) = (min_scalar(&vals), max_scalar(&vals)) {
                            c.min_value = Precision::Exact(mn);
                            c.max_value = Precision::Exact(mx);
                        }
                    }
                    Some(_) => {}
                }
            }
            cols.push(c);
        }
        cols.push(ColumnStatistics::new_unknown());
        Ok(Statistics {
            num_rows: p(rows as usize),
            total_byte_size: Precision::Absent,
            column_statistics: cols,
        })
    }
}

fn min_scalar(a: &Arc<dyn Array>) -> Result<ScalarValue> {
    extreme(a, true)
}
fn max_scalar(a: &Arc<dyn Array>) -> Result<ScalarValue> {
    extreme(a, false)
}
fn extreme(a: &Arc<dyn Array>, min: bool) -> Result<ScalarValue> {
    let mut best: Option<ScalarValue> = None;
    for i in 0..a.len() {
        let v = ScalarValue::try_from_array(a, i)?;
        best = match best {
            None => Some(v),
            Some(b) => {
                let keep_new = match v.partial_cmp(&b) {
                    Some(std::cmp::Ordering::Less) => min,
                    Some(std::cmp::Ordering::Greater) => !min,
                    _ => false,
                };
                Some(if keep_new { v } else { b })
            }
        };
    }
    best.ok_or_else(|| DataFusionError::Internal("empty axis".into()))
}

/// Format errors surface as DataFusion errors carrying the message.
pub(crate) fn to_df(e: FormatError) -> DataFusionError {
    DataFusionError::External(Box::new(e))
}

/// Open `location` for `session`: its object store registry and, when [`crate::register`]
/// installed one, its [`CatalogCache`].
pub async fn open_source(session: &dyn Session, location: &str) -> Result<Arc<TetSource>> {
    open_source_with(session.config(), session.runtime_env(), location).await
}

/// [`open_source`] from a session's parts.
pub async fn open_source_with(config: &SessionConfig, runtime: &RuntimeEnv, location: &str) -> Result<Arc<TetSource>> {
    let cache = config.get_extension::<CatalogCache>();
    TetSource::open_in(runtime, cache.as_deref(), location)
        .await
        .map_err(to_df)
}

/// Run `fut` from synchronous planning code (table functions are synchronous in
/// DataFusion 55): on a multi-threaded tokio runtime the worker steps aside while it waits.
pub(crate) fn block_on<T>(what: &str, fut: impl std::future::Future<Output = Result<T>>) -> Result<T> {
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current() {
        Ok(h) if h.runtime_flavor() == RuntimeFlavor::MultiThread => tokio::task::block_in_place(|| h.block_on(fut)),
        _ => plan_err!(
            "{what} reads an object store while planning, which needs a multi-threaded tokio runtime; \
             use CREATE EXTERNAL TABLE ... STORED AS TET or TetTableProvider::open instead"
        ),
    }
}

#[async_trait]
impl TableProvider for TetTableProvider {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    fn supports_filters_pushdown(&self, filters: &[&Expr]) -> Result<Vec<TableProviderFilterPushDown>> {
        Ok(filters
            .iter()
            .map(|f| match self.classify(f) {
                FilterKind::Axis(_) => TableProviderFilterPushDown::Exact,
                FilterKind::Value if self.has_zone_maps() => TableProviderFilterPushDown::Inexact,
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
        let file = &self.source.catalog;
        let ds = &file.datasets[self.dataset];
        let planned = self.plan_chunks(state, filters)?;
        let projection: Vec<usize> = match projection {
            Some(p) => p.clone(),
            None => (0..self.schema.fields().len()).collect(),
        };
        let reads_values = projection.contains(&self.axes.len());
        // Balanced by stored bytes (or cells when no payload is read).
        let target = state.config().target_partitions().max(1);
        let partitions = split_balanced(planned.tasks, target, |t| {
            if reads_values {
                file.chunk(ds, t.linear).1.stored_byte_len
            } else {
                t.cells
            }
        });
        Ok(Arc::new(self.scan_exec(
            planned.selection,
            ChunkFeed::new(partitions)?,
            planned.pruned_by_zone,
            planned.value_filters,
            projection,
            limit,
        )?))
    }
}
