//! [`TetLogicalExtensionCodec`] and [`TetPhysicalExtensionCodec`]: our tables, execution
//! plans and merge functions in Ballista's plan serialization.
//!
//! Our bytes are [`MAGIC`] followed by a protobuf [`TetNode`] (prost messages derived in
//! Rust): a wire version, then one kind of node. Filters nest DataFusion's own
//! `LogicalExprNode` and types its `ArrowType`. Anything not starting with [`MAGIC`] is
//! handed to Ballista's codecs, which we wrap. A plan names its file by location, dataset
//! and version (length + ETag); the process decoding it reopens the file (the scheduler to
//! plan, executors to read their chunks) and refuses a different version. Chunk tasks
//! travel as chunk ids, each made again from its id and the per-axis selection alone (not
//! by making every task of the selection), so a plan stays small, decoding it costs what
//! it names, and a damaged one cannot name cells outside the dataset. Which partition reads which
//! chunks is our nodes' child (see [`ChunkFeed`]), a plain `DataSourceExec` that Ballista
//! restricts to each task's partitions.

use crate::exec::{ChunkFeed, TetAggregateExec, TetScanExec};
use crate::io::{AllowedLocations, SourceVersion, TetSource, remote_url};
use crate::plan::{
    AccessPlan, Affine, AggFunc, AggInput, AggSpec, AggregateOutput, Aggregation, AxisSelection, GroupKey, Limits,
    PruningCounts, TableModel, ValueColumn, combine,
};
use crate::sql::{MetadataKind, TetAggregateTable, TetConfig, TetMetadataTable, TetTableProvider, merge_functions};
use arrow::datatypes::{DataType, SchemaRef};
use ballista_core::serde::{BallistaLogicalExtensionCodec, BallistaPhysicalExtensionCodec};
use datafusion::catalog::TableProvider;
use datafusion::common::{Result, TableReference, plan_datafusion_err, plan_err};
use datafusion::error::DataFusionError;
use datafusion::execution::TaskContext;
use datafusion::logical_expr::{AggregateUDF, Expr, Extension, LogicalPlan};
use datafusion::physical_plan::ExecutionPlan;
use datafusion_proto::logical_plan::from_proto::parse_expr;
use datafusion_proto::logical_plan::to_proto::serialize_expr;
use datafusion_proto::logical_plan::{DefaultLogicalExtensionCodec, LogicalExtensionCodec};
use datafusion_proto::physical_plan::{PhysicalExtensionCodec, PhysicalProtoConverterExtension};
use datafusion_proto::protobuf::{ArrowType, LogicalExprNode};
use prost::Message;
use std::sync::Arc;

/// The first bytes of everything we encode.
pub const MAGIC: &[u8; 3] = b"TET";
/// The version of [`TetNode`] this build writes and reads. (9: a table over an archive
/// carries its files, [`FileRef::members`], and its task ids count across them; 10: an
/// aggregate carries the percentile of `percentile_cont`.)
pub const WIRE_VERSION: u32 = 10;

/// One of our plan pieces.
#[derive(Clone, PartialEq, Message)]
pub struct TetNode {
    /// [`WIRE_VERSION`] of the writer.
    #[prost(uint32, tag = "1")]
    pub version: u32,
    #[prost(oneof = "node::Kind", tags = "2, 3, 4, 5, 6, 7")]
    pub kind: Option<node::Kind>,
}

/// The kinds of [`TetNode`].
pub mod node {
    /// What a [`TetNode`](super::TetNode) holds.
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum Kind {
        /// A `TetTableProvider`.
        #[prost(message, tag = "2")]
        Table(super::FileRef),
        /// The aggregate pushdown's `TetAggregateTable` table.
        #[prost(message, tag = "3")]
        AggregateTable(super::AggregateTableNode),
        /// A `TetScanExec`.
        #[prost(message, tag = "4")]
        Scan(super::ScanNode),
        /// A `TetAggregateExec`.
        #[prost(message, tag = "5")]
        Aggregate(super::AggregateNode),
        /// One of the pushdown's merge functions, by name.
        #[prost(string, tag = "6")]
        MergeFunction(String),
        /// The table of `tet_datasets()` / `tet_chunks()`.
        #[prost(message, tag = "7")]
        Metadata(super::MetadataNode),
    }
}

