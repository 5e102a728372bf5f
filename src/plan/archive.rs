//! An archive as one table: the files a pattern names, each a one-file [`TableModel`] (a
//! *member*), concatenated along one axis as xarray's `combine_by_coords` does, with its
//! checks ([`combine`]).
//!
//! The table's axes and schema are global (the concatenation axis joined from every
//! member); its [`FileSet`] routes each task to its member (see
//! [`TableModel::file_of`]).

use super::axes::Axis;
use super::common_grid::id_space;
use super::limits::MAX_TABLE_CELLS;
use super::table::{FileSet, Member, TableModel};
use super::value_column::ValueColumn;
use super::values::common_type;
use arrow::array::{Array, ArrayRef, AsArray, make_comparator};
use arrow::datatypes::{Field, Schema, SchemaRef};
use datafusion::common::{Result, ScalarValue, plan_datafusion_err, plan_err};
use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// The files `members` (each opened as a table of the same datasets, in path order) as
/// one table named by `pattern`, concatenated along the axis `forced` names or, without
/// it, along the one axis whose coordinates differ between files. Checked, as xarray's
/// `combine_by_coords` checks: the same dimensions and value columns in every file; every
/// other axis equal in every file; the concatenation axis ordered by its values,
/// monotonic in one direction over the whole table, with no overlap or repeat between
/// files; one calendar. Each file keeps its own packing and missing values; a value
/// column's type is the [`common_type`] of the files' (a packed int16 file beside a
/// float32 one gives Float64). Each error names the files concerned. One file is its own
/// table.
pub fn combine(pattern: &str, members: Vec<TableModel>, forced: Option<&str>) -> Result<TableModel> {
    let Some(first) = members.first() else {
        return plan_err!("{pattern}: matches no .tet file");
    };
    let name = |m: &TableModel| m.source.location.clone();
    let dims: Vec<&str> = first.axes.iter().map(|a| a.name.as_str()).collect();
    let columns: Vec<&str> = first.values.iter().map(|v| v.name.as_str()).collect();
    for m in &members[1..] {
        let their: Vec<&str> = m.axes.iter().map(|a| a.name.as_str()).collect();
        if their != dims {
            return plan_err!(
                "{pattern}: {} has dimensions {their:?}, {} has {dims:?}; the files of one table share their dimensions",
                name(m),
                name(first)
            );
        }
        let theirs: Vec<&str> = m.values.iter().map(|v| v.name.as_str()).collect();
        if theirs != columns {
            return plan_err!(
                "{pattern}: {} gives the value columns {theirs:?}, {} gives {columns:?}",
                name(m),
                name(first)
            );
        }
    }
    let axis = match forced {
        Some(f) => match dims.iter().position(|d| *d == f) {
            Some(d) => d,
            None => return plan_err!("{pattern}: tet.concat_axis = {f:?} is not a dimension of the files {dims:?}"),
        },
        None if members.len() == 1 => return Ok(members.into_iter().next().expect("one member")),
        None => {
            let differs: Vec<usize> = (0..dims.len())
                .filter(|&d| members[1..].iter().any(|m| !m.axes[d].same_as(&first.axes[d])))
                .collect();
            match differs[..] {
                [d] => d,
                [] => {
                    return plan_err!(
                        "{pattern}: every file has the same coordinates; nothing to concatenate (name an axis \
                         with SET tet.concat_axis = '<axis>')"
                    );
                }
                _ => {
                    let names: Vec<&str> = differs.iter().map(|&d| dims[d]).collect();
                    let other = members[1..]
                        .iter()
                        .find(|m| differs.iter().all(|&d| !m.axes[d].same_as(&first.axes[d])))
                        .or_else(|| {
                            members[1..]
                                .iter()
                                .find(|m| !m.axes[differs[1]].same_as(&first.axes[differs[1]]))
                        })
                        .map_or_else(String::new, name);
                    return plan_err!(
                        "{pattern}: the files differ on the axes {names:?} ({other} from {}); files combine along \
                         one axis (name it with SET tet.concat_axis = '<axis>' when the others should be equal)",
                        name(first)
                    );
                }
            }
        }
    };
    for d in (0..dims.len()).filter(|&d| d != axis) {
        if let Some(m) = members[1..].iter().find(|m| !m.axes[d].same_as(&first.axes[d])) {
            return plan_err!(
                "{pattern}: axis {} of {} differs from {}: {}",
                dims[d],
                name(m),
                name(first),
                first_difference(&first.axes[d], &m.axes[d])
            );
        }
    }
    check_calendars(pattern, &members)?;
    let mut members = members;
    one_time_unit(pattern, &mut members, axis)?;
    let members = order_along(pattern, members, axis)?;
    let uniform = members[1..].iter().all(|m| m.stores_alike(&members[0]));
    // The concatenation axis, joined.
    let extent = members.iter().try_fold(0u64, |n, m| n.checked_add(m.axes[axis].extent));
    let cells = members[0]
        .axes
        .iter()
        .enumerate()
        .map(|(d, a)| if d == axis { extent } else { Some(a.extent) })
        .try_fold(1u64, |n, e| n.checked_mul(e?));
    if cells.is_none_or(|c| c > MAX_TABLE_CELLS) {
        return plan_err!("{pattern}: the files hold more cells than a table can count (2^63 - 1 rows)");
    }
    let extent = extent.unwrap_or(u64::MAX);
    let values = match members[0].axes[axis].values {
        None => None,
        Some(_) => {
            let parts: Vec<&dyn Array> = members.iter().filter_map(|m| m.axes[axis].values.as_deref()).collect();
            Some(arrow::compute::concat(&parts)?)
        }
    };
    let mut axes = members[0].axes.clone();
    axes[axis] = Axis {
        extent,
        values,
        distinct: true,
        attrs: common_attrs(members.iter().map(|m| &m.axes[axis].attrs)),
        ..members[0].axes[axis].clone()
    };
    let fields: Vec<Field> = (0..members[0].schema.fields().len())
        .map(|c| {
            let f = members[0].schema.field(c);
            let metadata = common_attrs(members.iter().map(|m| m.schema.field(c).metadata()));
            let ty = match c {
                _ if c == axis => axes[axis].data_type(),
                // The other axes are equal in every file.
                _ if c < axes.len() => f.data_type().clone(),
                _ => members[1..]
                    .iter()
                    .try_fold(f.data_type().clone(), |t, m| {
                        common_type(&t, m.schema.field(c).data_type())
                    })
                    .ok_or_else(|| {
                        plan_datafusion_err!("{pattern}: the files' column {} has no common type", f.name())
                    })?,
            };
            let nullable = members.iter().any(|m| m.schema.field(c).is_nullable());
            Ok(Field::new(f.name(), ty, nullable).with_metadata(metadata.into_iter().collect()))
        })
        .collect::<Result<_>>()?;
    let schema = Arc::new(Schema::new(fields));
    Ok(TableModel::of_files(pattern, axis, axes, schema, members, uniform))
}

