//! [`TetAggregateExec`]: grouped aggregation folded straight from payload bytes.
//!
//! Each partition of the feed folds the selected cells of its chunks into dense
//! accumulators indexed by the group keys ([`GroupIndex`]: one id per distinct key tuple of
//! each grouped axis). What the node emits is its [`AggregateOutput`]:
//! - `States`: each partition is an output partition and emits one row per group it
//!   touched: the group's keys, then the partial states of each aggregate (see
//!   [`Aggregation::state_columns`]). A merge aggregate above (built by the logical rewrite
//!   in `sql`) combines partitions.
//! - `Values`: one output partition runs every partition as a task of its own over one
//!   group index of the whole selection, merges their accumulators in partition order and
//!   emits one row per group with each aggregate's value, finished from the merged states.
//!
//! Aggregates share accumulators by input ([`Input`]): the stored values of the tile,
//! optionally kept by ranges of stored values ([`ValueRanges`]: `WHERE`/`FILTER`
//! comparisons of value columns with constants), fold in the
//! vectorized kernels, and their states are mapped at emit (packing, affine inputs such as
//! `v * 1.8 + 32`); any other input or filter is an expression evaluated over each tile's
//! cells slab by slab ([`TileExprs`], `evaluated`) and folded from the resulting arrays.

use super::ChunkFeed;
use super::aligned::AlignedCells;
use super::expr::TileExprs;
use super::fold::{
    Accumulators, CoMoment, Elem, Keep, Missing, Moments, NAN_NEGATIVE, NAN_POSITIVE, Needs, fold_consecutive,
    fold_dot, fold_elementwise, fold_rows, fold_run, fold_run_pair, fold_scaled, fold_value, fold_weighted_run,
    masked_sum, ones,
};
use super::groups::{AxisValues, GroupIndex, Segment, Target, Walked, walk_rows, walk_segments};
use super::metrics::{AggregateMetrics, Stopwatch};
use super::payload::{Payload, PayloadMetrics, payload_stream};
use super::program::{BLOCK, Cells, Lane, Program, Scratch, Ty, convert, weighted_program};
use super::reservation::{PoolAccount, exhausted};
use super::simd::multiversion;
use crate::format::{DType, Packing, elements, with_dtype};
use crate::io::FetchOptions;
use crate::plan::{
    Affine, AggFunc, AggInput, AggSpec, AggregateOutput, Aggregation, AxisSelection, ChunkTask, KeyRange, State,
    StateColumn, TableModel, VALUE_COLUMN, ValueRanges, value_ranges, weighted_input,
};
use arrow::array::{ArrayRef, AsArray, Float64Array, Int64Array, RecordBatch, UInt64Array};
use arrow::buffer::Buffer;
use arrow::datatypes::{DataType, Float64Type, SchemaRef, UInt64Type};
use datafusion::common::Column;
use datafusion::common::runtime::SpawnedTask;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::{Result, exec_err, internal_err};
use datafusion::error::DataFusionError;
use datafusion::execution::memory_pool::{MemoryConsumer, MemoryReservation};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::logical_expr::{Expr, cast};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::execution_plan::EmissionType;
use datafusion::physical_plan::metrics::{ExecutionPlanMetricsSet, MetricsSet};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties, ReplaceChildrenOptions,
};
use futures::StreamExt;
use futures::stream::BoxStream;
use std::collections::BTreeSet;
use std::fmt;
use std::sync::Arc;

mod evaluated;

/// Cells of one slab when several inputs walk a tile (64 KiB of f32: within L2), and of
/// each batch evaluated inputs are evaluated over (`evaluated`).
const SLAB_CELLS: u64 = 16 * 1024;

/// Which accumulators an aggregate needs.
fn needs(spec: &AggSpec) -> Needs {
    let mut n = Needs::default();
    match spec.func {
        AggFunc::CountStar | AggFunc::Count => {}
        AggFunc::Sum if spec.states()[0].1 != DataType::Float64 => n.isum = true,
        AggFunc::Sum | AggFunc::Avg => n.fsum = true,
        AggFunc::Min | AggFunc::Max => n.min_max = true,
        _ => {
            n.moments = true;
            n.fsum = true;
        }
    }
    n
}

fn union(a: Needs, b: Needs) -> Needs {
    Needs {
        fsum: a.fsum || b.fsum,
        isum: a.isum || b.isum,
        min_max: a.min_max || b.min_max,
        moments: a.moments || b.moments,
    }
}

/// What one set of accumulators folds.
#[derive(Debug, Clone, PartialEq)]
enum Source {
    /// The tile's stored values kept by `ranges`; without the tile (a table of several
    /// datasets) the cells those ranges keep.
    Stored { ranges: ValueRanges },
    /// Expression `value` (index into the [`TileExprs`]; `None`: cells only) over the cells
    /// that pass the row filter and where expression `filter` is true. Both are evaluated
    /// on the rows the row filter keeps, as DataFusion evaluates them above its filter.
    Evaluated {
        value: Option<usize>,
        filter: Option<usize>,
    },
    /// Weight `weight` (index into [`FoldPlan::weights`]) times the stored values mapped
    /// by `value` (`None`: the weight alone), over the cells `ranges` keep.
    Weighted {
        weight: usize,
        value: Option<Affine>,
        f32_product: bool,
        ranges: ValueRanges,
    },
    /// Program `program` (index into [`FoldPlan::programs`]) over the cells `ranges` keep.
    Program { program: usize, ranges: ValueRanges },
    /// Program `program` times weight `weight` (index into [`FoldPlan::weights`]), per
    /// cell: in f32 when `f32_product` (then widened), else in f64.
    WeightedProgram {
        program: usize,
        weight: usize,
        f32_product: bool,
        ranges: ValueRanges,
    },
}

impl Source {
    /// The ranges of stored values that keep the source's cells (`None`: evaluated).
    fn ranges(&self) -> Option<&ValueRanges> {
        match self {
            Source::Stored { ranges }
            | Source::Weighted { ranges, .. }
            | Source::Program { ranges, .. }
            | Source::WeightedProgram { ranges, .. } => Some(ranges),
            Source::Evaluated { .. } => None,
        }
    }
}

/// One set of accumulators and how to read them.
#[derive(Debug, Clone)]
struct Input {
    source: Source,
    needs: Needs,
    /// The folded values are floats (else integers).
    float: bool,
    /// Integers folded are unsigned.
    unsigned: bool,
    /// The folded values are the stored ones of a packed dataset.
    packed: bool,
}

/// How an aggregation folds: its inputs, which input each aggregate reads, the
/// expressions evaluated per tile, and the input whose cells decide which groups exist.
#[derive(Debug)]
struct FoldPlan {
    inputs: Vec<Input>,
    /// Per aggregate: its input, or for a function of two inputs, its pair (index into
    /// `pairs`).
    of_agg: Vec<Slot>,
    /// The inputs of functions of two (`corr`): expressions (indices into `exprs`) and
    /// the `FILTER`.
    pairs: Vec<PairInput>,
    /// The input counting the rows that pass the row filter.
    rows: usize,
    exprs: TileExprs,
    /// The row filter (index into `exprs`), when an evaluated input needs it.
    row_filter: Option<usize>,
    /// The weights of weighted inputs: (axis, expression of it alone).
    weights: Vec<(usize, Expr)>,
    /// Compiled expressions of the value columns.
    programs: Vec<Program>,
    /// In a table of several datasets, the value columns the programs read and the
    /// filters compare (whose aligned cells each task gathers); empty otherwise.
    aligned_columns: Vec<usize>,
    /// In a table of several datasets, the distinct filters of the inputs as ranges of
    /// stored values (which cells pass each is found once per task).
    aligned_filters: Vec<ValueRanges>,
    /// Two inputs over the stored values of one float dataset folded in one pass
    /// ([`fold_run_pair`]): (sums without a range, counts within one).
    stored_pair: Option<(usize, usize)>,
}

impl FoldPlan {
    /// The pairs of compiled expressions.
    fn compiled_pairs(&self) -> impl Iterator<Item = &PairInput> {
        self.pairs.iter().filter(|p| matches!(p, PairInput::Compiled { .. }))
    }
}

/// Where an aggregate's statistics are kept.
#[derive(Debug, Clone, Copy)]
enum Slot {
    Input(usize),
    Pair(usize),
}

/// Two inputs folded as co-moments.
#[derive(Debug, Clone, PartialEq)]
enum PairInput {
    /// Expressions `x`, `y` (indices into `exprs`) over the cells that pass the row
    /// filter and where expression `filter` is true.
    Evaluated { x: usize, y: usize, filter: Option<usize> },
    /// Programs `x`, `y` (indices into `programs`) over the cells kept by the missing
    /// rules and `ranges`.
    Compiled { x: usize, y: usize, ranges: ValueRanges },
}