/// A dataset of a file at one version.
#[derive(Clone, PartialEq, Message)]
pub struct FileRef {
    /// Absolute path or object store URL.
    #[prost(string, tag = "1")]
    pub location: String,
    #[prost(string, tag = "2")]
    pub dataset: String,
    /// File length in bytes.
    #[prost(uint64, tag = "3")]
    pub len: u64,
    #[prost(string, optional, tag = "4")]
    pub e_tag: Option<String>,
    /// The table's `tet.nan_is_null` (every NaN NULL), as the planning session set it.
    #[prost(bool, tag = "5")]
    pub nan_is_null: bool,
    /// The table's limits (`tet.max_tile_bytes`, `tet.max_dataset_cells`,
    /// `tet.max_axis_positions`), as the planning session set them.
    #[prost(uint64, tag = "6")]
    pub max_tile_bytes: u64,
    #[prost(uint64, tag = "7")]
    pub max_dataset_cells: u64,
    #[prost(uint64, tag = "8")]
    pub max_axis_positions: u64,
    /// The file's modification time (ns since 1970) when the plan was made.
    #[prost(int64, optional, tag = "9")]
    pub modified_ns: Option<i64>,
    /// A table of several datasets: every value column (the first is this file's
    /// `dataset`); empty for a table of one dataset (its value column `v`).
    #[prost(message, repeated, tag = "10")]
    pub values: Vec<ValueRef>,
    /// A table over an archive: each of its files (as this message describes one file's
    /// table), in the table's order; empty for a table of one file.
    #[prost(message, repeated, tag = "11")]
    pub members: Vec<FileRef>,
    /// An archive's location as the user wrote it (for messages).
    #[prost(string, tag = "12")]
    pub pattern: String,
    /// An archive's concatenation axis, as planned (so decoding does not infer it again).
    #[prost(string, tag = "13")]
    pub concat_axis: String,
}

/// One value column of a table of several datasets.
#[derive(Clone, PartialEq, Message)]
pub struct ValueRef {
    /// The dataset's file at one version (`location`, `dataset`, `len`, `e_tag`,
    /// `modified_ns`).
    #[prost(message, optional, tag = "1")]
    pub file: Option<FileRef>,
    /// The column's name.
    #[prost(string, tag = "2")]
    pub name: String,
}

/// `tet_datasets()` (no `chunks`) or `tet_chunks()` (`chunks`, of `dataset` or of all).
#[derive(Clone, PartialEq, Message)]
pub struct MetadataNode {
    /// The file; `dataset` is empty.
    #[prost(message, optional, tag = "1")]
    pub file: Option<FileRef>,
    #[prost(bool, tag = "2")]
    pub chunks: bool,
    #[prost(string, optional, tag = "3")]
    pub dataset: Option<String>,
    /// The further files of an archive's metadata table, in row order.
    #[prost(message, repeated, tag = "4")]
    pub more_files: Vec<FileRef>,
}

/// One aggregate.
#[derive(Clone, PartialEq, Message)]
pub struct AggSpecNode {
    /// SQL name as `AggFunc::name` writes it.
    #[prost(string, tag = "1")]
    pub func: String,
    #[prost(message, optional, tag = "2")]
    pub input_type: Option<ArrowType>,
    /// The input expression, when it is not `v` (or an affine map of it).
    #[prost(message, optional, tag = "3")]
    pub expr: Option<LogicalExprNode>,
    /// `FILTER (WHERE …)`.
    #[prost(message, optional, tag = "4")]
    pub filter: Option<LogicalExprNode>,
    /// An affine input `v·scale + offset`.
    #[prost(double, optional, tag = "5")]
    pub scale: Option<f64>,
    #[prost(double, optional, tag = "6")]
    pub offset: Option<f64>,
    /// The second input of a function of two (`corr(expr, expr_y)`).
    #[prost(message, optional, tag = "7")]
    pub expr_y: Option<LogicalExprNode>,
    /// The percentile of `percentile_cont`, in ascending order.
    #[prost(double, optional, tag = "8")]
    pub percentile: Option<f64>,
}

