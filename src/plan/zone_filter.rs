//! Zone-map pruning: each chunk task is a container whose value columns' min/max come
//! from the zone maps of the chunk of each column's dataset that holds the task (per
//! variable); DataFusion's `PruningPredicate` decides which can match.
//!
//! Floats: zone maps count NaN among the nulls and leave it out of min/max, but DataFusion
//! orders NaN above every number, so a float chunk with any null is given unknown bounds.
//! Integers: a chunk with nulls keeps its bounds only when the table has missing values
//! (the cells the writer left out are then NULL here too). A packed dataset's bounds are
//! the stored bounds unpacked (`x·s + o`, swapped when `s < 0`), as Float64.

use super::table::TableModel;
use super::tasks::ChunkTask;
use crate::format::{DType, Scalar, ZoneStat};
use arrow::array::{ArrayRef, BooleanArray};
use datafusion::common::pruning::PruningStatistics;
use datafusion::common::{Column, Result, ScalarValue};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_optimizer::pruning::PruningPredicateBuilder;
use std::collections::HashSet;
use std::sync::Arc;

/// Zone statistics of a list of chunk tasks.
#[derive(Debug)]
pub struct ZonePruning<'a> {
    tasks: &'a [Arc<ChunkTask>],
    table: &'a TableModel,
}

impl<'a> ZonePruning<'a> {
    pub fn new(tasks: &'a [Arc<ChunkTask>], table: &'a TableModel) -> Self {
        ZonePruning { tasks, table }
    }

    /// For each task, whether it may hold a row satisfying `predicate`.
    pub fn prune(&self, predicate: Arc<dyn PhysicalExpr>) -> Result<Vec<bool>> {
        match PruningPredicateBuilder::new()
            .with_file_schema(self.table.schema.clone())
            .build(predicate)
        {
            Some(p) => p.prune(self),
            // Nothing to prune with (the predicate is always true for these statistics).
            None => Ok(vec![true; self.tasks.len()]),
        }
    }

    /// The lower (`min`) or upper bound of value column `column` in each task's chunk.
    fn bound(&self, column: &Column, min: bool) -> Option<ArrayRef> {
        let (k, _) = self.table.value_named(&column.name)?;
        let ty = self
            .table
            .schema
            .field(self.table.value_index() + k)
            .data_type()
            .clone();
        let unknown = || ScalarValue::try_from(&ty).unwrap_or(ScalarValue::Null);
        let values = self.tasks.iter().map(|t| {
            // Each file's own zone maps, decoded by its own rule, in the table's type.
            let value = &self.table.file_of(t).values[k];
            let Some(zones) = value.dataset().zones.as_ref() else {
                return unknown();
            };
            let dtype = value.dataset().dtype();
            let packing = value.packing;
            // A negative scale turns the stored maximum into the smallest value.
            let stored_min = min == packing.is_none_or(|p| p.scale >= 0.0);
            let trusted = |z: &&ZoneStat| z.null_count == 0 || !(dtype.is_float() || value.missing.is_empty());
            // The bound over every chunk holding the task's cells (several when the task
            // is spread over that dataset's chunks); unknown if any chunk's is.
            let mut bound: Option<Option<Scalar>> = None;
            t.for_each_chunk(k, |linear, _| {
                let z = zones.get(linear as usize).and_then(|z| z.as_ref());
                let s = z.filter(trusted).and_then(|z| if stored_min { z.min } else { z.max });
                bound = Some(match (bound, s) {
                    (None, s) => s,
                    (Some(Some(a)), Some(b)) => widest(a, b, stored_min),
                    _ => None,
                });
            });
            let v = bound.flatten().and_then(|s| match packing {
                Some(p) => Some(ScalarValue::Float64(Some(p.apply(s.as_f64())))),
                None => to_scalar(dtype, s),
            });
            v.and_then(|v| v.cast_to(&ty).ok()).unwrap_or_else(unknown)
        });
        ScalarValue::iter_to_array(values).ok()
    }
}

/// The smaller (`min`) or larger of two stored bounds of one dataset; `None` when they
/// are not of one kind.
fn widest(a: Scalar, b: Scalar, min: bool) -> Option<Scalar> {
    let pick = |o: std::cmp::Ordering| if (o == std::cmp::Ordering::Less) == min { a } else { b };
    Some(match (a, b) {
        (Scalar::F64(x), Scalar::F64(y)) => pick(x.partial_cmp(&y)?),
        (Scalar::I64(x), Scalar::I64(y)) => pick(x.cmp(&y)),
        (Scalar::U64(x), Scalar::U64(y)) => pick(x.cmp(&y)),
        _ => return None,
    })
}

fn to_scalar(dtype: DType, s: Scalar) -> Option<ScalarValue> {
    Some(match (dtype, s) {
        (DType::F32, Scalar::F64(v)) => ScalarValue::Float32(Some(v as f32)),
        (DType::F64, Scalar::F64(v)) => ScalarValue::Float64(Some(v)),
        (DType::F16, Scalar::F64(v)) => ScalarValue::Float16(Some(half::f16::from_f64(v))),
        (DType::I16, Scalar::I64(v)) => ScalarValue::Int16(Some(v as i16)),
        (DType::I32, Scalar::I64(v)) => ScalarValue::Int32(Some(v as i32)),
        (DType::I64, Scalar::I64(v)) => ScalarValue::Int64(Some(v)),
        (DType::U8, Scalar::U64(v)) => ScalarValue::UInt8(Some(v as u8)),
        (DType::U16, Scalar::U64(v)) => ScalarValue::UInt16(Some(v as u16)),
        (DType::U32, Scalar::U64(v)) => ScalarValue::UInt32(Some(v as u32)),
        (DType::U64, Scalar::U64(v)) => ScalarValue::UInt64(Some(v)),
        _ => return None,
    })
}

impl PruningStatistics for ZonePruning<'_> {
    fn min_values(&self, column: &Column) -> Option<ArrayRef> {
        self.bound(column, true)
    }
    fn max_values(&self, column: &Column) -> Option<ArrayRef> {
        self.bound(column, false)
    }
    fn num_containers(&self) -> usize {
        self.tasks.len()
    }
    fn null_counts(&self, _column: &Column) -> Option<ArrayRef> {
        None
    }
    fn row_counts(&self) -> Option<ArrayRef> {
        None
    }
    fn contained(&self, _column: &Column, _values: &HashSet<ScalarValue>) -> Option<BooleanArray> {
        None
    }
}
