//! Expressions of `v` and axis columns evaluated over the cells of a decoded tile: the
//! inputs and filters of the fold that are not plain `v` (`sqrt(abs(v))`, `v * cos(lat)`,
//! `v > lat`), evaluated vectorized by DataFusion's own physical expressions, so their
//! answers are DataFusion's.

use super::columns::{axis_positions, value_array};
use crate::plan::{ChunkTask, TableModel, expr_columns};
use arrow::array::{ArrayRef, RecordBatch};
use arrow::buffer::Buffer;
use arrow::datatypes::{Schema, SchemaRef};
use datafusion::common::{DFSchema, Result, plan_datafusion_err};
use datafusion::execution::context::ExecutionProps;
use datafusion::logical_expr::Expr;
use datafusion::logical_expr::physical_planning_context::PhysicalPlanningContext;
use datafusion::physical_expr::{PhysicalExpr, create_physical_expr};
use std::sync::Arc;

/// `e` (unqualified columns of `schema`) as a physical expression.
pub fn compile(e: &Expr, schema: &SchemaRef) -> Result<Arc<dyn PhysicalExpr>> {
    let df_schema = DFSchema::try_from(schema.clone())?;
    create_physical_expr(
        e,
        &df_schema,
        &ExecutionProps::new(),
        &PhysicalPlanningContext::default(),
    )
}

/// Expressions compiled over the table columns they read; evaluated per chunk task over a
/// batch of its selected cells (in the order [`walk_segments`](crate::exec::walk::walk_segments)
/// numbers them).
#[derive(Debug)]
pub struct TileExprs {
    /// Table column indices of the batch, ascending.
    columns: Vec<usize>,
    schema: SchemaRef,
    exprs: Vec<Arc<dyn PhysicalExpr>>,
}

impl TileExprs {
    /// Compile `exprs` (each an expression of `v` and axis columns of `table`).
    pub fn new(table: &TableModel, exprs: &[Expr]) -> Result<Self> {
        let mut columns = Vec::new();
        for e in exprs {
            let cols = expr_columns(table, e)
                .ok_or_else(|| plan_datafusion_err!("{e} is not an expression of the value and axis columns"))?;
            columns.extend(cols);
        }
        columns.sort_unstable();
        columns.dedup();
        let schema = Arc::new(Schema::new(
            columns
                .iter()
                .map(|&i| table.schema.field(i).clone())
                .collect::<Vec<_>>(),
        ));
        let exprs = exprs.iter().map(|e| compile(e, &schema)).collect::<Result<_>>()?;
        Ok(TileExprs { columns, schema, exprs })
    }

    /// Number of expressions.
    pub fn len(&self) -> usize {
        self.exprs.len()
    }

    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.exprs.is_empty()
    }

    /// Number of table columns a batch holds (those the expressions read).
    pub fn column_count(&self) -> usize {
        self.columns.len()
    }

    /// The batch of the selected cells of `task` (`tiles`: the decoded tiles of the value
    /// columns, absent for those no expression reads; `start`: the tile's global start), in
    /// the order [`walk_segments`](crate::exec::walk::walk_segments) numbers them.
    pub fn batch(
        &self,
        table: &TableModel,
        task: &ChunkTask,
        start: &[u64],
        tiles: &[Option<Buffer>],
    ) -> Result<RecordBatch> {
        let rows = task.cells as usize;
        let mut cols = Vec::with_capacity(self.columns.len());
        for &c in &self.columns {
            cols.push(match table.value_at(c) {
                Some((k, value)) => {
                    let tile = tiles
                        .get(k)
                        .and_then(Option::as_ref)
                        .ok_or_else(|| plan_datafusion_err!("an expression of {} without its tile", value.name))?;
                    value_array(value, tile.clone(), &task.part(k))
                }
                None => table.axes[c].take(&axis_positions(task, start, c, rows))?,
            });
        }
        Ok(RecordBatch::try_new_with_options(
            self.schema.clone(),
            cols,
            &arrow::array::RecordBatchOptions::new().with_row_count(Some(rows)),
        )?)
    }

    /// Expression `i` over `batch` (one of [`TileExprs::batch`], or rows of one).
    pub fn evaluate(&self, i: usize, batch: &RecordBatch) -> Result<ArrayRef> {
        self.exprs[i].evaluate(batch)?.into_array(batch.num_rows())
    }
}
