//! [`AccessPlan`]: what a query reads of a dataset, built by one function from the pushed
//! filters, and the one partitioner that splits it over output partitions.
//!
//! Resolution runs in two levels, each in a file of its own: axis filters select
//! positions per axis ([`super::axis_filter`]), the chunks the selection touches become
//! tasks ([`super::tasks`]), and zone maps drop the tasks no value filter can match
//! ([`super::zone_filter`]).

use super::axis_filter::{self, FilterKind};
use super::selection::AxisSelection;
use super::table::TableModel;
use super::tasks::ChunkTask;
use super::zone_filter::ZonePruning;
use crate::format::Codec;
use datafusion::catalog::Session;
use datafusion::common::{DFSchema, Result};
use datafusion::logical_expr::Expr;
use datafusion::logical_expr::utils::conjunction;
use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::sync::Arc;

/// The cells and chunks a query reads of one dataset.
#[derive(Debug, Clone, PartialEq)]
pub struct AccessPlan {
    /// Per axis, the selected positions.
    pub selection: Vec<AxisSelection>,
    /// The chunks to read, in file (payload offset) order; shared, so that handing a
    /// partition its tasks copies no coordinates or ranges.
    pub tasks: Vec<Arc<ChunkTask>>,
    /// What each level removed.
    pub pruning: PruningCounts,
    /// Whether a value filter was pushed (then DataFusion still filters rows, and row
    /// counts are not exact).
    pub value_filters: bool,
}

/// Chunk counts at each level of an [`AccessPlan`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PruningCounts {
    /// Chunks in the dataset (tasks of the common grid, for a table of datasets whose
    /// chunk grids differ: see [`super::aligned_tasks`]).
    pub chunks_total: u64,
    /// Chunks that no axis selection touches.
    pub pruned_by_axes: u64,
    /// Chunks whose zone maps rule out every value filter.
    pub pruned_by_zone: u64,
}

impl AccessPlan {
    /// Resolve the pushed `filters` over `table`: axis filters to per-axis selections, the
    /// chunks they touch to tasks, then zone maps against the value filters.
    pub fn build(table: &TableModel, session: &dyn Session, filters: &[Expr]) -> Result<AccessPlan> {
        let shape = table.shape();
        let cells = shape.iter().product();
        table
            .limits
            .check_cells(table.location(), table.dataset().name(), &shape, cells)?;
        let mut selection: Vec<AxisSelection> = table.axes.iter().map(|a| AxisSelection::all(a.extent)).collect();
        let mut value_filters = Vec::new();
        for f in filters {
            match axis_filter::classify(table, f) {
                FilterKind::Axis(d) => {
                    selection[d] = selection[d].intersect(&axis_filter::resolve(table, session, d, f)?)
                }
                FilterKind::Value => value_filters.push(f.clone()),
                FilterKind::Other => {}
            }
        }
        let mut tasks: Vec<Arc<ChunkTask>> = table
            .tasks
            .get_or_build(&selection, || {
                table.tasks(&selection).into_iter().map(Arc::new).collect()
            })
            .to_vec();
        let selected = tasks.len() as u64;
        let has_value_filters = !value_filters.is_empty();
        if let Some(pred) = conjunction(value_filters)
            && tasks
                .iter()
                .any(|t| table.file_of(t).values.iter().any(|v| v.dataset().zones.is_some()))
        {
            let df_schema = DFSchema::try_from(table.schema.clone())?;
            let phys = session.create_physical_expr(pred, &df_schema)?;
            let keep = ZonePruning::new(&tasks, table).prune(phys)?;
            let mut k = keep.into_iter();
            tasks.retain(|_| k.next().unwrap_or(true));
        }
        // Tiles a read would hold in memory (decoded zstd chunks; any chunk fetched from an
        // object store) are checked against the limit here, once, before any is read:
        // their size is only the file's claim.
        // A task spread over several chunks of a dataset holds, besides them, the tile
        // assembled from them: the task's own tile's cells in that dataset's type.
        for t in &tasks {
            for (k, v) in table.file_of(t).values.iter().enumerate() {
                let (file, vds) = (&v.source.file, v.dataset());
                let mut checked = Ok(());
                t.for_each_chunk(k, |linear, _| {
                    let (_, e) = file.chunk(vds, linear);
                    let held = match (v.source.is_remote(), e.codec) {
                        (true, _) => e.raw_byte_len.max(e.stored_byte_len),
                        (false, Codec::Raw) => 0,
                        (false, _) => e.raw_byte_len,
                    };
                    if checked.is_ok() {
                        checked = table.limits.check_tile(&v.source.location, vds.name(), linear, held);
                    }
                });
                checked?;
                if t.spread_of(k).is_some() {
                    let cells = t.tile_extent.iter().fold(1u64, |a, &e| a.saturating_mul(e));
                    let bytes = cells.saturating_mul(vds.dtype().size() as u64);
                    table
                        .limits
                        .check_assembled(&v.source.location, vds.name(), t.linear, bytes)?;
                }
            }
        }
        let chunks_total = table.grid_count();
        Ok(AccessPlan {
            pruning: PruningCounts {
                chunks_total,
                pruned_by_axes: chunks_total.saturating_sub(selected),
                pruned_by_zone: selected - tasks.len() as u64,
            },
            selection,
            tasks,
            value_filters: has_value_filters,
        })
    }