/// A group key: axis `axis`, or an expression of it.
#[derive(Clone, PartialEq, Message)]
pub struct GroupKeyNode {
    #[prost(uint32, tag = "1")]
    pub axis: u32,
    #[prost(message, optional, tag = "2")]
    pub expr: Option<LogicalExprNode>,
    #[prost(string, tag = "3")]
    pub name: String,
    #[prost(message, optional, tag = "4")]
    pub data_type: Option<ArrowType>,
}

/// Group keys, aggregates and the row filter.
#[derive(Clone, PartialEq, Message)]
pub struct AggregationNode {
    #[prost(message, repeated, tag = "1")]
    pub groups: Vec<GroupKeyNode>,
    #[prost(message, repeated, tag = "2")]
    pub aggs: Vec<AggSpecNode>,
    #[prost(message, optional, tag = "3")]
    pub filter: Option<LogicalExprNode>,
}

/// The selected ranges of one axis, as `lo, hi` pairs.
#[derive(Clone, PartialEq, Message)]
pub struct AxisRanges {
    #[prost(uint64, repeated, tag = "1")]
    pub bounds: Vec<u64>,
}

/// An access plan: per-axis selection and every planned chunk (the node's child says
/// which partition reads which).
#[derive(Clone, PartialEq, Message)]
pub struct AccessNode {
    #[prost(message, repeated, tag = "1")]
    pub selection: Vec<AxisRanges>,
    #[prost(uint64, repeated, tag = "2")]
    pub chunks: Vec<u64>,
    #[prost(uint64, tag = "3")]
    pub pruned_by_zone: u64,
    #[prost(bool, tag = "4")]
    pub value_filters: bool,
    #[prost(uint64, tag = "5")]
    pub pruned_by_axes: u64,
}

/// The pushdown's table: file, pushed axis filters and the aggregation.
#[derive(Clone, PartialEq, Message)]
pub struct AggregateTableNode {
    #[prost(message, optional, tag = "1")]
    pub file: Option<FileRef>,
    #[prost(message, repeated, tag = "2")]
    pub filters: Vec<LogicalExprNode>,
    #[prost(message, optional, tag = "3")]
    pub aggregation: Option<AggregationNode>,
    /// The table's rows are the aggregates' values, not partial states
    /// ([`AggregateOutput`]).
    #[prost(bool, tag = "4")]
    pub values: bool,
}

/// A scan.
#[derive(Clone, PartialEq, Message)]
pub struct ScanNode {
    #[prost(message, optional, tag = "1")]
    pub file: Option<FileRef>,
    #[prost(message, optional, tag = "2")]
    pub access: Option<AccessNode>,
    #[prost(uint32, repeated, tag = "3")]
    pub projection: Vec<u32>,
    #[prost(uint64, optional, tag = "4")]
    pub limit: Option<u64>,
}

/// A folded aggregation.
#[derive(Clone, PartialEq, Message)]
pub struct AggregateNode {
    #[prost(message, optional, tag = "1")]
    pub file: Option<FileRef>,
    #[prost(message, optional, tag = "2")]
    pub aggregation: Option<AggregationNode>,
    #[prost(message, optional, tag = "3")]
    pub access: Option<AccessNode>,
    /// One output partition of the aggregates' values, not partial states per partition
    /// ([`AggregateOutput`]).
    #[prost(bool, tag = "4")]
    pub values: bool,
}

fn encode(kind: node::Kind, buf: &mut Vec<u8>) -> Result<()> {
    buf.extend_from_slice(MAGIC);
    TetNode {
        version: WIRE_VERSION,
        kind: Some(kind),
    }
    .encode(buf)
    .map_err(|e| plan_datafusion_err!("encoding a tet plan node: {e}"))
}

