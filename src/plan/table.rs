//! [`TableModel`]: the table one or several datasets on one grid present — one column
//! per axis, then one value column per dataset ([`ValueColumn`]) — and the statistics of
//! a selection of it; for an archive, its files ([`FileSet`]: which file each task
//! reads, and where its tiles lie on the archive's axes).

use super::attrs::axis_metadata;
use super::axes::{Axis, axes_of, coordinate_spans};
use super::common_grid::{aligned_tasks, grid_count, tasks_by_id};
use super::limits::{Limits, MAX_TABLE_CELLS};
use super::selection::AxisSelection;
use super::tasks::{ChunkTask, TaskCache};
use super::value_column::ValueColumn;
use super::values::VALUE_COLUMN;
use crate::format::Dataset;
use crate::io::TetSource;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::common::{Result, plan_err};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// One dataset of an opened file as a table, or several datasets of one shape and
/// dimension names (of one file or of several) side by side: the axis columns (from the
/// first dataset) and the schema (the axes in dimension order, then one value column per
/// dataset), and how stored elements become values (the CF rules of
/// [`crate::format::cf`]: missing values, packing, per value column).
///
/// A table of one dataset names its value column `v`; a table of several names each
/// value column after its dataset. A value column is nullable when its dataset has
/// missing values or is a float dataset (the session option `tet.nan_is_null` makes NaN
/// NULL); it is Float64 for a packed dataset. Every column carries its CF attributes
/// (`units`, `long_name`, ...) as Arrow field metadata.
#[derive(Debug, Clone)]
pub struct TableModel {
    /// The file of the first dataset (whose axes the table has).
    pub source: Arc<TetSource>,
    /// Directory position of the first dataset.
    pub dataset: usize,
    /// The axis columns, in dimension order.
    pub axes: Vec<Axis>,
    /// Axis columns, then the value columns.
    pub schema: SchemaRef,
    /// The value columns, in schema order; the first is of `source`'s `dataset`.
    pub values: Vec<ValueColumn>,
    /// Whether every NaN is NULL (the session option `tet.nan_is_null`).
    pub nan_is_null: bool,
    /// How much a query may make of the file's claims (the session's `tet.max_*` options).
    pub limits: Limits,
    /// The chunk tasks of recent selections (shared by the copies of this table that
    /// differ in session options only: those change no task).
    pub tasks: Arc<TaskCache>,
    /// The files of an archive table (`None` for one file). Then `source`, `dataset` and
    /// `values` are those of its first file, and `axes` and `schema` the archive's:
    /// every file stores each value column alike, so `values` give every file's decoding
    /// rule; where the bytes are is each file's own ([`TableModel::file_of`]).
    pub files: Option<Arc<FileSet>>,
}

impl TableModel {
    /// `dataset` of an already opened file, fetching what the axes need (an object store
    /// file's coordinate variables) on demand.
    /// `dataset` of an already opened file, fetching what the axes need (an object store
    /// file's coordinate variables) on demand, within `limits` (a coordinate variable is
    /// decoded whole: at most `max_axis_positions` of it).
    pub async fn for_source(source: Arc<TetSource>, dataset: Option<&str>, limits: Limits) -> Result<Self> {
        let ds = Self::pick(&source, dataset)?;
        let file = source.file.clone();
        let most = limits.max_axis_positions;
        // Every chunk of the coordinate variables at once (coalesced), not one per parse.
        source
            .prefetch(&coordinate_spans(&file, &file.datasets[ds], most))
            .await?;
        let axes = source.resolve(|r| axes_of(r, &file, &file.datasets[ds], most)).await?;
        Ok(Self::build(source, ds, axes)?.limited(limits))
    }

    /// `dataset` of an already opened file whose axes can be read without fetching (local
    /// files; object store files whose coordinate variables are already cached), within
    /// `limits`.
    pub fn from_source(source: Arc<TetSource>, dataset: Option<&str>, limits: Limits) -> Result<Self> {
        let ds = Self::pick(&source, dataset)?;
        let file = source.file.clone();
        let axes = axes_of(source.as_ref(), &file, &file.datasets[ds], limits.max_axis_positions)
            .map_err(|e| e.in_file(&source.location))?;
        Ok(Self::build(source, ds, axes)?.limited(limits))
    }

