//! [`TetLogicalCodec`] and [`TetPhysicalCodec`]: our tables and execution plans in
//! Ballista's plan serialization.
//!
//! Our bytes start with [`TAG`] (a magic and a wire version) and a kind byte, followed by
//! JSON; anything else is handed to Ballista's own codecs, which we wrap. A plan names
//! its file by location, dataset and [`SourceVersion`]; the process decoding it reopens the
//! file (the scheduler to plan, executors to read their chunks) and refuses a different
//! version. Chunk tasks travel as chunk ids and are rebuilt from the per-axis selection,
//! so a plan stays small and a damaged one cannot name cells outside the dataset. Which
//! partition reads which chunks is our nodes' child (see [`ChunkFeed`]), a plain
//! `DataSourceExec` that Ballista restricts to each task's partitions.

use crate::exec::{AggFunc, AggSpec, AggregatePlan, ChunkFeed, TetAggregateExec, TetScanExec};
use crate::io::{SourceVersion, TetSource, remote_url};
use crate::plan::{AxisSelection, tasks_by_id};
use crate::sql::{CatalogKind, TetCatalogTable, TetPartialAggregate, TetTableProvider, merge_functions};
use arrow::datatypes::{DataType, SchemaRef};
use ballista_core::serde::{BallistaLogicalExtensionCodec, BallistaPhysicalExtensionCodec};
use datafusion::catalog::TableProvider;
use datafusion::common::{Result, TableReference, plan_datafusion_err};
use datafusion::execution::TaskContext;
use datafusion::logical_expr::{AggregateUDF, Expr, Extension, LogicalPlan};
use datafusion::physical_plan::ExecutionPlan;
use datafusion_proto::bytes::Serializeable;
use datafusion_proto::logical_plan::LogicalExtensionCodec;
use datafusion_proto::physical_plan::{PhysicalExtensionCodec, PhysicalProtoConverterExtension};
use serde::{Deserialize, Serialize};
use std::str::FromStr;
use std::sync::Arc;

/// The first bytes of everything we encode: `TET`, then the wire version.
pub const TAG: &[u8; 4] = b"TET\x01";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
enum Kind {
    Table = 1,
    PartialAggregate = 2,
    Scan = 3,
    Aggregate = 4,
    Function = 5,
    Catalog = 6,
}

impl Kind {
    fn of(b: u8) -> Option<Kind> {
        [
            Kind::Table,
            Kind::PartialAggregate,
            Kind::Scan,
            Kind::Aggregate,
            Kind::Function,
            Kind::Catalog,
        ]
        .into_iter()
        .find(|k| *k as u8 == b)
    }
}

/// A dataset of a file, as a plan names it.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct FileRef {
    location: String,
    dataset: String,
    version: SourceVersion,
}

/// `tet_datasets()` (`chunks_of: None`) or `tet_chunks()` (`Some(dataset or all)`).
#[derive(Debug, Serialize, Deserialize)]
struct CatalogWire {
    location: String,
    version: SourceVersion,
    chunks_of: Option<Option<String>>,
}

#[derive(Debug, Serialize, Deserialize)]
struct PlanWire {
    groups: Vec<usize>,
    /// (function, input type) per aggregate.
    aggs: Vec<(String, String)>,
}

#[derive(Debug, Serialize, Deserialize)]
struct PartialAggregateWire {
    file: FileRef,
    /// Pushed axis filters, each in DataFusion's protobuf encoding.
    filters: Vec<Vec<u8>>,
    plan: PlanWire,
}

#[derive(Debug, Serialize, Deserialize)]
struct ScanWire {
    file: FileRef,
    projection: Vec<usize>,
    selection: Vec<Vec<(u64, u64)>>,
    /// Every planned chunk (the node's child says which partition reads which).
    chunks: Vec<u64>,
    pruned_by_zone: u64,
    value_filters: bool,
    limit: Option<usize>,
}

