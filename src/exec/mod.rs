//! DataFusion ExecutionPlans over `.tet` chunks and their kernels.
//!
//! Owns: turning chunk tasks into Arrow batches ([`TetScanExec`]) and the metrics they
//! report. Must not decide which chunks to read (that is `plan` and `sql`).

/// The `ExecutionPlan` methods shared by this crate's leaf nodes (no children, no
/// expressions, properties in `self.cache`, metrics in `self.metrics`).
macro_rules! leaf_plan_methods {
    ($name:literal) => {
        fn name(&self) -> &str {
            $name
        }
        fn properties(&self) -> &Arc<PlanProperties> {
            &self.cache
        }
        fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
            vec![]
        }
        fn apply_expressions(
            &self,
            _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
        ) -> Result<TreeNodeRecursion> {
            Ok(TreeNodeRecursion::Continue)
        }
        fn replace_children(
            self: Arc<Self>,
            children: Vec<Arc<dyn ExecutionPlan>>,
            _options: ReplaceChildrenOptions,
        ) -> Result<Arc<dyn ExecutionPlan>> {
            if !children.is_empty() {
                return internal_err!("{} has no children", $name);
            }
            Ok(self)
        }
        fn with_new_children(self: Arc<Self>, children: Vec<Arc<dyn ExecutionPlan>>) -> Result<Arc<dyn ExecutionPlan>> {
            self.replace_children(
                children,
                ReplaceChildrenOptions::new(datafusion::physical_plan::ChildrenPropertiesMode::Recompute),
            )
        }
        fn metrics(&self) -> Option<MetricsSet> {
            Some(self.metrics.clone_inner())
        }
    };
}

/// The chunk tasks of output `partition` (a plan with no tasks still has partition 0).
fn partition_tasks(
    partitions: &[Vec<crate::plan::ChunkTask>],
    partition: usize,
    node: &str,
) -> datafusion::common::Result<Vec<crate::plan::ChunkTask>> {
    match partitions.get(partition) {
        Some(t) => Ok(t.clone()),
        None if partition == 0 => Ok(vec![]),
        None => datafusion::common::internal_err!("{node}: no partition {partition}"),
    }
}

mod aggregate;
mod cells;
pub mod fold;
mod scan;

pub use aggregate::{AggFunc, AggSpec, AggregatePlan, MAX_DENSE_GROUPS, TetAggregateExec, sum_type};
pub use cells::{axis_positions, for_each_selected_run, value_array};
pub use scan::{ScanSummary, TetScanExec};