/// Our node when `buf` is ours; `None` when it is someone else's.
pub fn decode_node(buf: &[u8]) -> Result<Option<node::Kind>> {
    let Some(body) = buf.strip_prefix(MAGIC) else {
        return Ok(None);
    };
    let node = TetNode::decode(body).map_err(|e| plan_datafusion_err!("decoding a tet plan node: {e}"))?;
    if node.version != WIRE_VERSION {
        return Err(plan_datafusion_err!(
            "a tet plan node of wire version {}, this build reads version {WIRE_VERSION}; \
             run the same datafusion-tet on the client, scheduler and executors",
            node.version
        ));
    }
    match node.kind {
        Some(k) => Ok(Some(k)),
        None => Err(plan_datafusion_err!(
            "a tet plan node of unknown kind (written by another build of datafusion-tet?)"
        )),
    }
}

/// A field every node of this kind has.
fn required<T>(v: Option<T>, what: &str) -> Result<T> {
    v.ok_or_else(|| plan_datafusion_err!("a tet plan node without its {what}"))
}

/// Plans name local files by absolute path (each process has its own working
/// directory) and object store files by URL.
fn file_ref(table: &TableModel) -> Result<FileRef> {
    let mut f = one_file_ref(table);
    if let Some(files) = &table.files {
        f.members = files.members.iter().map(|m| one_file_ref(&m.table)).collect();
        f.pattern = files.pattern.clone();
        f.concat_axis = table.axes[files.axis].name.clone();
    }
    Ok(f)
}

/// The [`FileRef`] of a one-file table (an archive's first file).
fn one_file_ref(table: &TableModel) -> FileRef {
    let mut f = source_ref(&table.source);
    f.dataset = table.dataset().name().to_owned();
    f.nan_is_null = table.nan_is_null;
    f.max_tile_bytes = table.limits.max_tile_bytes;
    f.max_dataset_cells = table.limits.max_dataset_cells;
    f.max_axis_positions = table.limits.max_axis_positions;
    if table.is_multi() {
        f.values = table
            .values
            .iter()
            .map(|v| {
                let mut file = source_ref(&v.source);
                file.dataset = v.dataset().name().to_owned();
                ValueRef {
                    file: Some(file),
                    name: v.name.clone(),
                }
            })
            .collect();
    }
    f
}

fn source_ref(source: &TetSource) -> FileRef {
    let v = source.version();
    FileRef {
        location: source.resolved.clone(),
        dataset: String::new(),
        len: v.len,
        e_tag: v.e_tag,
        modified_ns: v.modified_ns,
        ..FileRef::default()
    }
}

/// Reopen the file at `f.location` in the decoding process and check it is `f`'s version
/// (and, when the process restricts them, that the location is allowed).
fn open_file(f: &FileRef, ctx: &TaskContext) -> Result<Arc<TetSource>> {
    let location = match ctx.session_config().get_extension::<AllowedLocations>() {
        None => f.location.clone(),
        Some(allowed) => allowed.permit(&f.location).ok_or_else(|| {
            plan_datafusion_err!(
                "{}: a plan names a file outside the locations this process allows ({allowed}; \
                 see --tet-allow-location), or one that does not exist",
                f.location
            )
        })?,
    };
    let source = if remote_url(&location)?.is_none() {
        TetSource::open(&location)?
    } else {
        crate::sql::block_on(
            "decoding a plan",
            crate::sql::open_source_with(ctx.session_config(), ctx.runtime_env().as_ref(), &location),
        )?
    };
    source.check_version(&SourceVersion {
        len: f.len,
        e_tag: f.e_tag.clone(),
        modified_ns: f.modified_ns,
    })?;
    Ok(source)
}

/// The output a node's `values` flag names.
fn output_of(values: bool) -> AggregateOutput {
    if values {
        AggregateOutput::Values
    } else {
        AggregateOutput::States
    }
}