/// Value `i` of `values` as text (timestamps as ISO 8601), for messages.
fn value_text(values: &ArrayRef, i: usize) -> String {
    use arrow::util::display::{ArrayFormatter, FormatOptions};
    ArrayFormatter::try_new(values.as_ref(), &FormatOptions::default())
        .map(|f| f.value(i).to_string())
        .unwrap_or_else(|_| "?".into())
}

/// Where axis `b` first differs from `a`: a position and both values, or the extents.
fn first_difference(a: &Axis, b: &Axis) -> String {
    if a.extent != b.extent {
        return format!("{} positions, not {}", b.extent, a.extent);
    }
    let (Some(x), Some(y)) = (&a.values, &b.values) else {
        return "one has coordinate values, the other positions".into();
    };
    if x.data_type() != y.data_type() {
        return format!("values of type {}, not {}", y.data_type(), x.data_type());
    }
    (0..x.len().min(y.len()))
        .find_map(|i| {
            let (p, q) = (
                ScalarValue::try_from_array(x, i).ok()?,
                ScalarValue::try_from_array(y, i).ok()?,
            );
            (p != q).then(|| format!("at position {i}, {} instead of {}", value_text(y, i), value_text(x, i)))
        })
        .unwrap_or_else(|| "in its values".into())
}