    fn limited(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// The directory position of `dataset` (or of the only dataset).
    fn pick(source: &TetSource, dataset: Option<&str>) -> Result<usize> {
        let file = &source.file;
        match dataset {
            Some(name) => Ok(file.dataset(name).map_err(|e| e.in_file(&source.location))?.id),
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
        let value = ValueColumn::new(source.clone(), ds, VALUE_COLUMN)?;
        Self::assemble(source, ds, axes, vec![value])
    }

    /// The table of `values` (at least one) on the axes of the first; each value column
    /// is checked against the first: same shape and dimension names, a name of its own.
    fn assemble(source: Arc<TetSource>, ds: usize, axes: Vec<Axis>, values: Vec<ValueColumn>) -> Result<Self> {
        let file = source.file.clone();
        let ds = &file.datasets[ds];
        if ds.record.cell_count > MAX_TABLE_CELLS {
            return plan_err!(
                "{}: dataset {:?}: shape {:?} has {} cells, more than a table can count (2^63 - 1 rows)",
                source.location,
                ds.name(),
                ds.shape(),
                ds.record.cell_count
            );
        }
        let (shape, dims) = (ds.shape(), ds.dim_names());
        for v in &values {
            let d = v.dataset();
            if d.shape() != shape {
                return plan_err!(
                    "{}: dataset {:?} has shape {:?}, {} has {:?}; the datasets of one table must share their shape",
                    v.source.location,
                    d.name(),
                    d.shape(),
                    values[0].describe(),
                    shape
                );
            }
            if d.dim_names() != dims {
                return plan_err!(
                    "{}: dataset {:?} has dimensions {:?}, {} has {:?}; the datasets of one table must share their dimension names",
                    v.source.location,
                    d.name(),
                    d.dim_names(),
                    values[0].describe(),
                    dims
                );
            }
        }
        for (i, v) in values.iter().enumerate() {
            let d = v.dataset();
            if let Some(a) = axes.iter().find(|a| a.name == v.name) {
                return plan_err!(
                    "{}: dataset {:?} gives a value column {:?}, which clashes with the axis column {:?}",
                    v.source.location,
                    d.name(),
                    v.name,
                    a.name
                );
            }
            if values[..i].iter().any(|w| w.name == v.name) {
                return plan_err!(
                    "{}: the value column {:?} is named twice; a table's datasets need distinct names",
                    v.source.location,
                    v.name
                );
            }
        }
        let mut fields: Vec<Field> = axes
            .iter()
            .enumerate()
            .map(|(i, a)| {
                Field::new(&a.name, a.data_type(), false).with_metadata(axis_metadata(i, &a.described_attrs()))
            })
            .collect();
        fields.extend(values.iter().map(ValueColumn::field));
        Ok(TableModel {
            dataset: ds.id,
            source,
            axes,
            schema: Arc::new(Schema::new(fields)),
            values,
            nan_is_null: false,
            limits: Limits::default(),
            tasks: Arc::default(),
            files: None,
        })
    }

    /// The datasets `names` (at least two) of an opened file as one table: its axis
    /// columns from the first, then one value column per dataset, named by the dataset.
    pub async fn for_datasets(source: Arc<TetSource>, names: &[&str], limits: Limits) -> Result<Self> {
        let first = Self::for_source(source.clone(), names.first().copied(), limits).await?;
        first.with_datasets(names)
    }

    /// [`TableModel::for_datasets`] for a file whose axes can be read without fetching.
    pub fn from_datasets(source: Arc<TetSource>, names: &[&str], limits: Limits) -> Result<Self> {
        Self::from_source(source, names.first().copied(), limits)?.with_datasets(names)
    }

    /// This one-dataset table with the datasets `names` of its file as value columns
    /// (`names[0]` is its own dataset); one name keeps the table as it is.
    fn with_datasets(self, names: &[&str]) -> Result<Self> {
        if names.len() <= 1 {
            return Ok(self);
        }
        let values = names
            .iter()
            .map(|n| {
                let id = self
                    .source
                    .file
                    .dataset(n)
                    .map_err(|e| e.in_file(&self.source.location))?
                    .id;
                ValueColumn::new(self.source.clone(), id, n)
            })
            .collect::<Result<Vec<_>>>()?;
        self.with_values(values)
    }

    /// The table of `values` (datasets of this table's shape and dimension names, of any
    /// files) on this table's axes, with its session settings. The values' own axes are
    /// not compared here (a caller joining tables checks them, see
    /// [`TableModel::same_axes`]).
    pub fn with_values(&self, values: Vec<ValueColumn>) -> Result<Self> {
        if values.is_empty() {
            return plan_err!("{}: a table needs at least one dataset", self.source.location);
        }
        if self.files.is_some() {
            return plan_err!(
                "{}: the value columns of an archive come from its own files",
                self.location()
            );
        }
        let mut t = Self::assemble(self.source.clone(), self.dataset, self.axes.clone(), values)?;
        t.nan_is_null = self.nan_is_null;
        t.limits = self.limits;
        Ok(t.with_missing_rule())
    }

    /// `dataset=temp`, or for a table of several, `datasets=[t2m, sst]` (each with its file
    /// when that is not the first's): what plans display.
    pub fn datasets_text(&self) -> String {
        if !self.is_multi() {
            return format!("dataset={}", self.dataset().name());
        }
        let names: Vec<String> = self
            .values
            .iter()
            .map(|v| match v.source.location == self.source.location {
                true => v.dataset().name().to_owned(),
                false => v.describe(),
            })
            .collect();
        format!("datasets=[{}]", names.join(", "))
    }

    /// Whether `other` has the same axis columns (names, types and values) as this table.
    pub fn same_axes(&self, other: &TableModel) -> bool {
        self.axes.len() == other.axes.len() && self.axes.iter().zip(&other.axes).all(|(a, b)| a.same_as(b))
    }

    /// Whether `other` stores each value column as this table does
    /// ([`ValueColumn::stored_alike`]; the columns in order).
    pub fn stores_alike(&self, other: &TableModel) -> bool {
        self.values.len() == other.values.len() && self.values.iter().zip(&other.values).all(|(a, b)| a.stored_alike(b))
    }

    /// This table with the session's [`Limits`].
    pub fn with_limits(self: &Arc<Self>, limits: Limits) -> Arc<Self> {
        if limits == self.limits {
            return self.clone();
        }
        let mut t = TableModel::clone(self);
        t.limits = limits;
        Arc::new(t)
    }

    /// This table with `tet.nan_is_null` set to `on` (every NaN NULL when on; in each
    /// file of an archive).
    pub fn with_nan_is_null(self: &Arc<Self>, on: bool) -> Arc<Self> {
        if on == self.nan_is_null {
            return self.clone();
        }
        let mut t = TableModel::clone(self);
        t.nan_is_null = on;
        if let Some(files) = &self.files {
            let mut files = FileSet::clone(files);
            for m in &mut files.members {
                m.table = m.table.with_nan_is_null(on);
            }
            t.files = Some(Arc::new(files));
        }
        Arc::new(t.with_missing_rule())
    }

    /// Whether every file of the table stores each value column alike, so that the
    /// table's `values` decode every task (always for one file): what the fold needs.
    pub fn is_uniform(&self) -> bool {
        self.files.as_ref().is_none_or(|f| f.uniform)
    }

    /// Every value column's missing rule under this table's `nan_is_null`.
    fn with_missing_rule(mut self) -> Self {
        for v in &mut self.values {
            // The attributes parsed when the column was made, so this cannot fail here.
            if let Ok(m) = v.dataset().missing_values(self.nan_is_null) {
                v.missing = m;
            }
        }
        self
    }

    /// The first dataset (whose axes the table has).
    pub fn dataset(&self) -> &Dataset {
        &self.source.file.datasets[self.dataset]
    }

    /// The first value column.
    pub fn value(&self) -> &ValueColumn {
        &self.values[0]
    }

    /// Arrow type of the first value column.
    pub fn value_type(&self) -> DataType {
        self.schema.field(self.value_index()).data_type().clone()
    }

    /// Whether any cell of the first value column can be NULL under this table's rule.
    pub fn has_missing(&self) -> bool {
        self.value().has_missing()
    }

    /// Index of the first value column in [`TableModel::schema`] (after the axes).
    pub fn value_index(&self) -> usize {
        self.axes.len()
    }

    /// The value column at schema index `column`, if it is one.
    pub fn value_at(&self, column: usize) -> Option<(usize, &ValueColumn)> {
        let k = column.checked_sub(self.axes.len())?;
        self.values.get(k).map(|v| (k, v))
    }

    /// The value column named `name`, if there is one.
    pub fn value_named(&self, name: &str) -> Option<(usize, &ValueColumn)> {
        self.values.iter().enumerate().find(|(_, v)| v.name == name)
    }

    /// Whether any value column's file is in an object store.
    pub fn is_remote(&self) -> bool {
        match &self.files {
            Some(f) => f.members.iter().any(|m| m.table.is_remote()),
            None => self.values.iter().any(|v| v.source.is_remote()),
        }
    }

    /// What the table reads, for messages: the file, or an archive's pattern.
    pub fn location(&self) -> &str {
        match &self.files {
            Some(f) => &f.pattern,
            None => &self.source.location,
        }
    }

    /// The table's shape: each axis' extent.
    pub fn shape(&self) -> Vec<u64> {
        self.axes.iter().map(|a| a.extent).collect()
    }

    /// The one-file table whose bytes task `t` reads: an archive's file `t.file`, else
    /// this table.
    pub fn file_of(&self, t: &ChunkTask) -> &TableModel {
        self.member(t.file)
    }

    /// File `file` of an archive (this table for a table of one file). Tasks name only
    /// files of their table ([`FileSet::tasks`], checked by [`TableModel::tasks_by_id`]).
    pub fn member(&self, file: u32) -> &TableModel {
        match &self.files {
            Some(f) => f.members.get(file as usize).map_or(self, |m| &m.table),
            None => self,
        }
    }

    /// The first position of task `t`'s tile on each of the table's axes.
    pub fn tile_start(&self, t: &ChunkTask) -> Vec<u64> {
        let mut start = t.tile_start(&self.file_of(t).dataset().record.chunk_shape);
        if let Some(f) = &self.files
            && let Some(m) = f.members.get(t.file as usize)
        {
            start[f.axis] += m.start;
        }
        start
    }

    /// The tasks of the selection `sel` (over the table's axes), in read order: each
    /// file's in payload order, file after file.
    pub fn tasks(&self, sel: &[AxisSelection]) -> Vec<ChunkTask> {
        if let Some(f) = &self.files {
            return f.tasks(sel);
        }
        let (file, ds) = (&self.source.file, self.dataset());
        let mut tasks = aligned_tasks(&self.records(), sel);
        tasks.sort_by_key(|t| file.chunk(ds, t.linear).1.payload_offset);
        tasks
    }

    /// [`TableModel::tasks`] made from their ids, each alone, in the order given (see
    /// [`tasks_by_id`]).
    pub fn tasks_by_id(&self, sel: &[AxisSelection], ids: &[Vec<u64>]) -> Result<Vec<Vec<ChunkTask>>, String> {
        match &self.files {
            Some(f) => f.tasks_by_id(sel, ids),
            None => tasks_by_id(&self.records(), sel, ids),
        }
    }

    /// Tasks of the table over every cell.
    pub fn grid_count(&self) -> u64 {
        match &self.files {
            Some(f) => f.grid_count(),
            None => grid_count(&self.records()),
        }
    }

    /// Whether the table has more than one value column.
    pub fn is_multi(&self) -> bool {
        self.values.len() > 1
    }

    /// The chunk records of the value columns' datasets, in column order: the grids the
    /// table's tasks are aligned on ([`crate::plan::aligned_tasks`]).
    pub fn records(&self) -> Vec<&crate::format::DatasetRecord> {
        self.values.iter().map(|v| &v.dataset().record).collect()
    }

    /// The axis named `name`.
    pub fn axis_index(&self, name: &str) -> Option<usize> {
        self.axes.iter().position(|a| a.name == name)
    }
}

/// The files of an archive table, in order along the concatenation axis.
#[derive(Debug, Clone)]
pub struct FileSet {
    /// The pattern as the user wrote it (for messages).
    pub pattern: String,
    /// The concatenation axis (a dimension index).
    pub axis: usize,
    /// The files, ordered along `axis`.
    pub members: Vec<Member>,
    /// Whether every file stores each value column alike (one dtype, missing-value rule
    /// and packing): then the archive's `values` decode every file, and the fold may
    /// accumulate their stored values together. Otherwise each file's cells are decoded
    /// by its own rule ([`TableModel::file_of`]) and cast to the archive's type, and the
    /// fold folds each storage class apart ([`TableModel::storage_classes`]).
    pub uniform: bool,
}

/// One file of an archive table.
#[derive(Debug, Clone)]
pub struct Member {
    /// The file's own table (its source, datasets, chunk grids, codecs and axes).
    pub table: Arc<TableModel>,
    /// Its first position on the concatenation axis of the archive.
    pub start: u64,
    /// Its first task id in the archive (the ids of the files before it, summed).
    pub id_base: u64,
}

impl FileSet {
    /// `sel` (over the archive's axes) in member `i`'s positions; `None` when it selects
    /// nothing of that file.
    fn local_selection(&self, i: usize, sel: &[AxisSelection]) -> Option<Vec<AxisSelection>> {
        let m = &self.members[i];
        let extent = m.table.axes[self.axis].extent;
        let ranges: Vec<(u64, u64)> = sel[self.axis]
            .ranges_within(m.start, m.start + extent)
            .map(|(a, b)| (a - m.start, b - m.start))
            .collect();
        if ranges.is_empty() {
            return None;
        }
        let mut local = sel.to_vec();
        local[self.axis] = AxisSelection::from_sorted_ranges(extent, ranges);
        Some(local)
    }

    /// The tasks of every member `sel` reaches, member after member, each member's in its
    /// payload order.
    pub fn tasks(&self, sel: &[AxisSelection]) -> Vec<ChunkTask> {
        let mut out = Vec::new();
        for (i, m) in self.members.iter().enumerate() {
            let Some(local) = self.local_selection(i, sel) else {
                continue;
            };
            let first = out.len();
            out.extend(m.table.tasks(&local));
            for t in &mut out[first..] {
                t.file = i as u32;
                t.id += m.id_base;
            }
        }
        out
    }

    /// The member holding global task id `id`.
    fn member_of_id(&self, id: u64) -> usize {
        self.members.partition_point(|m| m.id_base <= id).saturating_sub(1)
    }

    /// [`FileSet::tasks`] made from their ids, each alone (see
    /// [`super::tasks_by_id`]); an id that no member's selection holds, or one listed
    /// twice, is an error.
    pub fn tasks_by_id(&self, sel: &[AxisSelection], ids: &[Vec<u64>]) -> Result<Vec<Vec<ChunkTask>>, String> {
        let mut local: HashMap<usize, Option<Vec<AxisSelection>>> = HashMap::new();
        let mut seen = HashSet::new();
        ids.iter()
            .map(|part| {
                part.iter()
                    .map(|&id| {
                        if !seen.insert(id) {
                            return Err(format!("chunk {id} is listed twice"));
                        }
                        let i = self.member_of_id(id);
                        let m = &self.members[i];
                        let within = local.entry(i).or_insert_with(|| self.local_selection(i, sel));
                        let Some(within) = within else {
                            return Err(format!("chunk {id}: its file is not selected"));
                        };
                        let mut task = tasks_by_id(&m.table.records(), within, &[vec![id - m.id_base]])
                            .map_err(|e| format!("{}: {e}", m.table.source.location))?
                            .pop()
                            .and_then(|mut p| p.pop())
                            .ok_or_else(|| format!("chunk {id}: no task"))?;
                        task.file = i as u32;
                        task.id = id;
                        Ok(task)
                    })
                    .collect()
            })
            .collect()
    }

    /// Tasks of the archive over every cell.
    pub fn grid_count(&self) -> u64 {
        self.members
            .iter()
            .map(|m| m.table.grid_count())
            .fold(0, u64::saturating_add)
    }
}