/// Reopen the table a plan names, in the decoding process: one file's, or an archive's
/// files (each at the version planned) combined along the axis planned, in the order
/// planned.
fn open_table(f: Option<FileRef>, ctx: &TaskContext) -> Result<Arc<TableModel>> {
    let f = required(f, "file")?;
    let limits = Limits {
        max_tile_bytes: f.max_tile_bytes,
        max_dataset_cells: f.max_dataset_cells,
        max_axis_positions: f.max_axis_positions,
    };
    let table = match f.members.is_empty() {
        true => open_one_file(&f, ctx, limits)?,
        false => {
            let members = f
                .members
                .iter()
                .map(|m| Ok(TableModel::clone(open_one_file(m, ctx, limits)?.as_ref())))
                .collect::<Result<Vec<_>>>()?;
            let order: Vec<String> = members.iter().map(|m| m.source.resolved.clone()).collect();
            let table = combine(&f.pattern, members, Some(&f.concat_axis))?;
            let planned: Vec<&str> = f.members.iter().map(|m| m.location.as_str()).collect();
            let combined: Vec<&str> = match &table.files {
                Some(files) => files.members.iter().map(|m| m.table.source.resolved.as_str()).collect(),
                None => order.iter().map(String::as_str).collect(),
            };
            if combined != planned {
                return plan_err!(
                    "{}: the files of the archive no longer combine in the order planned ({planned:?}, now {combined:?})",
                    f.pattern
                );
            }
            Arc::new(table)
        }
    };
    Ok(table.with_nan_is_null(f.nan_is_null).with_limits(limits))
}

/// Reopen one file's table a plan names.
fn open_one_file(f: &FileRef, ctx: &TaskContext, limits: Limits) -> Result<Arc<TableModel>> {
    let source = open_file(f, ctx)?;
    let table = Arc::new(if source.is_remote() {
        crate::sql::block_on(
            "decoding a plan",
            TableModel::for_source(source, Some(&f.dataset), limits),
        )?
    } else {
        TableModel::from_source(source, Some(&f.dataset), limits)?
    });
    let table = if f.values.is_empty() {
        table
    } else {
        let values = f
            .values
            .iter()
            .map(|v| {
                let file = required(v.file.clone(), "value column's file")?;
                let source = if file.location == f.location {
                    table.source.clone()
                } else {
                    open_file(&file, ctx)?
                };
                let id = source
                    .file
                    .dataset(&file.dataset)
                    .map_err(|e| e.in_file(&source.location))?
                    .id;
                ValueColumn::new(source, id, &v.name)
            })
            .collect::<Result<Vec<_>>>()?;
        Arc::new(table.with_values(values)?)
    };
    Ok(table)
}

fn expr_node(e: &Expr) -> Result<LogicalExprNode> {
    serialize_expr(e, &DefaultLogicalExtensionCodec {}).map_err(DataFusionError::from)
}

fn expr_of(n: &LogicalExprNode, ctx: &TaskContext) -> Result<Expr> {
    parse_expr(n, ctx, &DefaultLogicalExtensionCodec {}).map_err(DataFusionError::from)
}

fn type_node(t: &DataType) -> Result<ArrowType> {
    ArrowType::try_from(t).map_err(|e| plan_datafusion_err!("encoding a tet aggregate: {e}"))
}

fn type_of(n: Option<&ArrowType>) -> Result<DataType> {
    DataType::try_from(required(n, "type")?)
        .map_err(|e| plan_datafusion_err!("a tet aggregate names an unknown type: {e}"))
}