    /// The task ids split into at most `n` contiguous groups of similar weight: the one
    /// partitioner. `read` names the value columns whose payloads the plan reads: tasks
    /// weigh their stored bytes of those, or their cells when none is read. Tasks keep
    /// their (file) order, except that the chunk coordinates of the `outer` axes, when
    /// given, come first: a grouped fold split that way gives each partition its own
    /// stretch of those axes, so partitions hold disjoint parts of the groups (see
    /// [`AccessPlan::covered`]) rather than every group each.
    ///
    /// Where the datasets' chunk grids differ, tasks share chunks. Tasks sharing a chunk
    /// that costs something to read again (compressed, or in an object store) go to one
    /// partition (`read_once_units`), so each such chunk is fetched and decoded once,
    /// unless keeping them together would make the heaviest partition more than 1.25×
    /// what a split of single tasks gives (e.g. one dataset chunked along time, the
    /// other along space: every task shares a chunk with every other); then a chunk at a
    /// cut is read by both partitions. A raw chunk of a local file is a slice of its
    /// mapping: each task touches only its own cells, so sharing it costs nothing.
    pub fn partitions(&self, table: &TableModel, n: usize, read: &[usize], outer: &[usize]) -> Vec<Vec<u64>> {
        let mut tasks: Vec<&ChunkTask> = self.tasks.iter().map(|t| &**t).collect();
        if !outer.is_empty() {
            tasks.sort_by_cached_key(|t| {
                let start = table.tile_start(t);
                outer.iter().map(|&d| start[d]).collect::<Vec<_>>()
            });
        }
        let weigh = |t: &ChunkTask| match read.is_empty() {
            true => t.cells,
            false => stored_share(table, t, read),
        };
        let ids = |groups: Vec<Vec<&ChunkTask>>| -> Vec<Vec<u64>> {
            groups
                .into_iter()
                .map(|g| g.into_iter().map(|t| t.id).collect())
                .collect()
        };
        let by_task = split_balanced(tasks.clone(), n, |t| weigh(t));
        let Some(units) = read_once_units(table, &tasks, read) else {
            return ids(by_task);
        };
        let heaviest = |groups: &[Vec<&ChunkTask>]| -> u128 {
            groups
                .iter()
                .map(|g| g.iter().map(|t| weigh(t).max(1) as u128).sum::<u128>())
                .max()
                .unwrap_or(0)
        };
        let unit_tasks: Vec<Vec<&ChunkTask>> = units.iter().map(|u| u.iter().map(|&i| tasks[i]).collect()).collect();
        let by_unit: Vec<Vec<&ChunkTask>> = split_balanced(unit_tasks, n, |u| {
            u.iter().map(|t| weigh(t).max(1)).fold(0, u64::saturating_add)
        })
        .into_iter()
        .map(|g| g.concat())
        .collect();
        match heaviest(&by_unit) * 4 <= heaviest(&by_task) * 5 {
            true => ids(by_unit),
            false => ids(by_task),
        }
    }