/// Every CF time axis has the first file's calendar, and the same axes are CF times in
/// every file.
fn check_calendars(pattern: &str, members: &[TableModel]) -> Result<()> {
    let first = &members[0];
    for m in &members[1..] {
        let (ca, cb) = (first.axes.iter().map(|a| a.cf_time), m.axes.iter().map(|a| a.cf_time));
        for ((a, b), axis) in ca.zip(cb).zip(&first.axes) {
            match (a, b) {
                (Some(a), Some(b)) if a.calendar != b.calendar => {
                    return plan_err!(
                        "{pattern}: axis {}: {} uses the {:?} calendar, {} the {:?} calendar",
                        axis.name,
                        m.source.location,
                        b.calendar,
                        first.source.location,
                        a.calendar
                    );
                }
                (Some(_), None) | (None, Some(_)) => {
                    return plan_err!(
                        "{pattern}: axis {}: one of {} and {} holds CF times, the other does not",
                        axis.name,
                        first.source.location,
                        m.source.location
                    );
                }
                _ => {}
            }
        }
    }
    Ok(())
}

/// The concatenation axis in one timestamp unit: where some files' CF times needed
/// microseconds (dates outside 1677-2262) and others fit nanoseconds, every file's in
/// microseconds (exact: an error names a file whose times are not whole microseconds).
fn one_time_unit(pattern: &str, members: &mut [TableModel], axis: usize) -> Result<()> {
    use arrow::datatypes::{DataType, TimeUnit};
    let micros = DataType::Timestamp(TimeUnit::Microsecond, None);
    if !members.iter().any(|m| m.axes[axis].data_type() == micros) {
        return Ok(());
    }
    for m in members.iter_mut() {
        let a = &mut m.axes[axis];
        let Some(values) = &a.values else { continue };
        if values.data_type() != &DataType::Timestamp(TimeUnit::Nanosecond, None) {
            continue;
        }
        let ns = values.as_primitive::<arrow::datatypes::TimestampNanosecondType>();
        if ns.values().iter().any(|t| t % 1000 != 0) {
            return plan_err!(
                "{pattern}: axis {}: {} holds times finer than a microsecond, which files before 1677 or \
                 after 2262 cannot hold beside it",
                a.name,
                m.source.location
            );
        }
        a.values = Some(arrow::compute::cast(values, &micros)?);
    }
    Ok(())
}

/// The direction of `values`: `Less` when they increase strictly, `Greater` when they
/// decrease strictly, `Equal` for a single value, `None` otherwise.
fn direction(values: &ArrayRef) -> Option<Ordering> {
    let cmp = make_comparator(values.as_ref(), values.as_ref(), Default::default()).ok()?;
    if values.null_count() > 0 {
        return None;
    }
    let mut dir = Ordering::Equal;
    for i in 1..values.len() {
        match (dir, cmp(i - 1, i)) {
            (_, Ordering::Equal) => return None,
            (Ordering::Equal, o) => dir = o,
            (d, o) if d != o => return None,
            _ => {}
        }
    }
    Some(dir)
}