#[derive(Debug, Serialize, Deserialize)]
struct AggregateWire {
    file: FileRef,
    plan: PlanWire,
    selection: Vec<Vec<(u64, u64)>>,
    chunks: Vec<u64>,
}

fn encode<T: Serialize>(kind: Kind, body: &T, buf: &mut Vec<u8>) -> Result<()> {
    buf.extend_from_slice(TAG);
    buf.push(kind as u8);
    serde_json::to_writer(buf, body).map_err(|e| plan_datafusion_err!("encoding a tet plan node: {e}"))
}

/// Our kind and body when `buf` is ours; `None` when it is someone else's.
fn ours(buf: &[u8]) -> Result<Option<(Kind, &[u8])>> {
    let Some(rest) = buf.strip_prefix(&TAG[..3]) else {
        return Ok(None);
    };
    match rest {
        [v, ..] if *v != TAG[3] => Err(plan_datafusion_err!(
            "a tet plan node of wire version {v}, this build reads version {}; \
             run the same datafusion-tet on the client, scheduler and executors",
            TAG[3]
        )),
        [_, k, body @ ..] => match Kind::of(*k) {
            Some(kind) => Ok(Some((kind, body))),
            None => Err(plan_datafusion_err!("a tet plan node of unknown kind {k}")),
        },
        _ => Err(plan_datafusion_err!("a truncated tet plan node")),
    }
}

fn decode<'a, T: Deserialize<'a>>(what: &str, body: &'a [u8]) -> Result<T> {
    serde_json::from_slice(body).map_err(|e| plan_datafusion_err!("decoding a tet {what}: {e}"))
}

/// Plans name local files by absolute path (each process has its own working
/// directory) and object store files by URL.
fn file_ref(source: &TetSource, dataset: usize) -> FileRef {
    FileRef {
        location: source.resolved.clone(),
        dataset: source.catalog.datasets[dataset].name().to_owned(),
        version: source.version(),
    }
}

fn file_of(table: &TetTableProvider) -> FileRef {
    file_ref(table.source(), table.dataset_index())
}

/// Reopen the file at `location` in the decoding process and check it is `version`.
fn open_file(location: &str, version: &SourceVersion, ctx: &TaskContext) -> Result<Arc<TetSource>> {
    let source = if remote_url(location).map_err(crate::sql::to_df)?.is_none() {
        TetSource::open(location).map_err(crate::sql::to_df)?
    } else {
        crate::sql::block_on(
            "decoding a plan",
            crate::sql::open_source_with(ctx.session_config(), ctx.runtime_env().as_ref(), location),
        )?
    };
    source.check_version(version).map_err(crate::sql::to_df)?;
    Ok(source)
}

/// Reopen the file a plan names, in the decoding process, and check it is the version
/// the plan was made for.
fn open_table(file: &FileRef, ctx: &TaskContext) -> Result<TetTableProvider> {
    let source = open_file(&file.location, &file.version, ctx)?;
    if source.is_remote() {
        crate::sql::block_on(
            "decoding a plan",
            TetTableProvider::for_source(source, Some(&file.dataset)),
        )
    } else {
        TetTableProvider::from_source(source, Some(&file.dataset))
    }
}

fn plan_wire(plan: &AggregatePlan) -> PlanWire {
    PlanWire {
        groups: plan.groups.clone(),
        aggs: plan
            .aggs
            .iter()
            .map(|a| (a.func.name().to_owned(), a.input_type.to_string()))
            .collect(),
    }
}

fn plan_of(w: PlanWire, table: &TetTableProvider) -> Result<AggregatePlan> {
    let aggs = w
        .aggs
        .iter()
        .map(|(f, t)| {
            let func = AggFunc::ALL
                .into_iter()
                .find(|a| a.name() == f)
                .ok_or_else(|| plan_datafusion_err!("a tet aggregate names an unknown function {f:?}"))?;
            let input_type = DataType::from_str(t)
                .map_err(|e| plan_datafusion_err!("a tet aggregate names an unknown type {t:?}: {e}"))?;
            Ok(AggSpec { func, input_type })
        })
        .collect::<Result<Vec<_>>>()?;
    let plan = AggregatePlan { groups: w.groups, aggs };
    crate::sql::check_plan(&plan, table).map_err(|e| {
        plan_datafusion_err!(
            "{}: a tet aggregate does not fit the dataset: {e}",
            table.source().location
        )
    })?;
    Ok(plan)
}