    /// The selection narrowed, per axis, to the stretch from the first to the last
    /// position `tasks` cover (all of them tasks of this plan): what one partition's group
    /// keys and weights need to be evaluated over. No task covers nothing.
    pub fn covered(&self, table: &TableModel, tasks: &[Arc<ChunkTask>]) -> Vec<AxisSelection> {
        let starts: Vec<Vec<u64>> = tasks.iter().map(|t| table.tile_start(t)).collect();
        self.selection
            .iter()
            .enumerate()
            .map(|(d, sel)| {
                let stretch = tasks.iter().zip(&starts).filter_map(|(t, start)| {
                    let origin = start[d];
                    let (first, last) = (t.local[d].first()?, t.local[d].last()?);
                    Some((origin.saturating_add(first.0), origin.saturating_add(last.1)))
                });
                let (lo, hi) = stretch.fold((u64::MAX, 0), |(lo, hi), (a, b)| (lo.min(a), hi.max(b)));
                sel.intersect(&AxisSelection::from_sorted_ranges(sel.extent(), [(lo, hi)]))
            })
            .collect()
    }

    /// `, files=<read>/<total>` for an archive table (the files whose chunks the plan
    /// reads, of all it names); empty for a table of one file.
    pub fn files_text(&self, table: &TableModel) -> String {
        let Some(f) = &table.files else {
            return String::new();
        };
        let mut read: Vec<u32> = self.tasks.iter().map(|t| t.file).collect();
        read.sort_unstable();
        read.dedup();
        format!(", files={}/{}", read.len(), f.members.len())
    }

    /// Selected cells (before value filters).
    pub fn cells(&self) -> u64 {
        self.tasks.iter().map(|t| t.cells).sum()
    }
}

/// The stored bytes a task reads of the value columns `read`: each dataset's chunk's share
/// for the cells the task holds of it (the whole chunk when the grids agree).
fn stored_share(table: &TableModel, t: &ChunkTask, read: &[usize]) -> u64 {
    let table = table.file_of(t);
    read.iter()
        .filter_map(|&k| Some((k, table.values.get(k)?)))
        .map(|(k, v)| {
            let (file, vds) = (&v.source.file, v.dataset());
            if t.spread_of(k).is_some() {
                // Spread over several chunks: their stored bytes per cell, for the task's
                // cells.
                let (mut stored, mut cells) = (0u128, 0u128);
                t.for_each_chunk(k, |linear, coords| {
                    stored += file.chunk(vds, linear).1.stored_byte_len as u128;
                    let r = &vds.record;
                    cells += (0..coords.len())
                        .map(|d| r.chunk_shape[d].min(r.shape[d].saturating_sub(coords[d] * r.chunk_shape[d])) as u128)
                        .product::<u128>();
                });
                return (stored * t.cells as u128 / cells.max(1)) as u64;
            }
            let mut stored = 0;
            t.for_each_chunk(k, |linear, _| stored = file.chunk(vds, linear).1.stored_byte_len);
            let tile: u64 = t.tile_extent_of(k).iter().product();
            // A task covering its whole tile (no axis filter cuts into its chunk) weighs
            // the tile's stored bytes; a part of a tile weighs its share of them.
            if t.cells == tile {
                stored
            } else {
                (stored as u128 * t.cells as u128 / tile.max(1) as u128) as u64
            }
        })
        .fold(0, u64::saturating_add)
}