impl FoldPlan {
    fn new(table: &TableModel, aggregation: &Aggregation) -> Result<Self> {
        let dtype = table.dataset().dtype();
        let mut exprs: Vec<Expr> = Vec::new();
        let mut expr_index = |e: Expr| match exprs.iter().position(|x| *x == e) {
            Some(i) => i,
            None => {
                exprs.push(e);
                exprs.len() - 1
            }
        };
        let row_filter = aggregation.filter.clone();
        let mut inputs: Vec<Input> = Vec::new();
        let mut add = |input: Input| match inputs.iter().position(|x| x.source == input.source) {
            Some(i) => {
                inputs[i].needs = union(inputs[i].needs, input.needs);
                i
            }
            None => {
                inputs.push(input);
                inputs.len() - 1
            }
        };
        let stored = |ranges| Input {
            source: Source::Stored { ranges },
            needs: Needs::default(),
            float: dtype.is_float(),
            unsigned: dtype.is_unsigned(),
            packed: table.value().packing.is_some(),
        };
        // Either filter as ranges of the stored values, both combined.
        let ranges_of = |f: &Option<Expr>| match f {
            None => Some(ValueRanges::default()),
            Some(e) => value_ranges(table, e),
        };
        let combined = |f: &Option<Expr>| Some(ranges_of(&row_filter)?.and(&ranges_of(f)?));
        // Compiled expressions, shared by the inputs that evaluate them.
        let mut programs: Vec<Program> = Vec::new();
        let mut program_index = |p: Program| match programs.iter().position(|x| *x == p) {
            Some(i) => i,
            None => {
                programs.push(p);
                programs.len() - 1
            }
        };
        // Functions of two inputs fold their pairs as co-moments: of compiled expressions
        // when both compile (as for one input: without FILTER), else of evaluated ones.
        let mut pairs: Vec<PairInput> = Vec::new();
        let pair_of: Vec<Option<usize>> = aggregation
            .aggs
            .iter()
            .map(|a| {
                let AggInput::Pair(x, y) = &a.input else {
                    return None;
                };
                let compiled = match (&a.filter, combined(&None)) {
                    (None, Some(ranges)) => Program::compile(table, x)
                        .zip(Program::compile(table, y))
                        .map(|p| (p, ranges)),
                    _ => None,
                };
                let p = match compiled {
                    Some(((px, py), ranges)) => PairInput::Compiled {
                        x: program_index(px),
                        y: program_index(py),
                        ranges,
                    },
                    None => PairInput::Evaluated {
                        x: expr_index(x.clone()),
                        y: expr_index(y.clone()),
                        filter: a.filter.clone().map(&mut expr_index),
                    },
                };
                Some(pairs.iter().position(|q| *q == p).unwrap_or_else(|| {
                    pairs.push(p);
                    pairs.len() - 1
                }))
            })
            .collect();
        let mut evaluated = |value: Option<Expr>, filter: &Option<Expr>, a: Option<&AggSpec>| Input {
            source: Source::Evaluated {
                value: value.map(&mut expr_index),
                filter: filter.clone().map(&mut expr_index),
            },
            needs: Needs::default(),
            float: a.is_some_and(|a| a.input_type.is_floating()),
            unsigned: a.is_some_and(|a| a.input_type.is_unsigned_integer()),
            packed: false,
        };
        let rows = match combined(&None) {
            Some(ranges) => add(stored(ranges)),
            None => add(evaluated(None, &None, None)),
        };
        let mut of_agg = Vec::new();
        let mut weights: Vec<(usize, Expr)> = Vec::new();
        let mut weight_index = |axis: usize, e: Expr| match weights.iter().position(|x| *x == (axis, e.clone())) {
            Some(i) => i,
            None => {
                weights.push((axis, e));
                weights.len() - 1
            }
        };
        let packing = table.value().packing.map(Affine::from);
        for (a, pair) in aggregation.aggs.iter().zip(&pair_of) {
            if let Some(j) = pair {
                of_agg.push(Slot::Pair(*j));
                continue;
            }
            let plain = matches!(a.input, AggInput::Value { .. }) || a.func == AggFunc::CountStar;
            let weighted = match &a.input {
                AggInput::Expr(e) if matches!(a.func, AggFunc::Sum | AggFunc::Avg | AggFunc::Count) => {
                    weighted_input(table, e)
                }
                _ => None,
            };
            // A compiled expression of `v` without FILTER: DataFusion evaluates an input
            // on every row its filter keeps, FILTER or not (a negative square root fails
            // the query), so the rows evaluated are the rows folded.
            let program = match &a.input {
                AggInput::Expr(e) if a.filter.is_none() => Program::compile(table, e),
                _ => None,
            };
            // A compiled expression times a weight of one axis (`a * b * cos(radians(lat))`),
            // when `weighted` (one dataset's `v` times a weight) does not cover it.
            let weighted_program = match &a.input {
                AggInput::Expr(e)
                    if weighted.is_none()
                        && a.filter.is_none()
                        && matches!(a.func, AggFunc::Sum | AggFunc::Avg | AggFunc::Count) =>
                {
                    weighted_program(table, e)
                }
                _ => None,
            };
            let input = match (plain, weighted, combined(&a.filter)) {
                (true, _, Some(ranges)) => stored(ranges),
                (false, _, Some(ranges)) if program.is_some() => {
                    let program = program_index(program.expect("checked"));
                    Input {
                        source: Source::Program { program, ranges },
                        needs: Needs::default(),
                        float: true,
                        unsigned: false,
                        packed: false,
                    }
                }
                (false, None, Some(ranges)) if weighted_program.is_some() => {
                    let (w, p) = weighted_program.expect("checked");
                    Input {
                        source: Source::WeightedProgram {
                            program: program_index(p),
                            weight: weight_index(w.axis, w.weight),
                            f32_product: w.f32_product,
                            ranges,
                        },
                        needs: Needs::default(),
                        float: true,
                        unsigned: false,
                        packed: false,
                    }
                }
                (false, Some(w), Some(ranges)) => {
                    let weight = weight_index(w.axis, w.weight);
                    // The stored values are v unpacked.
                    let value = w.value.map(|m| packing.map_or(m, |p| p.then(m)));
                    Input {
                        source: Source::Weighted {
                            weight,
                            value,
                            f32_product: w.f32_product,
                            ranges,
                        },
                        needs: Needs::default(),
                        float: true,
                        unsigned: false,
                        packed: false,
                    }
                }
                _ => {
                    let value = match (&a.input, a.func) {
                        (_, AggFunc::CountStar) => None,
                        (AggInput::Value { .. }, _) => {
                            let v = Expr::Column(Column::from_name(VALUE_COLUMN));
                            Some(if a.input_type == table.value_type() {
                                v
                            } else {
                                cast(v, a.input_type.clone())
                            })
                        }
                        (AggInput::Expr(e), _) => Some(e.clone()),
                        (AggInput::Pair(..), _) => None,
                    };
                    evaluated(value, &a.filter, Some(a))
                }
            };
            let i = add(Input {
                needs: needs(a),
                ..input
            });
            of_agg.push(Slot::Input(i));
        }
        let uses_rows = pairs.iter().any(|p| matches!(p, PairInput::Evaluated { .. }))
            || inputs.iter().any(|i| matches!(i.source, Source::Evaluated { .. }));
        let row_filter = row_filter.filter(|_| uses_rows).map(&mut expr_index);
        let exprs = TileExprs::new(table, &exprs)?;
        // In a table of several datasets: the distinct filters of the inputs (which
        // cells pass each is found once per task), and the columns the programs read and
        // the filters compare.
        let mut aligned_filters: Vec<ValueRanges> = Vec::new();
        let mut aligned_columns = BTreeSet::new();
        if table.is_multi() {
            let compiled = pairs.iter().filter_map(|p| match p {
                PairInput::Compiled { ranges, .. } => Some(ranges),
                PairInput::Evaluated { .. } => None,
            });
            for r in inputs.iter().filter_map(|i| i.source.ranges()).chain(compiled) {
                if !r.is_empty() && !aligned_filters.contains(r) {
                    aligned_filters.push(r.clone());
                    aligned_columns.extend(r.columns());
                }
            }
            aligned_columns.extend(programs.iter().flat_map(|p| p.columns().iter().copied()));
        }
        let aligned_columns = aligned_columns.into_iter().collect();
        let stored_pair = match (table.is_multi(), dtype) {
            (false, DType::F32 | DType::F64) => {
                let stored = |i: &Input| match &i.source {
                    Source::Stored { ranges } => Some((ranges.of(0), i.needs)),
                    _ => None,
                };
                let sums = inputs
                    .iter()
                    .position(|i| stored(i).is_some_and(|(r, n)| r.is_none() && n.sum_only()));
                let counts = inputs
                    .iter()
                    .position(|i| stored(i).is_some_and(|(r, n)| r.is_some() && n == Needs::default()));
                sums.zip(counts)
            }
            _ => None,
        };
        Ok(FoldPlan {
            stored_pair,
            aligned_columns,
            aligned_filters,
            inputs,
            of_agg,
            pairs,
            rows,
            exprs,
            row_filter,
            weights,
            programs,
        })
    }
}