fn selection_wire(sel: &[AxisSelection]) -> Vec<Vec<(u64, u64)>> {
    sel.iter().map(|s| s.ranges().to_vec()).collect()
}

/// The selection and chunk feed a plan names, checked against the dataset.
fn feed_of(
    table: &TetTableProvider,
    selection: &[Vec<(u64, u64)>],
    ids: Vec<u64>,
    inputs: &[Arc<dyn ExecutionPlan>],
) -> Result<(Vec<AxisSelection>, ChunkFeed)> {
    let bad = |e: String| plan_datafusion_err!("{}: a tet plan's chunk selection: {e}", table.source().location);
    let axes = table.axes();
    if selection.len() != axes.len() {
        return Err(bad(format!("{} axes, the dataset has {}", selection.len(), axes.len())));
    }
    let sel = axes
        .iter()
        .zip(selection)
        .map(|(a, r)| AxisSelection::try_from_ranges(a.extent, r).map_err(|e| format!("axis {}: {e}", a.name)))
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(bad)?;
    let rec = &table.source().catalog.datasets[table.dataset_index()].record;
    let tasks = tasks_by_id(rec, &sel, &[ids]).map_err(bad)?.pop().unwrap_or_default();
    let [input] = inputs else {
        return Err(plan_datafusion_err!(
            "a tet plan node with {} inputs, expected 1",
            inputs.len()
        ));
    };
    Ok((sel, ChunkFeed::from_parts(input.clone(), tasks)?))
}

/// Our merge functions by name.
fn merge_function(name: &str) -> Option<Arc<AggregateUDF>> {
    merge_functions().into_iter().find(|f| f.name() == name).map(Arc::new)
}

/// Our merge functions by name, anything else by `other`.
fn udaf_into(node: &AggregateUDF, buf: &mut Vec<u8>, other: impl FnOnce(&mut Vec<u8>) -> Result<()>) -> Result<()> {
    match merge_function(node.name()) {
        Some(_) => encode(Kind::Function, &node.name(), buf),
        None => other(buf),
    }
}

/// The function `udaf_into` wrote, or `other`'s when the bytes are not ours.
fn udaf_from(buf: &[u8], other: impl FnOnce() -> Result<Arc<AggregateUDF>>) -> Result<Arc<AggregateUDF>> {
    match ours(buf)? {
        Some((Kind::Function, body)) => {
            let name: String = decode("function", body)?;
            merge_function(&name).ok_or_else(|| plan_datafusion_err!("unknown tet merge function {name:?}"))
        }
        Some((kind, _)) => Err(plan_datafusion_err!(
            "a tet plan node of kind {kind:?} where a function was expected"
        )),
        None => other(),
    }
}

/// Logical plans: [`TetTableProvider`] and the pushdown's [`TetPartialAggregate`] tables,
/// and the pushdown's merge functions; everything else goes to Ballista's codec.
#[derive(Debug, Default)]
pub struct TetLogicalCodec {
    inner: BallistaLogicalExtensionCodec,
}

impl LogicalExtensionCodec for TetLogicalCodec {
    fn try_decode(&self, buf: &[u8], inputs: &[LogicalPlan], ctx: &TaskContext) -> Result<Extension> {
        self.inner.try_decode(buf, inputs, ctx)
    }

    fn try_encode(&self, node: &Extension, buf: &mut Vec<u8>) -> Result<()> {
        self.inner.try_encode(node, buf)
    }