/// `tasks` (indices into it) in groups that must be read by one partition for no chunk
/// of the value columns `read` to be read twice where a second read costs (a compressed
/// chunk, or any chunk of an object store): tasks connected by such shared chunks. Each
/// group is in task order; groups are in the order of their first task. `None` when no
/// two tasks share such a chunk (always when the datasets' grids agree): every task is
/// a group of its own.
fn read_once_units(table: &TableModel, tasks: &[&ChunkTask], read: &[usize]) -> Option<Vec<Vec<usize>>> {
    let one_grid = |m: &TableModel| {
        let grid = &m.dataset().record.chunk_shape;
        m.values.iter().all(|v| &v.dataset().record.chunk_shape == grid)
    };
    let every_file_one_grid = match &table.files {
        Some(f) => f.members.iter().all(|m| one_grid(&m.table)),
        None => one_grid(table),
    };
    if read.is_empty() || every_file_one_grid {
        return None;
    }
    // Union-find over tasks; a set's root is its first task.
    fn root(parent: &mut [usize], mut i: usize) -> usize {
        while parent[i] != i {
            parent[i] = parent[parent[i]];
            i = parent[i];
        }
        i
    }
    let mut parent: Vec<usize> = (0..tasks.len()).collect();
    let mut first_user: HashMap<(u32, usize, u64), usize> = HashMap::new();
    let mut shared = false;
    for (i, t) in tasks.iter().enumerate() {
        for &k in read {
            let Some(v) = table.file_of(t).values.get(k) else {
                continue;
            };
            t.for_each_chunk(k, |linear, _| {
                if !v.source.is_remote() && v.source.file.chunk(v.dataset(), linear).1.codec == Codec::Raw {
                    return;
                }
                match first_user.entry((t.file, k, linear)) {
                    Entry::Occupied(e) => {
                        let (a, b) = (root(&mut parent, i), root(&mut parent, *e.get()));
                        parent[a.max(b)] = a.min(b);
                        shared = true;
                    }
                    Entry::Vacant(e) => {
                        e.insert(i);
                    }
                }
            });
        }
    }
    if !shared {
        return None;
    }
    // Each root's group, numbered in the order roots first appear.
    let mut group_of = vec![usize::MAX; tasks.len()];
    let mut units: Vec<Vec<usize>> = Vec::new();
    for i in 0..tasks.len() {
        let r = root(&mut parent, i);
        if group_of[r] == usize::MAX {
            group_of[r] = units.len();
            units.push(Vec::new());
        }
        units[group_of[r]].push(i);
    }
    Some(units)
}