/// Grouped aggregation over the selected chunks of a table (one dataset, or several on
/// one grid).
#[derive(Debug)]
pub struct TetAggregateExec {
    table: Arc<TableModel>,
    aggregation: Aggregation,
    feed: ChunkFeed,
    fetch: FetchOptions,
    output: AggregateOutput,
    schema: SchemaRef,
    fold: Arc<FoldPlan>,
    metrics: ExecutionPlanMetricsSet,
    cache: Arc<PlanProperties>,
}

impl TetAggregateExec {
    /// Fold `aggregation` over the cells `feed` plans, emitting `output`; object store
    /// payloads are read as `fetch` says. The aggregation must fit the table
    /// ([`Aggregation::check`]), and for [`AggregateOutput::Values`] one output
    /// ([`Aggregation::fits_one_output`]).
    pub fn try_new(
        table: Arc<TableModel>,
        aggregation: Aggregation,
        feed: ChunkFeed,
        fetch: FetchOptions,
        output: AggregateOutput,
    ) -> Result<Self> {
        if let Err(e) = aggregation.check(&table) {
            return internal_err!("TetAggregateExec over {}: {e}", table.source.location);
        }
        if output == AggregateOutput::Values && !aggregation.fits_one_output(&table) {
            return internal_err!(
                "TetAggregateExec over {}: {} group slots do not fit one output",
                table.source.location,
                aggregation.dense_groups(&table)
            );
        }
        let schema = aggregation.schema(output);
        let fold = Arc::new(FoldPlan::new(&table, &aggregation)?);
        Ok(TetAggregateExec {
            cache: Arc::new(Self::properties_for(&schema, &feed, output)),
            fold,
            table,
            aggregation,
            feed,
            fetch,
            output,
            schema,
            metrics: ExecutionPlanMetricsSet::new(),
        })
    }

    fn properties_for(schema: &SchemaRef, feed: &ChunkFeed, output: AggregateOutput) -> PlanProperties {
        let properties = feed.properties(schema, EmissionType::Final);
        match output {
            AggregateOutput::States => properties,
            AggregateOutput::Values => properties.with_partitioning(Partitioning::UnknownPartitioning(1)),
        }
    }

    /// The same aggregation over another feed (fresh metrics).
    fn with_feed(&self, feed: ChunkFeed) -> Self {
        TetAggregateExec {
            table: self.table.clone(),
            aggregation: self.aggregation.clone(),
            fetch: self.fetch,
            output: self.output,
            schema: self.schema.clone(),
            fold: self.fold.clone(),
            cache: Arc::new(Self::properties_for(&self.schema, &feed, self.output)),
            feed,
            metrics: ExecutionPlanMetricsSet::new(),
        }
    }

    /// What is aggregated.
    pub fn aggregation(&self) -> &Aggregation {
        &self.aggregation
    }

    /// The table folded.
    pub fn table(&self) -> &Arc<TableModel> {
        &self.table
    }

    /// The access plan, and which partition folds which chunks.
    pub fn feed(&self) -> &ChunkFeed {
        &self.feed
    }

    /// What the node emits.
    pub fn output(&self) -> AggregateOutput {
        self.output
    }

    fn describe(&self) -> (String, String) {
        let axes = &self.table.axes;
        let groups: Vec<String> = self
            .aggregation
            .groups
            .iter()
            .map(|k| match &k.expr {
                None => axes[k.axis].name.clone(),
                Some(e) => e.to_string(),
            })
            .collect();
        let v_type = self.table.value_type();
        let mut aggs: Vec<String> = self
            .aggregation
            .aggs
            .iter()
            .map(|a| {
                let arg = match (&a.input, a.func) {
                    (_, AggFunc::CountStar) => "count(*)".to_string(),
                    (AggInput::Value { affine: None }, f) if a.input_type == v_type => format!("{}(v)", f.name()),
                    (AggInput::Value { affine: None }, f) => format!("{}(v AS {})", f.name(), a.input_type),
                    (AggInput::Value { affine: Some(m) }, f) => {
                        // `+ 0.0` shows the offset -0.0 of a map without one as 0.
                        format!("{}(v * {} + {})", f.name(), m.scale, m.offset + 0.0)
                    }
                    (AggInput::Expr(e), f) => format!("{}({e})", f.name()),
                    (AggInput::Pair(x, y), f) => format!("{}({x}, {y})", f.name()),
                };
                match &a.filter {
                    Some(p) => format!("{arg} FILTER (WHERE {p})"),
                    None => arg,
                }
            })
            .collect();
        if let Some(p) = &self.aggregation.filter {
            aggs.push(format!("where {p}"));
        }
        (groups.join(", "), aggs.join(", "))
    }
}

impl DisplayAs for TetAggregateExec {
    fn fmt_as(&self, t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        let (g, a) = self.describe();
        let location = &self.table.source.location;
        let (chunks, total) = (self.feed.len(), self.feed.access.pruning.chunks_total);
        let output = match self.output {
            AggregateOutput::States => "states",
            AggregateOutput::Values => "values",
        };
        match t {
            DisplayFormatType::Default | DisplayFormatType::Verbose => write!(
                f,
                "TetAggregateExec: file={location}, {}, group_by=[{g}], aggr=[{a}], chunks={chunks}/{total}, output={output}",
                self.table.datasets_text(),
            ),
            DisplayFormatType::TreeRender => {
                writeln!(f, "file={location}")?;
                writeln!(f, "{}", self.table.datasets_text())?;
                writeln!(f, "group_by=[{g}]")?;
                writeln!(f, "aggr=[{a}]")?;
                writeln!(f, "chunks={chunks}/{total}")?;
                writeln!(f, "output={output}")
            }
        }
    }
}

impl ExecutionPlan for TetAggregateExec {
    chunk_node_methods!("TetAggregateExec");

    fn execute(&self, partition: usize, context: Arc<TaskContext>) -> Result<SendableRecordBatchStream> {
        let job = FoldJob {
            table: self.table.clone(),
            aggregation: self.aggregation.clone(),
            fold: self.fold.clone(),
            feed: self.feed.clone(),
            fetch: self.fetch,
            metrics: self.metrics.clone(),
        };
        let schema = self.schema.clone();
        let stream = match self.output {
            AggregateOutput::States => futures::stream::once(Box::pin(async move {
                // Group keys and weights over the stretch this partition's chunks cover: a
                // partition of a fold split along its grouped axes holds only its own groups.
                let tasks = job
                    .feed
                    .tasks_of(partition, context.clone(), "TetAggregateExec")
                    .await?;
                let selection = job.feed.access.covered(&tasks, &job.table.dataset().record.chunk_shape);
                let groups = Arc::new(job.groups(&selection)?);
                let folded = job.fold_partition(partition, tasks, &groups, context).await?;
                let _t = folded.metrics.baseline.elapsed_compute().timer();
                let batch = job.emit_states(&folded.accs, &folded.pairs, &groups.index, false)?;
                folded.metrics.baseline.record_output(batch.num_rows());
                Ok(batch)
            }))
            .boxed(),
            AggregateOutput::Values if partition == 0 => {
                futures::stream::once(Box::pin(async move { job.fold_all(context, schema).await })).boxed()
            }
            AggregateOutput::Values => {
                return internal_err!("TetAggregateExec has one output partition, asked for {partition}");
            }
        };
        let adapter = RecordBatchStreamAdapter::new(self.schema.clone(), stream);
        Ok(Box::pin(datafusion::physical_plan::coop::cooperative(adapter)))
    }
}

/// The group index and axis weights over a selection, shared by the partitions that fold
/// into its groups.
struct Groups {
    index: GroupIndex,
    weights: Vec<AxisValues>,
}

/// What one partition's fold produced: an accumulator per input, co-moments per pair,
/// the partition's metrics and the memory reserved for them.
struct Folded {
    accs: Vec<Accumulators>,
    pairs: Vec<Vec<CoMoment>>,
    metrics: AggregateMetrics,
    _reservation: MemoryReservation,
}

/// Everything a partition's fold needs, cloned into the tasks that run it.
#[derive(Clone)]
struct FoldJob {
    table: Arc<TableModel>,
    aggregation: Aggregation,
    fold: Arc<FoldPlan>,
    feed: ChunkFeed,
    fetch: FetchOptions,
    metrics: ExecutionPlanMetricsSet,
}

impl FoldJob {
    /// The group index and the axis weights over `selection`.
    fn groups(&self, selection: &[AxisSelection]) -> Result<Groups> {
        let table = &self.table;
        let index = GroupIndex::new(table, &self.aggregation, selection)?;
        let weights = self
            .fold
            .weights
            .iter()
            .map(|(d, e)| AxisValues::new(table, *d, e, &selection[*d]))
            .collect::<Result<Vec<_>>>()?;
        Ok(Groups { index, weights })
    }