/// `members` ordered along `axis` by their first value, checked to be monotonic in one
/// direction without overlaps; path order when the axis has no values (positions).
fn order_along(pattern: &str, mut members: Vec<TableModel>, axis: usize) -> Result<Vec<TableModel>> {
    let name = &members[0].axes[axis].name.clone();
    if members[0].axes[axis].values.is_none() {
        if members.iter().any(|m| m.axes[axis].values.is_some()) {
            return plan_err!("{pattern}: axis {name} has coordinate values in some files and not in others");
        }
        return Ok(members);
    }
    let ty = members[0].axes[axis].data_type();
    let mut table_dir = Ordering::Equal;
    for m in &members {
        let a = &m.axes[axis];
        if a.data_type() != ty {
            return plan_err!(
                "{pattern}: axis {name} is {} in {}, {ty} in {}",
                a.data_type(),
                m.source.location,
                members[0].source.location
            );
        }
        let values = a.values.as_ref().expect("checked: every file has values");
        match direction(values) {
            None => {
                return plan_err!(
                    "{pattern}: axis {name} of {} is neither strictly increasing nor strictly decreasing, so the \
                     files cannot be ordered along it",
                    m.source.location
                );
            }
            Some(Ordering::Equal) => {}
            Some(d) if table_dir == Ordering::Equal => table_dir = d,
            Some(d) if d != table_dir => {
                return plan_err!(
                    "{pattern}: axis {name} increases in one file and decreases in {}",
                    m.source.location
                );
            }
            Some(_) => {}
        }
    }
    let ends = |m: &TableModel| -> Result<(ScalarValue, ScalarValue)> {
        let v = m.axes[axis].values.as_ref().expect("checked: every file has values");
        Ok((
            ScalarValue::try_from_array(v, 0)?,
            ScalarValue::try_from_array(v, v.len() - 1)?,
        ))
    };
    let mut keyed = members
        .drain(..)
        .map(|m| Ok((ends(&m)?, m)))
        .collect::<Result<Vec<_>>>()?;
    let descending = table_dir == Ordering::Greater;
    keyed.sort_by(|((a, _), _), ((b, _), _)| {
        let o = a.partial_cmp(b).unwrap_or(Ordering::Equal);
        if descending { o.reverse() } else { o }
    });
    for pair in keyed.windows(2) {
        let ((_, last), a) = &pair[0];
        let ((next, _), b) = &pair[1];
        let ordered = match descending {
            false => last < next,
            true => last > next,
        };
        if !ordered {
            let at = |m: &TableModel, first: bool| {
                let v = m.axes[axis].values.as_ref().expect("checked: every file has values");
                value_text(v, if first { 0 } else { v.len() - 1 })
            };
            return plan_err!(
                "{pattern}: {} and {} overlap on {name}: {} ends at {}, {} starts at {}",
                a.source.location,
                b.source.location,
                a.source.location,
                at(a, false),
                b.source.location,
                at(b, true)
            );
        }
    }
    Ok(keyed.into_iter().map(|(_, m)| m).collect())
}

/// The entries that every one of `sets` holds with the same value (what DataFusion's
/// union keeps of its inputs' field metadata).
fn common_attrs<'a, M>(mut sets: impl Iterator<Item = &'a M>) -> BTreeMap<String, String>
where
    M: 'a,
    &'a M: IntoIterator<Item = (&'a String, &'a String)>,
{
    let Some(first) = sets.next() else {
        return BTreeMap::new();
    };
    let mut common: BTreeMap<String, String> = first.into_iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    for s in sets {
        let other: HashMap<&String, &String> = s.into_iter().collect();
        common.retain(|k, v| other.get(k).is_some_and(|w| *w == v));
    }
    common
}

/// Making archive tables: of checked members, and of two archives joined file by file.
impl TableModel {
    /// The archive table named `pattern` of the one-file tables `members` (at least one),
    /// ordered along axis `axis`, with the archive's `axes` and `schema` (see
    /// [`super::combine`], which checks that they combine); `uniform` as
    /// [`FileSet::uniform`].
    pub fn of_files(
        pattern: &str,
        axis: usize,
        axes: Vec<Axis>,
        schema: SchemaRef,
        members: Vec<TableModel>,
        uniform: bool,
    ) -> TableModel {
        let (mut id_base, mut start) = (0u64, 0u64);
        let mut set = Vec::with_capacity(members.len());
        for m in members {
            let (ids, len) = (id_space(&m.records()), m.axes[axis].extent);
            set.push(Member {
                table: Arc::new(m),
                start,
                id_base,
            });
            id_base = id_base.saturating_add(ids);
            start += len;
        }
        let head = &set[0].table;
        TableModel {
            source: head.source.clone(),
            dataset: head.dataset,
            axes,
            schema,
            values: head.values.clone(),
            nan_is_null: head.nan_is_null,
            limits: head.limits,
            tasks: Arc::default(),
            files: Some(Arc::new(FileSet {
                pattern: pattern.to_owned(),
                axis,
                members: set,
                uniform,
            })),
        }
    }