fn aggregation_node(a: &Aggregation) -> Result<AggregationNode> {
    // A key of the value folds only into one output of values, which no distributed plan
    // carries (the rewrite leaves it to DataFusion without `tet.merge_in_scan`).
    if let Some(k) = &a.value_key {
        return Err(plan_datafusion_err!(
            "encoding a tet aggregate: the key of the value {} is not encoded",
            k.sql()
        ));
    }
    Ok(AggregationNode {
        groups: a
            .groups
            .iter()
            .map(|k| {
                Ok(GroupKeyNode {
                    axis: k.axis as u32,
                    expr: k.expr.as_ref().map(expr_node).transpose()?,
                    name: k.name.clone(),
                    data_type: Some(type_node(&k.data_type)?),
                })
            })
            .collect::<Result<_>>()?,
        aggs: a
            .aggs
            .iter()
            .map(|s| {
                let (expr, expr_y, affine) = match &s.input {
                    AggInput::Value { affine } => (None, None, *affine),
                    AggInput::Expr(e) => (Some(expr_node(e)?), None, None),
                    AggInput::Pair(x, y) => (Some(expr_node(x)?), Some(expr_node(y)?), None),
                };
                Ok(AggSpecNode {
                    func: s.func.name().to_owned(),
                    input_type: Some(type_node(&s.input_type)?),
                    expr,
                    expr_y,
                    filter: s.filter.as_ref().map(expr_node).transpose()?,
                    scale: affine.map(|m| m.scale),
                    offset: affine.map(|m| m.offset),
                    percentile: s.percentile,
                })
            })
            .collect::<Result<_>>()?,
        filter: a.filter.as_ref().map(expr_node).transpose()?,
    })
}