/// Split `items` (kept in order) into at most `n` contiguous groups of similar total
/// `weight`. Never returns empty groups; returns no group for no items.
pub fn split_balanced<T>(items: Vec<T>, n: usize, weight: impl Fn(&T) -> u64) -> Vec<Vec<T>> {
    // Each item is weighed once (a task's weight looks up its chunk entries).
    let weights: Vec<u128> = items.iter().map(|t| weight(t).max(1) as u128).collect();
    let total: u128 = weights.iter().sum();
    let n = n.max(1).min(items.len());
    let mut groups: Vec<Vec<T>> = Vec::with_capacity(n);
    let mut acc: u128 = 0;
    let mut current = Vec::new();
    let count = items.len();
    for (i, (t, w)) in items.into_iter().zip(weights).enumerate() {
        acc += w;
        current.push(t);
        let target = total * (groups.len() as u128 + 1) / n as u128;
        let left = count - i - 1;
        let groups_left = n - groups.len() - 1;
        if groups.len() + 1 < n && (acc >= target || left == groups_left) {
            groups.push(std::mem::take(&mut current));
        }
    }
    if !current.is_empty() {
        groups.push(current);
    }
    groups
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::{ChunkCodecs, Codec, DType, DatasetSpec, TetWriter};
    use crate::io::TetSource;
    use crate::plan::aligned_tasks;

    /// The plan of `selection` over `table`: its tasks, nothing pruned.
    fn plan_over(table: &TableModel, selection: Vec<AxisSelection>) -> AccessPlan {
        AccessPlan {
            tasks: aligned_tasks(&table.records(), &selection)
                .into_iter()
                .map(Arc::new)
                .collect(),
            selection,
            pruning: PruningCounts::default(),
            value_filters: false,
        }
    }

    #[test]
    fn partitions_weigh_stored_bytes_or_cells() {
        // 8 chunks of 1000 cells: the first four zstd zeros (a few bytes each), the last
        // four raw noise (1000 bytes each).
        let data: Vec<u8> = (0..8000u32)
            .map(|i| if i < 4000 { 0 } else { (i * 7919 % 251) as u8 })
            .collect();
        let codecs = ChunkCodecs::PerChunk((0..8).map(|c| if c < 4 { Codec::Zstd } else { Codec::Raw }).collect());
        let mut w = TetWriter::new();
        w.dataset(DatasetSpec::new("v8", DType::U8, &[8, 1000], &[1, 1000], &data).codecs(codecs))
            .unwrap();
        let path = std::env::temp_dir().join(format!("tet-partitions-{}.tet", std::process::id()));
        w.write_path(&path).unwrap();
        let table = TableModel::from_source(
            TetSource::open(path.to_str().unwrap()).unwrap(),
            None,
            crate::plan::Limits::default(),
        )
        .unwrap();
        std::fs::remove_file(&path).unwrap();
        let access = plan_over(
            &table,
            table.axes.iter().map(|a| AxisSelection::all(a.extent)).collect(),
        );
        let by_cells = access.partitions(&table, 2, &[], &[]);
        assert_eq!(by_cells, vec![vec![0, 1, 2, 3], vec![4, 5, 6, 7]]);
        let by_bytes = access.partitions(&table, 2, &[0], &[]);
        assert_eq!(by_bytes.concat(), (0..8).collect::<Vec<u64>>());
        assert!(by_bytes[0].len() > 4, "{by_bytes:?}");
    }

    #[test]
    fn outer_axes_split_partitions_into_disjoint_stretches() {
        // 8 × 12 cells in 2 × 3 chunks (4 × 4 chunks in the grid).
        let data: Vec<u8> = (0..96u8).collect();
        let mut w = TetWriter::new();
        w.dataset(DatasetSpec::new("v", DType::U8, &[8, 12], &[2, 3], &data))
            .unwrap();
        let path = std::env::temp_dir().join(format!("tet-outer-{}.tet", std::process::id()));
        w.write_path(&path).unwrap();
        let table = TableModel::from_source(
            TetSource::open(path.to_str().unwrap()).unwrap(),
            None,
            crate::plan::Limits::default(),
        )
        .unwrap();
        std::fs::remove_file(&path).unwrap();
        let mut selection: Vec<AxisSelection> = table.axes.iter().map(|a| AxisSelection::all(a.extent)).collect();
        // Positions 1..11 of axis 1 (chunks 0..4 of it, the first and last in part).
        selection[1] = AxisSelection::from_sorted_ranges(12, [(1, 11)]);
        let access = plan_over(&table, selection.clone());
        let chunk_shape = &table.dataset().record.chunk_shape;
        for (outer, axis) in [(vec![1], 1), (vec![0], 0)] {
            let parts = access.partitions(&table, 2, &[], &outer);
            let mut all: Vec<u64> = parts.concat();
            all.sort_unstable();
            assert_eq!(all, (0..16).collect::<Vec<u64>>());
            let stretches: Vec<(u64, u64)> = parts
                .iter()
                .map(|p| {
                    let tasks: Vec<Arc<ChunkTask>> = p.iter().map(|id| access.tasks[*id as usize].clone()).collect();
                    let covered = access.covered(&table, &tasks);
                    // The other axis is covered whole.
                    assert_eq!(covered[1 - axis], selection[1 - axis]);
                    covered[axis].bounds().unwrap()
                })
                .collect();
            // Brute force: the positions each partition's tasks select along `axis`.
            for (p, &(lo, hi)) in parts.iter().zip(&stretches) {
                let positions: Vec<u64> = p
                    .iter()
                    .flat_map(|id| {
                        let t = &access.tasks[*id as usize];
                        let origin = t.coords[axis] * chunk_shape[axis];
                        t.local[axis].iter().flat_map(move |&(a, b)| (a + origin)..(b + origin))
                    })
                    .collect();
                assert_eq!(
                    (lo, hi),
                    (*positions.iter().min().unwrap(), *positions.iter().max().unwrap())
                );
            }
            assert!(stretches[0].1 < stretches[1].0, "{outer:?}: {stretches:?}");
        }
        let none = access.covered(&table, &[]);
        assert!(none.iter().all(|s| s.count() == 0));
    }

    /// A table of datasets `a` (chunks `ca`) and `b` (chunks `cb`) of shape [24, 6], both
    /// compressed when `zstd`, and the plan of all of it.
    fn two_grids(ca: &[u64], cb: &[u64], zstd: bool) -> (TableModel, AccessPlan) {
        let data: Vec<u8> = (0..144u32).flat_map(|i| (i as f32).to_le_bytes()).collect();
        let codecs = || if zstd { ChunkCodecs::Zstd(1) } else { ChunkCodecs::Raw };
        let mut w = TetWriter::new();
        w.dataset(DatasetSpec::new("a", DType::F32, &[24, 6], ca, &data).codecs(codecs()))
            .unwrap();
        w.dataset(DatasetSpec::new("b", DType::F32, &[24, 6], cb, &data).codecs(codecs()))
            .unwrap();
        let path = std::env::temp_dir().join(format!("tet-grids-{}-{ca:?}-{cb:?}-{zstd}.tet", std::process::id()));
        w.write_path(&path).unwrap();
        let table = TableModel::from_datasets(
            TetSource::open(path.to_str().unwrap()).unwrap(),
            &["a", "b"],
            crate::plan::Limits::default(),
        )
        .unwrap();
        std::fs::remove_file(&path).unwrap();
        let access = plan_over(
            &table,
            table.axes.iter().map(|a| AxisSelection::all(a.extent)).collect(),
        );
        (table, access)
    }

    /// For each partition, the chunks (column, chunk id) its tasks read.
    fn chunks_per_partition(access: &AccessPlan, parts: &[Vec<u64>]) -> Vec<std::collections::BTreeSet<(usize, u64)>> {
        parts
            .iter()
            .map(|p| {
                p.iter()
                    .flat_map(|id| {
                        let t = access.tasks.iter().find(|t| t.id == *id).unwrap();
                        let mut chunks = Vec::new();
                        for k in 0..2 {
                            t.for_each_chunk(k, |linear, _| chunks.push((k, linear)));
                        }
                        chunks
                    })
                    .collect()
            })
            .collect()
    }

    #[test]
    fn partitions_read_each_compressed_chunk_once_unless_that_unbalances_them() {
        // Rows cut by 3 in `a`, by 4 in `b`: the grids meet every 12 rows, so the tasks of
        // rows 0..12 and of 12..24 share no chunk and two partitions read each chunk once.
        // Four partitions of those two units would be about twice as heavy as of single
        // tasks: the split then cuts through shared chunks.
        let (table, access) = two_grids(&[3, 6], &[4, 6], true);
        for n in [2, 4] {
            let parts = access.partitions(&table, n, &[0, 1], &[]);
            let mut all: Vec<u64> = parts.concat();
            all.sort_unstable();
            let mut want: Vec<u64> = access.tasks.iter().map(|t| t.id).collect();
            want.sort_unstable();
            assert_eq!(all, want, "n {n}");
            assert_eq!(parts.len(), n, "n {n}: {parts:?}");
            let chunks = chunks_per_partition(&access, &parts);
            let shared = (1..n).any(|i| (0..i).any(|j| !chunks[i].is_disjoint(&chunks[j])));
            assert_eq!(shared, n > 2, "n {n}: {chunks:?}");
        }
        // Raw chunks of a local file are shared freely: tasks split one by one.
        let (raw_table, raw) = two_grids(&[3, 6], &[4, 6], false);
        let parts = raw.partitions(&raw_table, 3, &[0, 1], &[]);
        assert_eq!(parts.len(), 3);
        assert_eq!(parts.concat().len(), raw.tasks.len());
        // Reading `a` alone, its own chunks are never shared.
        assert_eq!(access.partitions(&table, 4, &[0], &[]).len(), 4);
        // `a` in rows, `b` in columns: every task shares a chunk of `b` with every other,
        // so one partition would hold everything; the split keeps two and reads the
        // chunks of `b` at the cut in both.
        let (table, access) = two_grids(&[1, 6], &[24, 1], true);
        let parts = access.partitions(&table, 2, &[0, 1], &[]);
        assert_eq!(parts.len(), 2);
        let chunks = chunks_per_partition(&access, &parts);
        assert!(!chunks[0].is_disjoint(&chunks[1]));
    }

    #[test]
    fn split_is_balanced_and_complete() {
        let groups = split_balanced((0..10u64).collect(), 3, |_| 1);
        assert_eq!(groups.iter().map(Vec::len).collect::<Vec<_>>(), vec![3, 3, 4]);
        let groups = split_balanced(vec![100u64, 1, 1, 1, 100], 2, |w| *w);
        assert_eq!(groups.concat(), vec![100, 1, 1, 1, 100]);
        assert_eq!(groups.len(), 2);
        assert!(split_balanced(Vec::<u64>::new(), 4, |_| 1).is_empty());
        assert_eq!(split_balanced(vec![1u64, 2], 8, |_| 1).len(), 2);
    }
}
