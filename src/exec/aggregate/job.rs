use super::emit::Emit;
use super::fold_plan::FoldPlan;
use super::fold_plan::Slot;
use super::order_values::{GatheredValues, order_arrays, order_stat_of};
use super::partition_fold::PartitionFold;
use super::value_keys::KeyedFold;
use crate::exec::feed::ChunkFeed;
use crate::exec::feed::payload::{Payload, PayloadMetrics, PayloadRead, payload_stream};
use crate::exec::feed::{PoolAccount, exhausted};
use crate::exec::kernel::{Accumulators, CoMoment};
use crate::exec::metrics::{AggregateMetrics, Stopwatch};
use crate::exec::walk::{AxisValues, GroupIndex};
use crate::io::FetchOptions;
use crate::plan::{Aggregation, AxisSelection, ChunkTask, TableModel};
use arrow::array::{Array, ArrayRef, RecordBatch};
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
    /// The values gathered per group for each order statistic's input.
    pub(super) order: Vec<GatheredValues>,
    /// The keys of the value met, when the fold groups by one.
    pub(super) keyed: Option<KeyedFold>,
    pub(super) metrics: AggregateMetrics,
    /// What the partition reserved for its accumulators and gathered values.
    pub(super) reservation: MemoryReservation,
}

/// A partition's accumulators, co-moments, gathered values and keys of the value.
type Folds = (
    Vec<Accumulators>,
    Vec<Vec<CoMoment>>,
    Vec<GatheredValues>,
    Option<KeyedFold>,
);

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
        let read = PayloadRead {
            table: table.clone(),
            columns: self.aggregation.value_columns(table),
            fetch: self.fetch,
            metrics: PayloadMetrics {
                read: metrics.read.clone(),
                decode: metrics.fold_timers.to_vec(),
            },
        };
        let payloads = payload_stream(read, tasks, tiles);
        let (accs, pairs, order, keyed) = self.fold(payloads, groups, &metrics, &mut reservation).await?;
        Ok(Folded {
            accs,
            pairs,
            order,
            keyed,
            metrics,
            reservation,
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
        let mut folded: Vec<Folded> = Vec::with_capacity(n);
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
        // Order statistics select from the values of every partition at once; each
        // partition's reservation stays held (in `held`) as long as its values.
        let mut held = Vec::with_capacity(n);
        let mut gathered: Vec<Vec<GatheredValues>> = Vec::with_capacity(n);
        let mut parts = folded.into_iter();
        let Some(mut all) = parts.next() else {
            return internal_err!("TetAggregateExec: a feed of no partitions");
        };
        gathered.push(std::mem::take(&mut all.order));
        for part in parts {
            match (&mut all.keyed, &part.keyed) {
                (Some(keyed), Some(other)) => {
                    for (a, b) in all.accs.iter_mut().zip(&part.accs) {
                        keyed.merge(a, other, b);
                    }
                }
                _ => {
                    for (a, b) in all.accs.iter_mut().zip(&part.accs) {
                        a.merge(b);
                    }
                }
            }
            for (a, b) in all.pairs.iter_mut().zip(&part.pairs) {
                a.iter_mut().zip(b).for_each(|(a, b)| a.merge(*b));
            }
            gathered.push(part.order);
            held.push(part.reservation);
        }
        all.accs.iter_mut().for_each(Accumulators::settle);
        let _t = all.metrics.baseline.elapsed_compute().timer();
        // Without keys, SQL's aggregate has one row even over no cells.
        let every_group = self.aggregation.key_count() == 0;
        let touched = self.emit().touched(&all.accs, every_group);
        let states = self
            .emit()
            .states(&all.accs, &all.pairs, (&groups.index, all.keyed.as_ref()), &touched)?;
        let order = self.order_values(&gathered, &touched, &context)?;
        drop(gathered);
        drop(held);
        let batch = self.emit().values(&states, order, schema)?;
        all.metrics.baseline.record_output(batch.num_rows());
        Ok(batch)
    }

    /// Each aggregate's value over the `touched` groups when it is an order statistic,
    /// selected from the values of every partition (`parts`, per partition one per order
    /// input); `None` for the other aggregates. The keys of the largest group are
    /// reserved in the session's pool while selected.
    fn order_values(
        &self,
        parts: &[Vec<GatheredValues>],
        touched: &[usize],
        context: &TaskContext,
    ) -> Result<Vec<Option<ArrayRef>>> {
        let aggs = &self.aggregation.aggs;
        let mut out: Vec<Option<ArrayRef>> = vec![None; aggs.len()];
        let scratch = MemoryConsumer::new("TetAggregateExec order statistics").register(context.memory_pool());
        for (k, input) in self.fold.order_inputs.iter().enumerate() {
            let asking: Vec<usize> = (0..aggs.len())
                .filter(|&a| matches!(self.fold.of_agg[a], Slot::Order(j) if j == k))
                .collect();
            let stats = asking
                .iter()
                .map(|&a| order_stat_of(&aggs[a]))
                .collect::<Result<Vec<_>>>()?;
            let values: Vec<&GatheredValues> = parts.iter().map(|p| &p[k]).collect();
            let program = &self.fold.programs[input.program];
            // The groups' selections are independent: one thread per stretch of them, as
            // many as the fold had partitions, each with the keys of its largest group
            // reserved.
            let select = |groups: &[usize]| {
                let keys = scratch.new_empty();
                order_arrays(&values, program, &stats, groups, |bytes| {
                    keys.try_resize(bytes).map_err(|e| {
                        exhausted(e, || {
                            format!("the {bytes} bytes of keys of a median or percentile's largest group")
                        })
                    })
                })
            };
            let threads = self.feed.partition_count().clamp(1, touched.len().max(1));
            let stretches: Vec<&[usize]> = touched.chunks(touched.len().div_ceil(threads).max(1)).collect();
            let selected: Vec<Vec<ArrayRef>> = match stretches.as_slice() {
                [] | [_] => vec![select(touched)?],
                [first, rest @ ..] => std::thread::scope(|s| {
                    let running: Vec<_> = rest.iter().map(|g| s.spawn(|| select(g))).collect();
                    let mut out = vec![select(first)?];
                    for r in running {
                        out.push(r.join().map_err(|_| {
                            DataFusionError::Internal("TetAggregateExec: a selection thread panicked".into())
                        })??);
                    }
                    Ok::<_, DataFusionError>(out)
                })?,
            };
            let arrays = (0..stats.len())
                .map(|i| {
                    let pieces: Vec<&dyn Array> = selected.iter().map(|a| a[i].as_ref()).collect();
                    Ok(arrow::compute::concat(&pieces)?)
                })
                .collect::<Result<Vec<ArrayRef>>>()?;
            for (a, array) in asking.into_iter().zip(arrays) {
                out[a] = Some(array);
            }
        }
        Ok(out)
    }

    /// Fold `payloads` into accumulators over `groups`.
    pub(super) async fn fold(
        &self,
        mut payloads: BoxStream<'static, Result<Payload>>,
        groups: &Groups,
        metrics: &AggregateMetrics,
        reservation: &mut MemoryReservation,
    ) -> Result<Folds> {
        let table = &self.table;
        let (gi, weights) = (&groups.index, &groups.weights);
        // The session's memory pool holds what the fold keeps per group and position
        // (`-m` / `memory_limit` give DataFusion's "resources exhausted", not an OOM kill);
        // the accumulators are reserved before they are allocated.
        reservation
            .try_grow(PartitionFold::bytes(&self.fold, gi, weights))
            .map_err(|e| {
                exhausted(e, || {
                    format!(
                        "{} groups and positions of {}",
                        gi.count,
                        table.values.iter().map(|v| v.describe()).collect::<Vec<_>>().join(", ")
                    )
                })
            })?;
        let mut folding = PartitionFold::new(table, &self.fold, gi, weights);
        while let Some(next) = payloads.next().await {
            // Local payloads are always ready: spend the task's budget per chunk so a long
            // fold yields to the runtime now and then (and a cancelled query stops).
            tokio::task::consume_budget().await;
            let (task, tiles) = next?;
            let _fold = Stopwatch::start(&metrics.fold_timers);
            folding.task(&task, &tiles, reservation)?;
        }
        {
            let _fold = Stopwatch::start(&metrics.fold_timers);
            folding.finish(reservation);
        }
        let PartitionFold {
            mut accs,
            pairs,
            order,
            keyed,
            ..
        } = folding;
        accs.iter_mut().for_each(Accumulators::settle);
        Ok((accs, pairs, order, keyed))
    }
}