    /// The table of this table's value columns then `other`'s, on this table's axes (which
    /// `other` must have, see [`TableModel::same_axes`]), the columns named `names` in
    /// that order: the join rewrite's table. Two archives combine file by file when their
    /// files lie at the same positions; an archive beside one file is an error (the join
    /// is then left to DataFusion).
    pub fn joined(&self, other: &TableModel, names: &[String]) -> Result<Self> {
        let renamed = |t: &TableModel, names: &[String]| -> Vec<ValueColumn> {
            t.values
                .iter()
                .zip(names)
                .map(|(v, n)| ValueColumn {
                    name: n.clone(),
                    ..v.clone()
                })
                .collect()
        };
        let (mine, theirs) = names.split_at(self.values.len().min(names.len()));
        if theirs.len() != other.values.len() {
            return plan_err!(
                "{} value column names for {} columns",
                names.len(),
                self.values.len() + other.values.len()
            );
        }
        let both = |a: &TableModel, b: &TableModel| {
            let values = renamed(a, mine).into_iter().chain(renamed(b, theirs)).collect();
            a.with_values(values)
        };
        let (Some(f), Some(g)) = (&self.files, &other.files) else {
            if self.files.is_some() || other.files.is_some() {
                return plan_err!(
                    "{} and {}: an archive is joined with one file",
                    self.location(),
                    other.location()
                );
            }
            return both(self, other);
        };
        let layout = |f: &FileSet| -> Vec<(u64, u64)> {
            f.members
                .iter()
                .map(|m| (m.start, m.table.axes[f.axis].extent))
                .collect()
        };
        if f.axis != g.axis || layout(f) != layout(g) {
            return plan_err!("{} and {}: their files lie at other positions", f.pattern, g.pattern);
        }
        let members = f
            .members
            .iter()
            .zip(&g.members)
            .map(|(m, n)| both(&m.table, &n.table))
            .collect::<Result<Vec<_>>>()?;
        let value_fields = self.schema.fields()[self.axes.len()..]
            .iter()
            .zip(mine)
            .chain(other.schema.fields()[other.axes.len()..].iter().zip(theirs))
            .map(|(field, name)| field.as_ref().clone().with_name(name));
        let fields: Vec<Field> = self.schema.fields()[..self.axes.len()]
            .iter()
            .map(|field| field.as_ref().clone())
            .chain(value_fields)
            .collect();
        let mut t = Self::of_files(
            &f.pattern,
            f.axis,
            self.axes.clone(),
            Arc::new(Schema::new(fields)),
            members,
            f.uniform && g.uniform,
        );
        t.nan_is_null = self.nan_is_null;
        t.limits = self.limits;
        Ok(t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::{DType, DatasetSpec, TetWriter};
    use crate::io::TetSource;
    use crate::plan::{AxisSelection, Limits};
    use std::collections::HashSet;

    /// A file of `v` over `time × x` (x of 3), time steps `t0..t0 + n` as a coordinate
    /// variable, chunked `chunk`; opened as a table.
    fn member(dir: &std::path::Path, t0: u64, n: u64, chunk: [u64; 2]) -> TableModel {
        let path = dir.join(format!("f{t0}.tet"));
        let data: Vec<u8> = (0..n * 3).flat_map(|i| ((t0 * 3 + i) as f32).to_le_bytes()).collect();
        let time: Vec<u8> = (t0..t0 + n).flat_map(|t| (t as f64).to_le_bytes()).collect();
        let mut w = TetWriter::new();
        w.dataset(DatasetSpec::new("v", DType::F32, &[n, 3], &chunk, &data).dim_names(&["time", "x"]))
            .unwrap()
            .dataset(DatasetSpec::new("time", DType::F64, &[n], &[n], &time))
            .unwrap();
        w.write_path(&path).unwrap();
        let source = TetSource::open(path.to_str().unwrap()).unwrap();
        TableModel::from_source(source, Some("v"), Limits::default()).unwrap()
    }

    fn archive() -> (tempfile::TempDir, TableModel) {
        let dir = tempfile::tempdir().unwrap();
        // Given out of order, with grids of their own.
        let members = vec![
            member(dir.path(), 5, 4, [3, 2]),
            member(dir.path(), 0, 2, [1, 3]),
            member(dir.path(), 2, 3, [2, 1]),
        ];
        let table = combine("f*.tet", members, None).unwrap();
        (dir, table)
    }

    #[test]
    fn files_are_ordered_along_the_axis_and_tiles_placed_on_it() {
        let (_dir, table) = archive();
        let f = table.files.as_ref().unwrap();
        assert_eq!(f.axis, 0);
        let starts: Vec<(u64, u64)> = f.members.iter().map(|m| (m.start, m.id_base)).collect();
        // Grids: 2 × 1, 2 × 3 and 2 × 2 chunks.
        assert_eq!(starts, vec![(0, 0), (2, 2), (5, 8)]);
        assert_eq!(table.shape(), vec![9, 3]);
        let sel: Vec<AxisSelection> = table.shape().into_iter().map(AxisSelection::all).collect();
        // Each task's cells, placed by tile_start, are the table's cells once each; the
        // value of cell (t, x) was written as 3t + x, so the files' order shows too.
        let mut cells = Vec::new();
        for t in table.tasks(&sel) {
            let start = table.tile_start(&t);
            let m = table.file_of(&t);
            assert_eq!(m.source.location, f.members[t.file as usize].table.source.location);
            for (a, b) in t.local[0].iter().copied() {
                for (c, d) in t.local[1].iter().copied() {
                    for i in a..b {
                        cells.extend((c..d).map(|j| (start[0] + i) * 3 + start[1] + j));
                    }
                }
            }
        }
        cells.sort_unstable();
        assert_eq!(cells, (0..27).collect::<Vec<u64>>());
    }

    #[test]
    fn a_selection_makes_tasks_of_the_files_it_reaches_and_ids_make_them_again() {
        let (_dir, table) = archive();
        let mut sel: Vec<AxisSelection> = table.shape().into_iter().map(AxisSelection::all).collect();
        sel[0] = AxisSelection::from_sorted_ranges(9, [(3, 4)]);
        let tasks = table.tasks(&sel);
        assert!(tasks.iter().all(|t| t.file == 1), "{tasks:?}");
        sel[0] = AxisSelection::from_sorted_ranges(9, [(1, 3), (6, 9)]);
        let tasks = table.tasks(&sel);
        let files: HashSet<u32> = tasks.iter().map(|t| t.file).collect();
        assert_eq!(files, HashSet::from([0, 1, 2]));
        let ids: Vec<Vec<u64>> = vec![tasks.iter().rev().map(|t| t.id).collect()];
        let again = table.tasks_by_id(&sel, &ids).unwrap();
        let mut want = tasks.clone();
        want.reverse();
        assert_eq!(again, vec![want]);
        assert!(table.tasks_by_id(&sel, &[vec![ids[0][0], ids[0][0]]]).is_err());
        // An id of a file the selection does not reach.
        sel[0] = AxisSelection::from_sorted_ranges(9, [(0, 1)]);
        assert!(table.tasks_by_id(&sel, &[vec![9]]).is_err());
        assert_eq!(table.grid_count(), 12);
    }

    #[test]
    fn overlapping_and_disagreeing_files_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let e = combine(
            "p",
            vec![member(dir.path(), 0, 3, [3, 3]), member(dir.path(), 2, 3, [3, 3])],
            None,
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("overlap") && e.contains("f0.tet") && e.contains("f2.tet"),
            "{e}"
        );
        let other = tempfile::tempdir().unwrap();
        let e = combine(
            "p",
            vec![member(dir.path(), 0, 3, [3, 3]), member(other.path(), 0, 3, [3, 3])],
            None,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("nothing to concatenate"), "{e}");
        let e = combine("p", vec![member(other.path(), 0, 3, [3, 3])], Some("y"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("not a dimension"), "{e}");
    }

    #[test]
    fn fields_keep_the_attributes_every_file_shares() {
        let a = BTreeMap::from([("units".to_string(), "K".to_string()), ("history".into(), "a".into())]);
        let b = BTreeMap::from([("units".to_string(), "K".to_string()), ("history".into(), "b".into())]);
        let c = common_attrs([&a, &b].into_iter());
        assert_eq!(c, BTreeMap::from([("units".to_string(), "K".to_string())]));
    }
}