fn aggregation_of(n: Option<AggregationNode>, table: &TableModel, ctx: &TaskContext) -> Result<Aggregation> {
    let n = required(n, "aggregation")?;
    let groups = n
        .groups
        .iter()
        .map(|k| {
            Ok(GroupKey {
                axis: k.axis as usize,
                expr: k.expr.as_ref().map(|e| expr_of(e, ctx)).transpose()?,
                name: k.name.clone(),
                data_type: type_of(k.data_type.as_ref())?,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let aggs = n
        .aggs
        .iter()
        .map(|a| {
            let func = AggFunc::from_name(&a.func)
                .ok_or_else(|| plan_datafusion_err!("a tet aggregate names an unknown function {:?}", a.func))?;
            let input = match (&a.expr, &a.expr_y, a.scale, a.offset) {
                (Some(x), Some(y), None, None) => AggInput::Pair(expr_of(x, ctx)?, expr_of(y, ctx)?),
                (Some(e), None, None, None) => AggInput::Expr(expr_of(e, ctx)?),
                (None, None, Some(scale), Some(offset)) => AggInput::Value {
                    affine: Some(Affine { scale, offset }),
                },
                (None, None, None, None) => AggInput::Value { affine: None },
                _ => {
                    return Err(plan_datafusion_err!(
                        "a tet aggregate with an expression and an affine map"
                    ));
                }
            };
            Ok(AggSpec {
                func,
                input_type: type_of(a.input_type.as_ref())?,
                input,
                filter: a.filter.as_ref().map(|e| expr_of(e, ctx)).transpose()?,
                percentile: a.percentile,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let aggregation = Aggregation {
        groups,
        value_key: None,
        aggs,
        filter: n.filter.as_ref().map(|e| expr_of(e, ctx)).transpose()?,
    };
    aggregation.check(table).map_err(|e| {
        plan_datafusion_err!(
            "{}: a tet aggregate does not fit the dataset: {e}",
            table.source.location
        )
    })?;
    Ok(aggregation)
}

fn access_node(access: &AccessPlan, chunks: Vec<u64>) -> AccessNode {
    AccessNode {
        selection: access
            .selection
            .iter()
            .map(|s| AxisRanges {
                bounds: s.ranges().iter().flat_map(|&(lo, hi)| [lo, hi]).collect(),
            })
            .collect(),
        chunks,
        pruned_by_zone: access.pruning.pruned_by_zone,
        value_filters: access.value_filters,
        pruned_by_axes: access.pruning.pruned_by_axes,
    }
}

/// The access plan and chunk feed a plan names, checked against the dataset.
fn feed_of(table: &TableModel, n: Option<AccessNode>, inputs: &[Arc<dyn ExecutionPlan>]) -> Result<ChunkFeed> {
    let n = required(n, "access plan")?;
    let bad = |e: String| plan_datafusion_err!("{}: a tet plan's chunk selection: {e}", table.location());
    if n.selection.len() != table.axes.len() {
        return Err(bad(format!(
            "{} axes, the dataset has {}",
            n.selection.len(),
            table.axes.len()
        )));
    }
    let selection = table
        .axes
        .iter()
        .zip(&n.selection)
        .map(|(a, r)| {
            if r.bounds.len() % 2 != 0 {
                return Err(format!("axis {}: an odd number of range bounds", a.name));
            }
            let ranges: Vec<(u64, u64)> = r.bounds.chunks_exact(2).map(|p| (p[0], p[1])).collect();
            AxisSelection::try_from_ranges(a.extent, &ranges).map_err(|e| format!("axis {}: {e}", a.name))
        })
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(bad)?;
    let tasks = table
        .tasks_by_id(&selection, &[n.chunks])
        .map_err(bad)?
        .pop()
        .unwrap_or_default();
    let [input] = inputs else {
        return Err(plan_datafusion_err!(
            "a tet plan node with {} inputs, expected 1",
            inputs.len()
        ));
    };
    let chunks_total = table.grid_count();
    let access = AccessPlan {
        pruning: PruningCounts {
            chunks_total,
            pruned_by_axes: n.pruned_by_axes.min(chunks_total),
            pruned_by_zone: n.pruned_by_zone.min(chunks_total),
        },
        selection,
        tasks: tasks.into_iter().map(std::sync::Arc::new).collect(),
        value_filters: n.value_filters,
    };
    ChunkFeed::from_input(access, input.clone())
}

/// Our merge functions by name.
fn merge_function(name: &str) -> Option<Arc<AggregateUDF>> {
    merge_functions().into_iter().find(|f| f.name() == name).map(Arc::new)
}

/// Our merge functions by name, anything else by `other`.
fn udaf_into(node: &AggregateUDF, buf: &mut Vec<u8>, other: impl FnOnce(&mut Vec<u8>) -> Result<()>) -> Result<()> {
    match merge_function(node.name()) {
        Some(_) => encode(node::Kind::MergeFunction(node.name().to_owned()), buf),
        None => other(buf),
    }
}

/// The function `udaf_into` wrote, or `other`'s when the bytes are not ours.
fn udaf_from(buf: &[u8], other: impl FnOnce() -> Result<Arc<AggregateUDF>>) -> Result<Arc<AggregateUDF>> {
    match decode_node(buf)? {
        Some(node::Kind::MergeFunction(name)) => {
            merge_function(&name).ok_or_else(|| plan_datafusion_err!("unknown tet merge function {name:?}"))
        }
        Some(_) => Err(plan_datafusion_err!(
            "a tet plan node of another kind where a function was expected"
        )),
        None => other(),
    }
}

/// Logical plans: [`TetTableProvider`], the pushdown's [`TetAggregateTable`] and the
/// metadata tables, and the pushdown's merge functions; everything else goes to
/// Ballista's codec.
#[derive(Debug, Default)]
pub struct TetLogicalExtensionCodec {
    inner: BallistaLogicalExtensionCodec,
}

impl LogicalExtensionCodec for TetLogicalExtensionCodec {
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
        let Some(kind) = decode_node(buf)? else {
            return self.inner.try_decode_table_provider(buf, table_ref, schema, ctx);
        };
        let provider: Arc<dyn TableProvider> = match kind {
            node::Kind::Table(f) => Arc::new(TetTableProvider::from_model(Arc::unwrap_or_clone(open_table(
                Some(f),
                ctx,
            )?))),
            node::Kind::AggregateTable(n) => {
                let table = open_table(n.file, ctx)?;
                // Filters are plain expressions over the table's columns.
                let filters = n.filters.iter().map(|e| expr_of(e, ctx)).collect::<Result<Vec<_>>>()?;
                let aggregation = aggregation_of(n.aggregation, &table, ctx)?;
                Arc::new(TetAggregateTable::new(table, filters, aggregation, output_of(n.values)))
            }
            node::Kind::Metadata(n) => {
                let mut sources = vec![open_file(&required(n.file, "file")?, ctx)?];
                for f in &n.more_files {
                    sources.push(open_file(f, ctx)?);
                }
                let kind = if n.chunks {
                    MetadataKind::Chunks
                } else {
                    MetadataKind::Datasets
                };
                Arc::new(TetMetadataTable::of_files(sources, kind, n.dataset.as_deref())?)
            }
            _ => {
                return Err(plan_datafusion_err!(
                    "a tet plan node of another kind where a table was expected"
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
            return encode(node::Kind::Table(file_ref(t.model())?), buf);
        }
        if let Some(c) = node.downcast_ref::<TetMetadataTable>() {
            let n = MetadataNode {
                file: Some(source_ref(c.source())),
                chunks: c.kind() == MetadataKind::Chunks,
                dataset: c.dataset().map(str::to_owned),
                more_files: c.sources()[1..].iter().map(|s| source_ref(s)).collect(),
            };
            return encode(node::Kind::Metadata(n), buf);
        }
        if let Some(p) = node.downcast_ref::<TetAggregateTable>() {
            let filters = p.filters().iter().map(expr_node).collect::<Result<Vec<_>>>()?;
            let n = AggregateTableNode {
                file: Some(file_ref(p.table())?),
                filters,
                aggregation: Some(aggregation_node(p.aggregation())?),
                values: p.output() == AggregateOutput::Values,
            };
            return encode(node::Kind::AggregateTable(n), buf);
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
pub struct TetPhysicalExtensionCodec {
    inner: BallistaPhysicalExtensionCodec,
}

impl PhysicalExtensionCodec for TetPhysicalExtensionCodec {
    fn try_decode(
        &self,
        buf: &[u8],
        inputs: &[Arc<dyn ExecutionPlan>],
        ctx: &TaskContext,
        proto_converter: &dyn PhysicalProtoConverterExtension,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let Some(kind) = decode_node(buf)? else {
            return self.inner.try_decode(buf, inputs, ctx, proto_converter);
        };
        // Object store reads follow the options of the session decoding the plan.
        let fetch = TetConfig::of(ctx.session_config()).fetch_options();
        match kind {
            node::Kind::Scan(n) => {
                let table = open_table(n.file, ctx)?;
                let columns = table.schema.fields().len();
                if n.projection.iter().any(|&i| i as usize >= columns) {
                    return Err(plan_datafusion_err!(
                        "{}: a tet scan projects columns {:?} of {columns}",
                        table.source.location,
                        n.projection
                    ));
                }
                let feed = feed_of(&table, n.access, inputs)?;
                let projection = n.projection.iter().map(|&i| i as usize).collect();
                let limit = n.limit.map(|l| usize::try_from(l).unwrap_or(usize::MAX));
                Ok(Arc::new(TetScanExec::try_new(table, feed, projection, limit, fetch)?))
            }
            node::Kind::Aggregate(n) => {
                let table = open_table(n.file, ctx)?;
                let aggregation = aggregation_of(n.aggregation, &table, ctx)?;
                let feed = feed_of(&table, n.access, inputs)?;
                Ok(Arc::new(TetAggregateExec::try_new(
                    table,
                    aggregation,
                    feed,
                    fetch,
                    output_of(n.values),
                )?))
            }
            _ => Err(plan_datafusion_err!(
                "a tet plan node of another kind where an execution plan was expected"
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
            let n = ScanNode {
                file: Some(file_ref(s.table())?),
                access: Some(access_node(&s.feed().access, s.feed().chunk_ids())),
                projection: s.projection().iter().map(|&i| i as u32).collect(),
                limit: s.limit().map(|l| l as u64),
            };
            return encode(node::Kind::Scan(n), buf);
        }
        if let Some(a) = node.downcast_ref::<TetAggregateExec>() {
            let n = AggregateNode {
                file: Some(file_ref(a.table())?),
                aggregation: Some(aggregation_node(a.aggregation())?),
                access: Some(access_node(&a.feed().access, a.feed().chunk_ids())),
                values: a.output() == AggregateOutput::Values,
            };
            return encode(node::Kind::Aggregate(n), buf);
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