    fn try_decode_table_provider(
        &self,
        buf: &[u8],
        table_ref: &TableReference,
        schema: SchemaRef,
        ctx: &TaskContext,
    ) -> Result<Arc<dyn TableProvider>> {
        let Some((kind, body)) = ours(buf)? else {
            return self.inner.try_decode_table_provider(buf, table_ref, schema, ctx);
        };
        let provider: Arc<dyn TableProvider> = match kind {
            Kind::Table => Arc::new(open_table(&decode::<FileRef>("table", body)?, ctx)?),
            Kind::PartialAggregate => {
                let w: PartialAggregateWire = decode("partial aggregate", body)?;
                let table = open_table(&w.file, ctx)?;
                let filters = w
                    .filters
                    .iter()
                    .map(|b| Expr::from_bytes_with_ctx(b, ctx))
                    .collect::<Result<Vec<_>>>()?;
                let plan = plan_of(w.plan, &table)?;
                Arc::new(TetPartialAggregate::new(table, filters, plan))
            }
            Kind::Catalog => {
                let w: CatalogWire = decode("catalog table", body)?;
                let source = open_file(&w.location, &w.version, ctx)?;
                Arc::new(match &w.chunks_of {
                    None => TetCatalogTable::new(source, CatalogKind::Datasets, None)?,
                    Some(d) => TetCatalogTable::new(source, CatalogKind::Chunks, d.as_deref())?,
                })
            }
            k => {
                return Err(plan_datafusion_err!(
                    "a tet plan node of kind {k:?} where a table was expected"
                ));
            }
        };
        if provider.schema().fields() != schema.fields() {
            return Err(plan_datafusion_err!(
                "table {table_ref}: the file now gives the columns {:?}, the plan expects {:?}",
                provider.schema().fields().iter().map(|f| f.name()).collect::<Vec<_>>(),
                schema.fields().iter().map(|f| f.name()).collect::<Vec<_>>()
            ));
        }
        Ok(provider)
    }

    fn try_encode_table_provider(
        &self,
        table_ref: &TableReference,
        node: Arc<dyn TableProvider>,
        buf: &mut Vec<u8>,
    ) -> Result<()> {
        if let Some(t) = node.downcast_ref::<TetTableProvider>() {
            return encode(Kind::Table, &file_of(t), buf);
        }
        if let Some(c) = node.downcast_ref::<TetCatalogTable>() {
            let w = CatalogWire {
                location: c.source().resolved.clone(),
                version: c.source().version(),
                chunks_of: match c.kind() {
                    CatalogKind::Datasets => None,
                    CatalogKind::Chunks => Some(c.dataset().map(str::to_owned)),
                },
            };
            return encode(Kind::Catalog, &w, buf);
        }
        if let Some(p) = node.downcast_ref::<TetPartialAggregate>() {
            let filters = p
                .filters()
                .iter()
                .map(|f| Ok(f.to_bytes()?.to_vec()))
                .collect::<Result<Vec<_>>>()?;
            let w = PartialAggregateWire {
                file: file_of(p.table()),
                filters,
                plan: plan_wire(p.plan()),
            };
            return encode(Kind::PartialAggregate, &w, buf);
        }
        self.inner.try_encode_table_provider(table_ref, node, buf)
    }

    fn try_decode_file_format(
        &self,
        buf: &[u8],
        ctx: &TaskContext,
    ) -> Result<Arc<dyn datafusion::datasource::file_format::FileFormatFactory>> {
        self.inner.try_decode_file_format(buf, ctx)
    }

    fn try_encode_file_format(
        &self,
        buf: &mut Vec<u8>,
        node: Arc<dyn datafusion::datasource::file_format::FileFormatFactory>,
    ) -> Result<()> {
        self.inner.try_encode_file_format(buf, node)
    }

    fn try_decode_udaf(&self, name: &str, buf: &[u8]) -> Result<Arc<AggregateUDF>> {
        udaf_from(buf, || self.inner.try_decode_udaf(name, buf))
    }