    /// Fold `tasks`, those of output `partition` of the feed, into `groups`.
    async fn fold_partition(
        &self,
        partition: usize,
        tasks: Vec<Arc<ChunkTask>>,
        groups: &Groups,
        context: Arc<TaskContext>,
    ) -> Result<Folded> {
        let table = &self.table;
        let metrics = AggregateMetrics::new(&self.metrics, partition, &self.feed.access.pruning, table.is_remote());
        let mut reservation =
            MemoryConsumer::new(format!("TetAggregateExec[{partition}]")).register(context.memory_pool());
        let tiles = PoolAccount::new(context.memory_pool(), format!("TetAggregateExec[{partition}] tiles"));
        let payloads = payload_stream(
            table.clone(),
            tasks,
            self.aggregation.value_columns(table),
            self.fetch,
            PayloadMetrics {
                read: metrics.read.clone(),
                decode: metrics.fold_timers.to_vec(),
            },
            tiles,
        );
        let (accs, pairs) = self.fold(payloads, groups, &metrics, &mut reservation).await?;
        Ok(Folded {
            accs,
            pairs,
            metrics,
            _reservation: reservation,
        })
    }

    /// Fold every partition of the feed, each in a task of its own (as DataFusion runs
    /// partitions), into groups over the whole selection; merge them in partition order,
    /// so that the answer does not depend on which finishes first, and emit each
    /// aggregate's value ([`AggregateOutput::Values`]).
    async fn fold_all(self, context: Arc<TaskContext>, schema: SchemaRef) -> Result<RecordBatch> {
        let groups = Arc::new(self.groups(&self.feed.access.selection)?);
        let partition = |p: usize| {
            let (job, groups, context) = (self.clone(), groups.clone(), context.clone());
            async move {
                let tasks = job.feed.tasks_of(p, context.clone(), "TetAggregateExec").await?;
                job.fold_partition(p, tasks, &groups, context).await
            }
        };
        let n = self.feed.partition_count();
        let mut folded = Vec::with_capacity(n);
        if n == 1 {
            folded.push(partition(0).await?);
        } else {
            let running: Vec<_> = (0..n).map(|p| SpawnedTask::spawn(partition(p))).collect();
            for task in running {
                folded.push(
                    task.join_unwind()
                        .await
                        .map_err(|e| DataFusionError::ExecutionJoin(Box::new(e)))??,
                );
            }
        }
        let mut parts = folded.into_iter();
        let Some(mut all) = parts.next() else {
            return internal_err!("TetAggregateExec: a feed of no partitions");
        };
        for part in parts {
            for (a, b) in all.accs.iter_mut().zip(&part.accs) {
                a.merge(b);
            }
            for (a, b) in all.pairs.iter_mut().zip(&part.pairs) {
                a.iter_mut().zip(b).for_each(|(a, b)| a.merge(*b));
            }
        }
        all.accs.iter_mut().for_each(Accumulators::settle);
        let _t = all.metrics.baseline.elapsed_compute().timer();
        // Without keys, SQL's aggregate has one row even over no cells.
        let every_group = self.aggregation.groups.is_empty();
        let states = self.emit_states(&all.accs, &all.pairs, &groups.index, every_group)?;
        let batch = self.finish(&states, schema)?;
        all.metrics.baseline.record_output(batch.num_rows());
        Ok(batch)
    }

    /// Each aggregate's value from its partial states (`states`, as [`Self::emit_states`]
    /// makes them), as DataFusion's merge of them would finish: counts and sums as they
    /// are, a mean as the sum over the count, the variance family and the co-moment
    /// functions by [`Moments::finish`] and [`CoMoment::finish`].
    fn finish(&self, states: &RecordBatch, schema: SchemaRef) -> Result<RecordBatch> {
        let keys = self.aggregation.groups.len();
        let mut cols: Vec<ArrayRef> = states.columns()[..keys].to_vec();
        for (i, spec) in self.aggregation.aggs.iter().enumerate() {
            let state = |s: State| -> Result<&ArrayRef> {
                let name = self.aggregation.state_name(i, s);
                states
                    .column_by_name(&name)
                    .ok_or_else(|| DataFusionError::Internal(format!("TetAggregateExec: no state {name}")))
            };
            let f64s = |s: State| -> Result<ArrayRef> { Ok(arrow::compute::cast(state(s)?, &DataType::Float64)?) };
            let u64s = |s: State| -> Result<ArrayRef> { Ok(arrow::compute::cast(state(s)?, &DataType::UInt64)?) };
            let value: ArrayRef = match spec.func {
                AggFunc::CountStar => state(State::Cells)?.clone(),
                AggFunc::Count | AggFunc::Sum | AggFunc::Min | AggFunc::Max => {
                    let s = match spec.func {
                        AggFunc::Count => State::Count,
                        AggFunc::Sum => State::Sum,
                        AggFunc::Min => State::Min,
                        _ => State::Max,
                    };
                    state(s)?.clone()
                }
                AggFunc::Avg => arrow::compute::kernels::numeric::div(&f64s(State::Sum)?, &f64s(State::Count)?)?,
                f if f.is_moment() => {
                    let (n, mean, m2) = (u64s(State::Count)?, f64s(State::Mean)?, f64s(State::M2)?);
                    let (n, mean, m2) = (
                        n.as_primitive::<UInt64Type>(),
                        mean.as_primitive::<Float64Type>(),
                        m2.as_primitive::<Float64Type>(),
                    );
                    Arc::new(Float64Array::from_iter((0..n.len()).map(|g| {
                        let m = Moments {
                            n: n.value(g),
                            mean: mean.value(g),
                            m2: m2.value(g),
                        };
                        m.finish(f)
                    })))
                }
                f => {
                    let n = u64s(State::Count)?;
                    let n = n.as_primitive::<UInt64Type>();
                    let parts = [State::Mean, State::MeanY, State::M2, State::M2Y, State::CoM2]
                        .map(f64s)
                        .into_iter()
                        .collect::<Result<Vec<_>>>()?;
                    let v: Vec<&Float64Array> = parts.iter().map(|a| a.as_primitive::<Float64Type>()).collect();
                    Arc::new(Float64Array::from_iter((0..n.len()).map(|g| {
                        CoMoment::from_state(n.value(g), std::array::from_fn(|k| v[k].value(g))).finish(f)
                    })))
                }
            };
            cols.push(arrow::compute::cast(&value, &spec.value_type())?);
        }
        Ok(RecordBatch::try_new(schema, cols)?)
    }

