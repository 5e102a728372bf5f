use super::cell_kernels::{PairKernel, ProgramKernel, RowKernel, WeightedProgramKernel};
use super::cell_walk::{CellWalk, TaskCells};
use super::emit::Emit;
use super::evaluated;
use super::fold_plan::{FoldPlan, PairInput, SLAB_CELLS, Source};
use super::stored::{fold_stored, fold_stored_pair};
use super::weighted::{Weights, fold_weighted};
use crate::exec::feed::ChunkFeed;
use crate::exec::feed::payload::{Payload, PayloadMetrics, payload_stream};
use crate::exec::feed::{PoolAccount, exhausted};
use crate::exec::kernel::{Accumulators, CoMoment};
use crate::exec::metrics::{AggregateMetrics, Stopwatch};
use crate::exec::program::AlignedCells;
use crate::exec::program::BLOCK;
use crate::exec::walk::{AxisValues, GroupIndex};
use crate::io::FetchOptions;
use crate::plan::{Aggregation, AxisSelection, ChunkTask, TableModel, ValueRanges};
use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use datafusion::common::runtime::SpawnedTask;
use datafusion::common::{Result, internal_err};
use datafusion::error::DataFusionError;
use datafusion::execution::TaskContext;
use datafusion::execution::memory_pool::{MemoryConsumer, MemoryReservation};
use datafusion::physical_plan::metrics::ExecutionPlanMetricsSet;
use futures::StreamExt;
use futures::stream::BoxStream;
use std::sync::Arc;

/// The group index and axis weights over a selection, shared by the partitions that fold
/// into its groups.
pub(super) struct Groups {
    pub(super) index: GroupIndex,
    pub(super) weights: Vec<AxisValues>,
}

/// What one partition's fold produced: an accumulator per input, co-moments per pair,
/// the partition's metrics and the memory reserved for them.
pub(super) struct Folded {
    pub(super) accs: Vec<Accumulators>,
    pub(super) pairs: Vec<Vec<CoMoment>>,
    pub(super) metrics: AggregateMetrics,
    pub(super) _reservation: MemoryReservation,
}

/// Everything a partition's fold needs, cloned into the tasks that run it.
#[derive(Clone)]
pub(super) struct FoldJob {
    pub(super) table: Arc<TableModel>,
    pub(super) aggregation: Aggregation,
    pub(super) fold: Arc<FoldPlan>,
    pub(super) feed: ChunkFeed,
    pub(super) fetch: FetchOptions,
    pub(super) metrics: ExecutionPlanMetricsSet,
}

impl FoldJob {
    /// The emit of this job's folds.
    pub(super) fn emit(&self) -> Emit<'_> {
        Emit {
            table: &self.table,
            aggregation: &self.aggregation,
            fold: &self.fold,
        }
    }

    /// The group index and the axis weights over `selection`.
    pub(super) fn groups(&self, selection: &[AxisSelection]) -> Result<Groups> {
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
    pub(super) async fn fold_partition(
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
    pub(super) async fn fold_all(self, context: Arc<TaskContext>, schema: SchemaRef) -> Result<RecordBatch> {
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
        let states = self.emit().states(&all.accs, &all.pairs, &groups.index, every_group)?;
        let batch = self.emit().values(&states, schema)?;
        all.metrics.baseline.record_output(batch.num_rows());
        Ok(batch)
    }

    /// Fold `payloads` into accumulators over `groups`.
    pub(super) async fn fold(
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
}