    fn try_encode_udaf(&self, node: &AggregateUDF, buf: &mut Vec<u8>) -> Result<()> {
        udaf_into(node, buf, |buf| self.inner.try_encode_udaf(node, buf))
    }
}

/// Physical plans: [`TetScanExec`] and [`TetAggregateExec`], and the pushdown's merge
/// functions; everything else (Ballista's shuffle nodes included) goes to Ballista's codec.
#[derive(Debug, Default)]
pub struct TetPhysicalCodec {
    inner: BallistaPhysicalExtensionCodec,
}

impl PhysicalExtensionCodec for TetPhysicalCodec {
    fn try_decode(
        &self,
        buf: &[u8],
        inputs: &[Arc<dyn ExecutionPlan>],
        ctx: &TaskContext,
        proto_converter: &dyn PhysicalProtoConverterExtension,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let Some((kind, body)) = ours(buf)? else {
            return self.inner.try_decode(buf, inputs, ctx, proto_converter);
        };
        match kind {
            Kind::Scan => {
                let w: ScanWire = decode("scan", body)?;
                let table = open_table(&w.file, ctx)?;
                let columns = table.axes().len() + 1;
                if w.projection.iter().any(|&i| i >= columns) {
                    return Err(plan_datafusion_err!(
                        "{}: a tet scan projects columns {:?} of {columns}",
                        w.file.location,
                        w.projection
                    ));
                }
                let (sel, feed) = feed_of(&table, &w.selection, w.chunks, inputs)?;
                Ok(Arc::new(table.scan_exec(
                    sel,
                    feed,
                    w.pruned_by_zone,
                    w.value_filters,
                    w.projection,
                    w.limit,
                )?))
            }
            Kind::Aggregate => {
                let w: AggregateWire = decode("aggregate", body)?;
                let table = open_table(&w.file, ctx)?;
                let plan = plan_of(w.plan, &table)?;
                let (sel, feed) = feed_of(&table, &w.selection, w.chunks, inputs)?;
                Ok(Arc::new(TetAggregateExec::new(
                    table.source().clone(),
                    table.dataset_index(),
                    table.axes_arc(),
                    plan,
                    sel,
                    feed,
                )))
            }
            k => Err(plan_datafusion_err!(
                "a tet plan node of kind {k:?} where an execution plan was expected"
            )),
        }
    }

    fn try_encode(
        &self,
        node: Arc<dyn ExecutionPlan>,
        buf: &mut Vec<u8>,
        proto_converter: &dyn PhysicalProtoConverterExtension,
    ) -> Result<()> {
        if let Some(s) = node.downcast_ref::<TetScanExec>() {
            let w = ScanWire {
                file: file_ref(s.source(), s.dataset()),
                projection: s.projection().to_vec(),
                selection: selection_wire(&s.summary().axis_selection),
                chunks: s.feed().chunk_ids(),
                pruned_by_zone: s.summary().chunks_pruned_by_zone,
                value_filters: s.summary().value_filters,
                limit: s.limit(),
            };
            return encode(Kind::Scan, &w, buf);
        }
        if let Some(a) = node.downcast_ref::<TetAggregateExec>() {
            let w = AggregateWire {
                file: file_ref(a.source(), a.dataset()),
                plan: plan_wire(a.plan()),
                selection: selection_wire(a.selection()),
                chunks: a.feed().chunk_ids(),
            };
            return encode(Kind::Aggregate, &w, buf);
        }
        self.inner.try_encode(node, buf, proto_converter)
    }

    fn try_decode_udaf(&self, name: &str, buf: &[u8]) -> Result<Arc<AggregateUDF>> {
        udaf_from(buf, || self.inner.try_decode_udaf(name, buf))
    }

    fn try_encode_udaf(&self, node: &AggregateUDF, buf: &mut Vec<u8>) -> Result<()> {
        udaf_into(node, buf, |buf| self.inner.try_encode_udaf(node, buf))
    }
}