    /// Fold `payloads` into accumulators over `groups`.
    async fn fold(
        &self,
        mut payloads: BoxStream<'static, Result<Payload>>,
        groups: &Groups,
        metrics: &AggregateMetrics,
        reservation: &mut MemoryReservation,
    ) -> Result<(Vec<Accumulators>, Vec<Vec<CoMoment>>)> {
        let table = &self.table;
        let ds = table.dataset();
        let (gi, weights) = (&groups.index, &groups.weights);
        // The session's memory pool holds what the fold keeps per group and position
        // (`-m` / `memory_limit` give DataFusion's "resources exhausted", not an OOM kill);
        // the accumulators are reserved before they are allocated.
        let dense: usize = self
            .fold
            .inputs
            .iter()
            .map(|i| Accumulators::bytes(gi.count, i.needs, i.float))
            .chain(
                self.fold
                    .pairs
                    .iter()
                    .map(|_| gi.count.saturating_mul(size_of::<CoMoment>())),
            )
            .fold(0, usize::saturating_add);
        let by_position: usize = gi.held_bytes() + weights.iter().map(AxisValues::held_bytes).sum::<usize>();
        let slabs = evaluated::slab_bytes(&self.fold);
        reservation
            .try_grow(dense.saturating_add(by_position).saturating_add(slabs))
            .map_err(|e| {
                exhausted(e, || {
                    format!(
                        "{} groups and positions of {}",
                        gi.count,
                        table.values.iter().map(|v| v.describe()).collect::<Vec<_>>().join(", ")
                    )
                })
            })?;
        let mut accs: Vec<Accumulators> = self
            .fold
            .inputs
            .iter()
            .map(|i| Accumulators::new(gi.count, i.needs, i.float))
            .collect();
        let mut pairs: Vec<Vec<CoMoment>> = vec![vec![CoMoment::default(); gi.count]; self.fold.pairs.len()];
        while let Some(next) = payloads.next().await {
            // Local payloads are always ready: spend the task's budget per chunk so a long
            // fold yields to the runtime now and then (and a cancelled query stops).
            tokio::task::consume_budget().await;
            let (task, tiles) = next?;
            let _fold = Stopwatch::start(&metrics.fold_timers);
            let start = task.tile_start(&ds.record.chunk_shape);
            // The kernels over stored values read the one value column of a table of one
            // dataset; compiled expressions over a table of several read the aligned cells
            // of the columns they name.
            let tile = tiles.first().cloned().flatten().filter(|_| !table.is_multi());
            let aligned = match self.fold.aligned_columns.is_empty() {
                true => None,
                false => Some(AlignedCells::new(
                    table,
                    &task,
                    &tiles,
                    &self.fold.aligned_columns,
                    &self.fold.aligned_filters,
                )?),
            };
            let cells = match &aligned {
                Some(a) => TaskCells::Aligned(a),
                None => TaskCells::Tile(tile.as_ref()),
            };
            // Inputs over stored values walk the tile slab by slab, all of them per slab,
            // so that each slab is read from memory once and from cache by the others.
            // Only inputs that read values count: not a stored input without its tile or
            // ranges, nor one counting every cell where nothing is missing, nor a weight
            // alone (`sum(cos(radians(lat)))` beside `sum(v * cos(radians(lat)))` took
            // 1.9× the floor, paired, walked in slabs). Over several datasets, a stored
            // input with ranges counts the aligned cells that pass them.
            let aligned_rows = |ranges: &ValueRanges| aligned.is_some() && !ranges.is_empty();
            let missing = !table.value().missing.is_empty();
            let direct = self
                .fold
                .inputs
                .iter()
                .filter(|i| match &i.source {
                    Source::Evaluated { .. } => false,
                    Source::Stored { ranges } if !i.needs.reads_values(missing, !ranges.is_empty()) => false,
                    Source::Weighted {
                        value: None, ranges, ..
                    } if ranges.is_empty() => false,
                    Source::Stored { ranges } => tile.is_some() || aligned_rows(ranges),
                    _ => true,
                })
                .count()
                + self.fold.compiled_pairs().count()
                - usize::from(self.fold.stored_pair.is_some() && tile.is_some());
            let slab_cells = if direct > 1 && (tile.is_some() || aligned.is_some()) {
                SLAB_CELLS
            } else {
                u64::MAX
            };
            let mut cell_base = 0usize;
            for slab in task.slabs(slab_cells) {
                let slab = &slab;
                let walk = CellWalk {
                    table,
                    gi,
                    task: slab,
                    start: &start,
                    cells,
                    cell_base,
                };
                let pair = self.fold.stored_pair.zip(tile.as_ref());
                if let Some(((a, b), tile)) = pair {
                    let range = self.fold.inputs[b].source.ranges().and_then(|r| r.of(0));
                    let [sums, counts] = accs
                        .get_disjoint_mut([a, b])
                        .map_err(|e| DataFusionError::Internal(format!("stored pair ({a}, {b}): {e}")))?;
                    fold_stored_pair(table, (sums, counts), gi, slab, &start, tile, range);
                }
                for (i, (input, acc)) in self.fold.inputs.iter().zip(accs.iter_mut()).enumerate() {
                    if pair.is_some_and(|((a, b), _)| i == a || i == b) {
                        continue;
                    }
                    let tile = tile.as_ref();
                    match &input.source {
                        Source::Stored { ranges } if aligned_rows(ranges) => {
                            let mut kernel = RowKernel {
                                acc,
                                at: vec![0; BLOCK],
                            };
                            // The cells that pass hold values in the columns compared.
                            walk.run(&[], ranges, None, &mut kernel)?
                        }
                        Source::Stored { ranges } => fold_stored(table, acc, gi, slab, &start, tile, ranges.of(0)),
                        Source::Program { program, ranges } => {
                            let program = &self.fold.programs[*program];
                            let mut kernel = ProgramKernel {
                                acc,
                                program,
                                scratch: program.scratch(),
                                at: vec![0; BLOCK],
                            };
                            let columns = program.columns();
                            walk.run(columns, ranges, None, &mut kernel)?
                        }
                        Source::Weighted {
                            weight,
                            value,
                            f32_product,
                            ranges,
                        } => {
                            let w = Weights {
                                axis: self.fold.weights[*weight].0,
                                values: &weights[*weight],
                                value: *value,
                                f32_product: *f32_product,
                            };
                            fold_weighted(table, acc, gi, slab, &start, tile, w, ranges.of(0))?
                        }
                        Source::WeightedProgram {
                            program,
                            weight,
                            f32_product,
                            ranges,
                        } => {
                            let program = &self.fold.programs[*program];
                            let axis = self.fold.weights[*weight].0;
                            let mut kernel = WeightedProgramKernel {
                                acc,
                                program,
                                weights: &weights[*weight],
                                inner: axis == task.tile_extent.len() - 1,
                                f32_product: *f32_product,
                                scratch: program.scratch(),
                                at: vec![0; BLOCK],
                                products: vec![0.0; BLOCK],
                            };
                            let (columns, split) = (program.columns(), Some(axis));
                            walk.run(columns, ranges, split, &mut kernel)?
                        }
                        Source::Evaluated { .. } => {}
                    }
                }
                for (p, acc) in self.fold.pairs.iter().zip(pairs.iter_mut()) {
                    if let PairInput::Compiled { x, y, ranges } = p {
                        let (x, y) = (&self.fold.programs[*x], &self.fold.programs[*y]);
                        let columns: Vec<usize> = x.columns().iter().chain(y.columns()).copied().collect();
                        let mut kernel = PairKernel {
                            acc,
                            x,
                            y,
                            sx: x.scratch(),
                            sy: y.scratch(),
                            at: vec![0; BLOCK],
                        };
                        walk.run(&columns, ranges, None, &mut kernel)?
                    }
                }
                cell_base += slab.cells as usize;
            }
            // Evaluated inputs and pairs: DataFusion's expressions, slab by slab.
            evaluated::fold_task(&self.fold, table, gi, &task, &start, &tiles, &mut accs, &mut pairs)?;
        }
        accs.iter_mut().for_each(Accumulators::settle);
        Ok((accs, pairs))
    }

    /// The keys and partial states of the groups a row folded into, or of `every_group`.
    fn emit_states(
        &self,
        accs: &[Accumulators],
        pairs: &[Vec<CoMoment>],
        gi: &GroupIndex,
        every_group: bool,
    ) -> Result<RecordBatch> {
        let rows = &accs[self.fold.rows];
        let touched: Vec<usize> = (0..rows.len()).filter(|&g| every_group || rows.cells[g] > 0).collect();
        let mut cols = gi.key_columns(&touched)?;
        for column in self.aggregation.state_columns() {
            cols.push(match self.fold.of_agg[column.agg] {
                Slot::Input(i) => self.state_array(&column, &self.fold.inputs[i], &accs[i], &touched)?,
                Slot::Pair(j) => comoment_array(column.state, &pairs[j], &touched)?,
            });
        }
        Ok(RecordBatch::try_new(
            self.aggregation.schema(AggregateOutput::States),
            cols,
        )?)
    }

    /// One partial-state column over the `touched` groups. The accumulators hold
    /// statistics of the folded values; the aggregate's input is those values mapped by
    /// an affine map (a packed dataset's `x·s + o`, an affine input such as `v * 1.8 + 32`,
    /// or both): sums map by `s·sum + o·n`, means likewise, M2 by `s²`, and the minimum and
    /// maximum swap when `s` has its sign set (-0.0 included).
    fn state_array(
        &self,
        column: &StateColumn,
        input: &Input,
        acc: &Accumulators,
        touched: &[usize],
    ) -> Result<ArrayRef> {
        let nonempty = |g: usize| acc.n[g] > 0;
        let f64s = |v: &[f64], map: &dyn Fn(usize, f64) -> f64| -> ArrayRef {
            Arc::new(Float64Array::from_iter(
                touched.iter().map(|&g| nonempty(g).then(|| map(g, v[g]))),
            ))
        };
        let spec = &self.aggregation.aggs[column.agg];
        let packing = self.table.value().packing.filter(|_| input.packed).map(Affine::from);
        let affine = match spec.input {
            AggInput::Value { affine } => affine,
            AggInput::Expr(_) | AggInput::Pair(..) => None,
        };
        let map = match (packing, affine) {
            (Some(p), Some(a)) => Some(p.then(a)),
            (p, a) => p.or(a),
        };
        // Extremes of the folded values: (smallest non-NaN, largest non-NaN, saw NaN).
        let extreme = |g: usize, low: bool| -> f64 {
            if !acc.fmin.is_empty() {
                if low { acc.fmin[g] } else { acc.fmax[g] }
            } else if low {
                acc.imin[g] as f64
            } else {
                acc.imax[g] as f64
            }
        };
        // The minimum or maximum of the folded values mapped by `m`, in DataFusion's
        // order of floats: a positive NaN is the largest value, a negative one the
        // smallest; without a number among them the extreme is a NaN of the other sign.
        let float_extreme = |g: usize, is_min: bool, m: Affine| -> f64 {
            let (beyond, other) = if is_min {
                (NAN_NEGATIVE, -f64::NAN)
            } else {
                (NAN_POSITIVE, f64::NAN)
            };
            if !acc.nan.is_empty() && acc.nan[g] & beyond != 0 {
                return other;
            }
            // A scale of -0.0 reverses the order of the zeros it makes, as a negative one
            // reverses the numbers.
            let raw = extreme(g, is_min != m.scale.is_sign_negative());
            if raw.is_nan() { -other } else { m.apply(raw) }
        };
        let same = |_: usize, x: f64| x;
        if let Some(m) = map {
            match column.state {
                State::Sum => return Ok(f64s(&acc.fsum, &|g, x| m.scale * x + m.offset * acc.n[g] as f64)),
                State::Mean => return Ok(f64s(&acc.mean, &|_, x| m.apply(x))),
                State::M2 => return Ok(f64s(&acc.m2, &|_, x| m.scale * m.scale * x)),
                State::Min | State::Max => {
                    let is_min = column.state == State::Min;
                    let arr: ArrayRef = Arc::new(Float64Array::from_iter(
                        touched
                            .iter()
                            .map(|&g| nonempty(g).then(|| float_extreme(g, is_min, m))),
                    ));
                    return Ok(arrow::compute::cast(&arr, &column.data_type)?);
                }
                State::Cells | State::Count | State::MeanY | State::M2Y | State::CoM2 => {}
            }
        }
        let counts = |v: &[u64]| -> ArrayRef {
            match column.data_type {
                DataType::UInt64 => Arc::new(UInt64Array::from_iter_values(touched.iter().map(|&g| v[g]))),
                _ => Arc::new(Int64Array::from_iter_values(touched.iter().map(|&g| v[g] as i64))),
            }
        };
        Ok(match (column.state, &column.data_type) {
            (State::Cells, _) => counts(&acc.cells),
            (State::Count, _) => counts(&acc.n),
            (State::Sum, DataType::Float64) => f64s(&acc.fsum, &same),
            (State::Sum, DataType::Int64) => Arc::new(Int64Array::from_iter(
                touched.iter().map(|&g| nonempty(g).then(|| acc.isum[g])),
            )),
            (State::Sum, DataType::UInt64) => Arc::new(UInt64Array::from_iter(
                touched.iter().map(|&g| nonempty(g).then(|| acc.isum[g] as u64)),
            )),
            (State::Min | State::Max, t) => {
                let is_min = column.state == State::Min;
                let arr: ArrayRef = if !acc.fmin.is_empty() {
                    Arc::new(Float64Array::from_iter(
                        touched
                            .iter()
                            .map(|&g| nonempty(g).then(|| float_extreme(g, is_min, Affine::IDENTITY))),
                    ))
                } else {
                    let v = touched
                        .iter()
                        .map(|&g| nonempty(g).then(|| if is_min { acc.imin[g] } else { acc.imax[g] }));
                    if input.unsigned {
                        Arc::new(UInt64Array::from_iter(v.map(|x| x.map(|x| x as u64))))
                    } else {
                        Arc::new(Int64Array::from_iter(v.map(|x| x.map(|x| x as i64))))
                    }
                };
                arrow::compute::cast(&arr, t)?
            }
            (State::Mean, _) => f64s(&acc.mean, &same),
            (State::M2, _) => f64s(&acc.m2, &same),
            (State::Sum, t) => {
                return Err(DataFusionError::Internal(format!(
                    "TetAggregateExec: a sum state of type {t}"
                )));
            }
            (s @ (State::MeanY | State::M2Y | State::CoM2), _) => {
                return internal_err!("TetAggregateExec: a {s:?} state of one input");
            }
        })
    }
}

/// One co-moment state column over the `touched` groups (NULL where a group has no pair).
fn comoment_array(state: State, acc: &[CoMoment], touched: &[usize]) -> Result<ArrayRef> {
    let at = |g: usize| acc[g];
    if state == State::Count {
        return Ok(Arc::new(UInt64Array::from_iter_values(
            touched.iter().map(|&g| at(g).n),
        )));
    }
    let pick = |m: CoMoment| match state {
        State::Mean => Ok(m.mean_x),
        State::MeanY => Ok(m.mean_y),
        State::M2 => Ok(m.m2_x),
        State::M2Y => Ok(m.m2_y),
        State::CoM2 => Ok(m.c2),
        other => internal_err!("TetAggregateExec: no {other:?} state of a pair of inputs"),
    };
    let values = touched
        .iter()
        .map(|&g| {
            let m = at(g);
            if m.n == 0 { Ok(None) } else { pick(m).map(Some) }
        })
        .collect::<Result<Float64Array>>()?;
    Ok(Arc::new(values))
}

/// Fold the stored values of one chunk task (`tile`; without it only cells are counted)
/// into `acc`, keeping those in `range`.
fn fold_stored(
    table: &TableModel,
    acc: &mut Accumulators,
    gi: &GroupIndex,
    task: &ChunkTask,
    start: &[u64],
    tile: Option<&Buffer>,
    range: Option<KeyRange>,
) {
    let Some(tile) = tile else {
        let mut count = |g: usize, cells: usize| {
            acc.cells[g] += cells as u64;
            acc.n[g] += cells as u64;
        };
        walk_rows(gi, task, start, |w| match w {
            Walked::Segment(s) => match s.target {
                Target::One(g) => count(g, s.len),
                t @ Target::Each { .. } => (0..s.len).for_each(|i| count(t.group(i), 1)),
            },
            Walked::Rows(r) => r.groups().for_each(|g| count(g, r.row_len)),
        });
        return;
    };
    with_dtype!(table.dataset().dtype(), T => {
        let keep = Keep {
            missing: Missing::<T>::of(&table.value().missing),
            range,
        };
        let t = elements::<T>(tile);
        walk_rows(gi, task, start, |w| match w {
            Walked::Segment(s) => fold_segment(acc, &s, &t[s.tile_offset..s.tile_offset + s.len], &keep),
            Walked::Rows(r) => fold_rows(acc, &t, &r, &keep),
        });
    })
}

/// [`fold_stored`] of the plan's stored pair: `sums` over every stored value of the task,
/// `counts` over those in `range`, in one walk (whole runs in one pass).
fn fold_stored_pair(
    table: &TableModel,
    (sums, counts): (&mut Accumulators, &mut Accumulators),
    gi: &GroupIndex,
    task: &ChunkTask,
    start: &[u64],
    tile: &Buffer,
    range: Option<KeyRange>,
) {
    with_dtype!(table.dataset().dtype(), T => {
        let missing = Missing::<T>::of(&table.value().missing);
        let keep_sums = Keep {
            missing: missing.clone(),
            range: None,
        };
        let keep_counts = Keep { missing, range };
        let t = elements::<T>(tile);
        // Segments, not blocks of rows: a kernel folding a block of rows of the pair (as
        // `fold_rows` folds them) took 23.7-24.6 ms against 23.0-23.3 ms this way on
        // `count(*) FILTER (WHERE v > 290), avg(v) ... GROUP BY lat` (alternating builds).
        walk_segments(gi, task, start, None, |s| {
            let run = &t[s.tile_offset..s.tile_offset + s.len];
            match s.target {
                Target::One(g) => fold_run_pair(sums, counts, g, run, &keep_sums, &keep_counts),
                _ => {
                    fold_segment(sums, &s, run, &keep_sums);
                    fold_segment(counts, &s, run, &keep_counts);
                }
            }
        });
    })
}

/// A weighted input's weights: per position of `axis`, times the stored values mapped by
/// `value` (`None`: the weights alone).
#[derive(Clone, Copy)]
struct Weights<'a> {
    axis: usize,
    values: &'a AxisValues,
    value: Option<Affine>,
    /// Products in f32 ([`Weighted::f32_product`](crate::plan::Weighted)).
    f32_product: bool,
}

/// Fold a weighted input over one chunk task: per segment, one weight times the sum of
/// its kept values (the weight's axis is an outer one) or a dot product (the innermost).
#[allow(clippy::too_many_arguments)]
fn fold_weighted(
    table: &TableModel,
    acc: &mut Accumulators,
    gi: &GroupIndex,
    task: &ChunkTask,
    start: &[u64],
    tile: Option<&Buffer>,
    w: Weights,
    range: Option<KeyRange>,
) -> Result<()> {
    let inner = w.axis == task.tile_extent.len() - 1;
    let (values, valid) = (&w.values.values, &w.values.valid);
    let reads_values = w.value.is_some() || range.is_some();
    let Some(tile) = tile.filter(|_| reads_values) else {
        // Neither the weight nor a condition reads the values: every cell is kept.
        if reads_values {
            return internal_err!("TetAggregateExec: a weighted input of v without its tile");
        }
        walk_segments(gi, task, start, Some(w.axis), |s| {
            let p = (s.pos - w.values.first) as usize;
            if let (Target::One(g), false) = (s.target, inner) {
                acc.cells[g] += s.len as u64;
                if valid[p] {
                    acc.n[g] += s.len as u64;
                    if acc.needs.fsum {
                        acc.fsum[g] += values[p] * s.len as f64;
                    }
                }
                return;
            }
            for i in 0..s.len {
                let p = p + if inner { i } else { 0 };
                let g = s.target.group(i);
                acc.cells[g] += 1;
                if valid[p] {
                    acc.n[g] += 1;
                    if acc.needs.fsum {
                        acc.fsum[g] += values[p];
                    }
                }
            }
        });
        return Ok(());
    };
    with_dtype!(table.dataset().dtype(), T => {
        // A NULL value matters only where the weight multiplies it or a condition reads it.
        let missing = if w.value.is_some() || range.is_some() {
            Missing::<T>::of(&table.value().missing)
        } else {
            Missing::default()
        };
        let keep = Keep { missing, range };
        let t = elements::<T>(tile);
        // One product per case, so the loops over elements do not branch on it.
        let walk = WeightedWalk { gi, task, start, w, inner };
        match (w.value, w.f32_product) {
            (None, _) => walk.fold(acc, &t, &keep, |_: T, w_| w_),
            (Some(_), true) => walk.fold(acc, &t, &keep, |x: T, w_| (x.f32() * (w_ as f32)) as f64),
            (Some(m), false) => walk.fold(acc, &t, &keep, move |x: T, w_| m.apply(x.f()) * w_),
        }
    });
    Ok(())
}

/// The segments of one chunk task a weighted input folds, split at each position of the
/// weight's axis.
#[derive(Clone, Copy)]
struct WeightedWalk<'a> {
    gi: &'a GroupIndex,
    task: &'a ChunkTask,
    start: &'a [u64],
    w: Weights<'a>,
    /// The weight's axis is the innermost one.
    inner: bool,
}

impl WeightedWalk<'_> {
    /// Fold the tile's elements `t`: `product(x, weight)` per kept element with a weight.
    fn fold<T: Elem>(self, acc: &mut Accumulators, t: &[T], keep: &Keep<T>, product: impl Fn(T, f64) -> f64 + Copy) {
        let (w, inner) = (self.w, self.inner);
        let (values, valid) = (&w.values.values, &w.values.valid);
        let weight = |p: usize| valid[p].then_some(values[p]);
        walk_segments(self.gi, self.task, self.start, Some(w.axis), |s| {
            let run = &t[s.tile_offset..s.tile_offset + s.len];
            let p = (s.pos - w.values.first) as usize;
            match (s.target, inner) {
                (Target::One(g), false) if !w.f32_product => fold_weighted_run(acc, g, run, keep, w.value, weight(p)),
                (Target::One(g), false) => match (w.value, weight(p)) {
                    // One weight for the run (the product is the stored value's in f32).
                    (Some(_), Some(wp)) => fold_scaled(acc, g, run, keep, wp),
                    (_, wp) => fold_dot(acc, g, run, keep, product, move |_| wp),
                },
                (Target::One(g), true) => fold_dot(acc, g, run, keep, product, |i| weight(p + i)),
                (t @ Target::Each { .. }, _) => {
                    for (i, x) in run.iter().enumerate() {
                        let g = t.group(i);
                        let q = if inner { p + i } else { p };
                        fold_dot(acc, g, std::slice::from_ref(x), keep, product, |_| weight(q));
                    }
                }
            }
        });
    }
}

/// Where a compiled expression reads a task's cells: a table of one dataset reads the
/// stored values of its tile, a table of several their aligned cells.
#[derive(Clone, Copy)]
enum TaskCells<'a> {
    Tile(Option<&'a Buffer>),
    Aligned(&'a AlignedCells),
}

/// A kernel over the cells of a task, one segment at a time.
trait CellKernel {
    /// Fold segment `s`'s cells; true when a square root met a negative kept value.
    fn segment<C: Cells>(&mut self, s: &Segment, cells: &C) -> bool;
}

/// The cells of a task (or a slab of one: its first cell is the task's cell `cell_base`)
/// that the compiled kernels walk.
struct CellWalk<'a> {
    table: &'a TableModel,
    gi: &'a GroupIndex,
    task: &'a ChunkTask,
    start: &'a [u64],
    cells: TaskCells<'a>,
    cell_base: usize,
}

impl CellWalk<'_> {
    /// Walk the segments, split at each position of axis `split` if any, with `kernel`
    /// over a dataset's stored values kept by its missing rule and `ranges`, or the
    /// aligned cells of value columns `columns` kept by theirs and `ranges`.
    fn run<K: CellKernel>(
        &self,
        columns: &[usize],
        ranges: &ValueRanges,
        split: Option<usize>,
        kernel: &mut K,
    ) -> Result<()> {
        let CellWalk {
            table,
            gi,
            task,
            start,
            cells,
            cell_base,
        } = *self;
        let mut negative = false;
        match cells {
            TaskCells::Tile(None) => return internal_err!("TetAggregateExec: an expression of v without its tile"),
            TaskCells::Tile(Some(tile)) => with_dtype!(table.dataset().dtype(), T => {
                let keep = Keep {
                    missing: Missing::<T>::of(&table.value().missing),
                    range: ranges.of(0),
                };
                let t = elements::<T>(tile);
                walk_segments(gi, task, start, split, |s| {
                    let run = StoredRun {
                        x: &t[s.tile_offset..s.tile_offset + s.len],
                        packing: table.value().packing,
                        keep: &keep,
                    };
                    negative |= kernel.segment(&s, &run);
                });
            }),
            TaskCells::Aligned(cells) => {
                let mut run = cells.run(columns, ranges)?;
                walk_segments(gi, task, start, split, |s| {
                    run.at(cell_base + s.cell_offset);
                    negative |= kernel.segment(&s, &run);
                })
            }
        }
        if negative {
            return exec_err!("cannot take square root of a negative number");
        }
        Ok(())
    }
}

/// A compiled expression folded into one input's accumulators.
struct ProgramKernel<'a> {
    acc: &'a mut Accumulators,
    program: &'a Program,
    scratch: Scratch,
    at: Vec<u32>,
}

impl CellKernel for ProgramKernel<'_> {
    #[inline(always)]
    fn segment<C: Cells>(&mut self, s: &Segment, cells: &C) -> bool {
        let (acc, p, scratch, at) = (&mut *self.acc, self.program, &mut self.scratch, &mut self.at[..]);
        match p.eval_ty() {
            Ty::F64 => fold_program_run::<C, f64>(acc, s, cells, p, scratch, at),
            Ty::F32 => fold_program_run::<C, f32>(acc, s, cells, p, scratch, at),
        }
    }
}

/// The rows that ranges of stored values keep (in a table of several datasets), counted.
struct RowKernel<'a> {
    acc: &'a mut Accumulators,
    at: Vec<u32>,
}

impl CellKernel for RowKernel<'_> {
    #[inline(always)]
    fn segment<C: Cells>(&mut self, s: &Segment, cells: &C) -> bool {
        count_rows(self.acc, s, cells, &mut self.at);
        false
    }
}

multiversion! {
    /// Count segment `s`'s kept cells as rows (cells and values) of their groups.
    fn count_rows[C](acc: &mut Accumulators, s: &Segment, cells: &C, at: &mut [u32]) where [C: Cells] {
        let mut mask = [0u8; BLOCK];
        for b in 0..s.len.div_ceil(BLOCK) {
            let from = b * BLOCK;
            let n = BLOCK.min(s.len - from);
            match s.target {
                Target::One(g) => {
                    cells.mask(from, n, &mut mask[..n]);
                    let m = ones(&mask[..n]);
                    acc.cells[g] += m;
                    acc.n[g] += m;
                }
                t @ Target::Each { .. } => {
                    let m = cells.kept(from, n, at);
                    for &i in &at[..m] {
                        let g = t.group(from + i as usize);
                        acc.cells[g] += 1;
                        acc.n[g] += 1;
                    }
                }
            }
        }
    }
}

/// Two compiled expressions folded into co-moments.
struct PairKernel<'a> {
    acc: &'a mut [CoMoment],
    x: &'a Program,
    y: &'a Program,
    sx: Scratch,
    sy: Scratch,
    at: Vec<u32>,
}

impl CellKernel for PairKernel<'_> {
    #[inline(always)]
    fn segment<C: Cells>(&mut self, s: &Segment, cells: &C) -> bool {
        let (acc, at) = (&mut *self.acc, &mut self.at[..]);
        let (x, y, sx, sy) = (self.x, self.y, &mut self.sx, &mut self.sy);
        match (x.eval_ty(), y.eval_ty()) {
            (Ty::F64, Ty::F64) => fold_pair_run::<C, f64, f64>(acc, s, cells, (x, y), (sx, sy), at),
            (Ty::F64, Ty::F32) => fold_pair_run::<C, f64, f32>(acc, s, cells, (x, y), (sx, sy), at),
            (Ty::F32, Ty::F64) => fold_pair_run::<C, f32, f64>(acc, s, cells, (x, y), (sx, sy), at),
            (Ty::F32, Ty::F32) => fold_pair_run::<C, f32, f32>(acc, s, cells, (x, y), (sx, sy), at),
        }
    }
}

/// A compiled expression times a weight of one axis, folded into one input's
/// accumulators.
struct WeightedProgramKernel<'a> {
    acc: &'a mut Accumulators,
    program: &'a Program,
    weights: &'a AxisValues,
    /// The weight's axis is the innermost one (a weight per cell of a segment, else one
    /// for the whole segment).
    inner: bool,
    f32_product: bool,
    scratch: Scratch,
    at: Vec<u32>,
    products: Vec<f64>,
}

impl CellKernel for WeightedProgramKernel<'_> {
    #[inline(always)]
    fn segment<C: Cells>(&mut self, s: &Segment, cells: &C) -> bool {
        match self.program.eval_ty() {
            Ty::F64 => fold_weighted_program_run::<C, f64>(self, s, cells),
            Ty::F32 => fold_weighted_program_run::<C, f32>(self, s, cells),
        }
    }
}

multiversion! {
    /// Evaluate `k`'s program (of type `F`) over segment `s`'s kept cells, block by
    /// block, and fold each result times its weight (a NULL weight: a row without a
    /// value); true when a square root met a negative kept value.
    fn fold_weighted_program_run[C, F](k: &mut WeightedProgramKernel<'_>, s: &Segment, cells: &C) -> bool
    where [C: Cells, F: Lane + Elem] {
        let WeightedProgramKernel { acc, program, weights, inner, f32_product, scratch, at, products } = k;
        let (inner, f32_product) = (*inner, *f32_product);
        let (plain, ranged) = (cells.plain(), cells.ranged());
        let p0 = (s.pos - weights.first) as usize;
        let weight_at = |i: usize| {
            let q = if inner { p0 + i } else { p0 };
            weights.valid[q].then(|| weights.values[q])
        };
        let product = |y: F, w: f64| if f32_product { (y.f32() * w as f32) as f64 } else { y.f() * w };
        // Two value columns combined, in place, times the segment's one weight, summed as
        // they are read: `product` in `F` (f32 for a product in f32, f64 for one in f64).
        if let (Target::One(g), true, false, true) = (s.target, plain, inner, acc.needs.sum_only())
            && f32_product == (F::DTYPE == DType::F32)
            && let Some(w) = weight_at(0)
            && let Some(sum) = program.pair_sum::<C, F>(cells, 0, s.len, F::of_f64(w))
        {
            let n = s.len as u64;
            acc.add_sum(g, n, n, sum);
            return false;
        }
        let mut negative = false;
        for b in 0..s.len.div_ceil(BLOCK) {
            let from = b * BLOCK;
            let n = BLOCK.min(s.len - from);
            let m = if plain { n } else { cells.kept(from, n, at) };
            let gather = (m < n).then_some(&at[..m]);
            let (y, neg) = program.eval::<C, F>(cells, from, gather, m, scratch);
            negative |= neg;
            let cell = |j: usize| from + gather.map_or(j, |a| a[j] as usize);
            let rows = if ranged { m } else { n };
            match s.target {
                Target::One(g) => {
                    let mut q = 0;
                    if !inner {
                        if let Some(w) = weight_at(0) {
                            products[..m].iter_mut().zip(y).for_each(|(o, &v)| *o = product(v, w));
                            q = m;
                        }
                    } else {
                        for (j, &v) in y.iter().enumerate() {
                            if let Some(w) = weight_at(cell(j)) {
                                products[q] = product(v, w);
                                q += 1;
                            }
                        }
                    }
                    fold_run(acc, g, &products[..q], &Keep::default());
                    acc.cells[g] += (rows - q) as u64;
                }
                t @ Target::Each { .. } => {
                    if !ranged {
                        (from..from + n).for_each(|i| acc.cells[t.group(i)] += 1);
                    }
                    for (j, &v) in y.iter().enumerate() {
                        let (i, g) = (cell(j), t.group(cell(j)));
                        if ranged {
                            acc.cells[g] += 1;
                        }
                        if let Some(w) = weight_at(i) {
                            fold_value(acc, g, product(v, w));
                        }
                    }
                }
            }
        }
        negative
    }
}

multiversion! {
    /// Evaluate programs `p.0`, `p.1` (of types `X`, `Y`) over segment `s`'s kept cells,
    /// block by block, and fold the pairs as co-moments (a block of one group at once);
    /// true when a square root met a negative kept value.
    fn fold_pair_run[C, X, Y](
        acc: &mut [CoMoment],
        s: &Segment,
        cells: &C,
        p: (&Program, &Program),
        scratch: (&mut Scratch, &mut Scratch),
        at: &mut [u32],
    ) -> bool where [C: Cells, X: Lane + Elem, Y: Lane + Elem] {
        let plain = cells.plain();
        let mut negative = false;
        for b in 0..s.len.div_ceil(BLOCK) {
            let from = b * BLOCK;
            let n = BLOCK.min(s.len - from);
            let m = if plain { n } else { cells.kept(from, n, at) };
            let kept = (m < n).then_some(&at[..m]);
            let (xs, neg_x) = p.0.eval::<C, X>(cells, from, kept, m, scratch.0);
            let (ys, neg_y) = p.1.eval::<C, Y>(cells, from, kept, m, scratch.1);
            negative |= neg_x | neg_y;
            match s.target {
                Target::One(g) => acc[g].merge(CoMoment::of(xs, ys)),
                t @ Target::Each { .. } => {
                    for (j, (x, y)) in xs.iter().zip(ys).enumerate() {
                        let i = kept.map_or(j, |a| a[j] as usize);
                        acc[t.group(from + i)].add(x.f(), y.f());
                    }
                }
            }
        }
        negative
    }
}

/// A run of one dataset's stored values, kept by its missing rule and a range of them.
struct StoredRun<'a, T> {
    x: &'a [T],
    packing: Option<Packing>,
    keep: &'a Keep<T>,
}

impl<T: Elem> Cells for StoredRun<'_, T> {
    #[inline(always)]
    fn plain(&self) -> bool {
        self.keep.missing.is_empty() && self.keep.range.is_none()
    }

    #[inline(always)]
    fn ranged(&self) -> bool {
        self.keep.range.is_some()
    }

    #[inline(always)]
    fn mask(&self, from: usize, n: usize, out: &mut [u8]) {
        out.iter_mut()
            .zip(&self.x[from..from + n])
            .for_each(|(o, &v)| *o = self.keep.test(v) as u8);
    }

    #[inline(always)]
    fn load<F: Lane>(&self, _k: usize, from: usize, at: Option<&[u32]>, out: &mut [F], with: impl Fn(F, F) -> F) {
        convert(&self.x[from..], self.packing, at, out, with)
    }
}

multiversion! {
    /// Evaluate `program` (of type `F`) over segment `s`'s cells, block by block, and
    /// fold the results of the kept ones; true when a square root met a negative kept
    /// value. Cells the missing rules drop count as cells; cells outside a range do not.
    fn fold_program_run[C, F](
        acc: &mut Accumulators,
        s: &Segment,
        cells: &C,
        program: &Program,
        scratch: &mut Scratch,
        at: &mut [u32],
    ) -> bool where [C: Cells, F: Lane + Elem] {
        let plain = cells.plain();
        let ranged = cells.ranged();
        if let (Target::One(g), true, Some(y)) = (s.target, plain, program.view::<C, F>(cells, 0, s.len)) {
            // One value column of the segment, in place: folded as stored values are.
            fold_run(acc, g, y, &Keep::default());
            return false;
        }
        if let (Target::One(g), true, true) = (s.target, plain, acc.needs.sum_only())
            && let Some(sum) = program.pair_sum::<C, F>(cells, 0, s.len, F::of_f64(1.0))
        {
            // Two value columns combined, in place, summed as they are read: every cell
            // holds a value (plain), and only the sum is asked.
            let n = s.len as u64;
            acc.add_sum(g, n, n, sum);
            return false;
        }
        // Sums and counts of kept cells (not all kept) of one group, where evaluating
        // every cell cannot fail: evaluated whole, summed under the mask of kept cells.
        let masked = !plain && !program.fallible() && acc.needs.sum_at_most();
        let mut mask = [0u8; BLOCK];
        let mut negative = false;
        for b in 0..s.len.div_ceil(BLOCK) {
            let from = b * BLOCK;
            let n = BLOCK.min(s.len - from);
            if let (Target::One(g), true) = (s.target, plain) {
                let (y, neg) = program.eval::<C, F>(cells, from, None, n, scratch);
                negative |= neg;
                fold_run(acc, g, y, &Keep::default());
                continue;
            }
            if let (Target::One(g), true) = (s.target, masked) {
                let (y, _) = program.eval::<C, F>(cells, from, None, n, scratch);
                cells.mask(from, n, &mut mask[..n]);
                let (m, sum) = masked_sum(y, &mask[..n]);
                acc.add_sum(g, if ranged { m } else { n as u64 }, m, sum);
                continue;
            }
            // Evaluate only the kept cells (all of the block: read in place).
            let m = cells.kept(from, n, at);
            let at = &at[..m];
            let gather = (m < n).then_some(at);
            let (y, neg) = program.eval::<C, F>(cells, from, gather, m, scratch);
            negative |= neg;
            match s.target {
                Target::One(g) => {
                    fold_run(acc, g, y, &Keep::default());
                    if !ranged {
                        // Missing cells are cells too.
                        acc.cells[g] += (n - m) as u64;
                    }
                }
                t @ Target::Each { .. } => {
                    let group = |i: usize| t.group(from + i);
                    if !ranged {
                        (0..n).for_each(|i| acc.cells[group(i)] += 1);
                    }
                    for (&i, &v) in at.iter().zip(y) {
                        let g = group(i as usize);
                        if ranged {
                            acc.cells[g] += 1;
                        }
                        fold_value(acc, g, v);
                    }
                }
            }
        }
        negative
    }
}

/// Fold `run` (the segment's elements) into the segment's groups.
#[inline(always)]
fn fold_segment<T: Elem>(acc: &mut Accumulators, s: &Segment, run: &[T], keep: &Keep<T>) {
    match s.target {
        Target::One(g) => fold_run(acc, g, run, keep),
        Target::Each {
            base,
            stride: 1,
            ids: &[first, ..],
            consecutive: true,
        } => fold_consecutive(acc, base + first as usize, run, keep),
        t @ Target::Each { .. } => fold_elementwise(acc, run, keep, |i| t.group(i)),
    }
}
