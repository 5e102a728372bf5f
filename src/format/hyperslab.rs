//! Row-major box geometry and the one tile walker: [`Runs`] yields the selected cells of a
//! row-major array (a tile, or a whole dataset) as contiguous runs along the last axis.
//!
//! Everything that visits selected cells goes through it: the scan's value column and
//! axis positions, the aggregate fold, [`TetFile::read_box`](super::TetFile::read_box)
//! and the writer's tile gathering.

/// Row-major element strides of `shape`.
pub fn strides(shape: &[u64]) -> Vec<u64> {
    let mut s = vec![1u64; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        s[d] = s[d + 1] * shape[d + 1];
    }
    s
}

/// Advance a row-major multi-index `idx` over `0..extents[d]` per axis (last axis
/// fastest). Returns false, leaving `idx` at zero, once every index has been visited.
pub fn odometer_next(idx: &mut [usize], extents: &[usize]) -> bool {
    for d in (0..idx.len()).rev() {
        idx[d] += 1;
        if idx[d] < extents[d] {
            return true;
        }
        idx[d] = 0;
    }
    false
}

/// One contiguous run of selected cells along the last axis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Run {
    /// Row-major element offset of the run's first cell in the array.
    pub offset: u64,
    /// Number of cells.
    pub len: u64,
    /// Position of the run's first cell along the last axis.
    pub first: u64,
}

/// The cells of a row-major array of shape `extent` selected by per-axis sorted, disjoint
/// ranges, as one [`Run`] per (outer position, last-axis range), in row-major order.
/// [`Runs::outer`] gives the outer-axis positions of the run last returned;
/// [`Runs::merged`] joins runs that are contiguous in memory.
#[derive(Debug, Clone)]
pub struct Runs<'a> {
    ranges: &'a [Vec<(u64, u64)>],
    strides: Vec<u64>,
    /// Per outer axis: the current range and position in it.
    range_idx: Vec<usize>,
    pos: Vec<u64>,
    /// Element offset of the current outer position.
    base: u64,
    /// The next range of the last axis to emit.
    inner: usize,
    done: bool,
}

impl<'a> Runs<'a> {
    /// Walk the selection `ranges` (one list per axis, within `extent`) of an array of
    /// shape `extent`. An empty rank or an axis with no range yields nothing.
    pub fn new(extent: &[u64], ranges: &'a [Vec<(u64, u64)>]) -> Self {
        let n = extent.len();
        let done = n == 0 || ranges.len() != n || ranges.iter().any(|r| r.is_empty());
        let strides = strides(extent);
        let pos: Vec<u64> = if done {
            vec![]
        } else {
            ranges[..n - 1].iter().map(|r| r[0].0).collect()
        };
        let base = pos.iter().zip(&strides).map(|(p, s)| p * s).sum();
        Runs {
            ranges,
            strides,
            range_idx: vec![0; pos.len()],
            pos,
            base,
            inner: 0,
            done,
        }
    }

    /// Positions along the outer axes (all but the last) of the run last returned.
    pub fn outer(&self) -> &[u64] {
        &self.pos
    }

    /// Runs that are contiguous in memory joined: `(offset, len)` pairs.
    pub fn merged(self) -> Merged<'a> {
        Merged {
            runs: self,
            pending: None,
        }
    }

    /// Move to the next outer position; false when there is none.
    fn advance_outer(&mut self) -> bool {
        for d in (0..self.pos.len()).rev() {
            let r = &self.ranges[d];
            let (_, hi) = r[self.range_idx[d]];
            if self.pos[d] + 1 < hi {
                self.pos[d] += 1;
            } else if self.range_idx[d] + 1 < r.len() {
                self.range_idx[d] += 1;
                self.pos[d] = r[self.range_idx[d]].0;
            } else {
                self.range_idx[d] = 0;
                self.pos[d] = r[0].0;
                continue;
            }
            self.base = self.pos.iter().zip(&self.strides).map(|(p, s)| p * s).sum();
            return true;
        }
        false
    }
}

impl Iterator for Runs<'_> {
    type Item = Run;

    fn next(&mut self) -> Option<Run> {
        if self.done {
            return None;
        }
        let last = &self.ranges[self.ranges.len() - 1];
        if self.inner == last.len() {
            if !self.advance_outer() {
                self.done = true;
                return None;
            }
            self.inner = 0;
        }
        let (a, b) = last[self.inner];
        self.inner += 1;
        Some(Run {
            offset: self.base + a,
            len: b - a,
            first: a,
        })
    }
}

/// [`Runs`] with memory-contiguous runs joined, as `(offset, len)`.
#[derive(Debug, Clone)]
pub struct Merged<'a> {
    runs: Runs<'a>,
    pending: Option<(u64, u64)>,
}

impl Iterator for Merged<'_> {
    type Item = (u64, u64);

    fn next(&mut self) -> Option<(u64, u64)> {
        loop {
            match (self.runs.next(), self.pending) {
                (Some(r), Some((o, l))) if o + l == r.offset => self.pending = Some((o, l + r.len)),
                (Some(r), p) => {
                    self.pending = Some((r.offset, r.len));
                    if p.is_some() {
                        return p;
                    }
                }
                (None, p) => {
                    self.pending = None;
                    return p;
                }
            }
        }
    }
}

/// The ranges selecting the box `start .. start + extent`, one per axis.
pub fn box_ranges(start: &[u64], extent: &[u64]) -> Vec<Vec<(u64, u64)>> {
    start
        .iter()
        .zip(extent)
        .map(|(&s, &e)| if e == 0 { vec![] } else { vec![(s, s + e)] })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn odometer_visits_every_index_once() {
        let mut idx = vec![0usize; 3];
        let mut seen = vec![idx.clone()];
        while odometer_next(&mut idx, &[2, 1, 3]) {
            seen.push(idx.clone());
        }
        assert_eq!(seen.len(), 6);
        assert_eq!(seen[1], vec![0, 0, 1]);
        assert_eq!(seen[3], vec![1, 0, 0]);
        assert!(!odometer_next(&mut [], &[]));
    }

    #[test]
    fn runs_cover_the_box_in_row_major_order() {
        let shape = [3u64, 4, 5];
        let ranges = box_ranges(&[1, 2, 1], &[2, 2, 3]);
        let seen: Vec<Run> = Runs::new(&shape, &ranges).collect();
        // Brute force: enumerate cells of the box.
        let mut cells = Vec::new();
        for a in 1..3 {
            for b in 2..4 {
                for c in 1..4 {
                    cells.push(a * 20 + b * 5 + c);
                }
            }
        }
        let flat: Vec<u64> = seen.iter().flat_map(|r| r.offset..r.offset + r.len).collect();
        assert_eq!(flat, cells);
        assert!(seen.iter().all(|r| r.len == 3 && r.first == 1));
        assert_eq!(Runs::new(&shape, &box_ranges(&[0, 0, 0], &[1, 0, 1])).count(), 0);
    }

    #[test]
    fn runs_of_a_selection_agree_with_brute_force() {
        let extent = [3u64, 4, 5];
        let ranges = vec![vec![(0, 1), (2, 3)], vec![(0, 4)], vec![(1, 2), (3, 5)]];
        let mut offs = Vec::new();
        let mut outer = Vec::new();
        let mut runs = Runs::new(&extent, &ranges);
        while let Some(r) = runs.next() {
            offs.extend(r.offset..r.offset + r.len);
            outer.push((runs.outer().to_vec(), r.first));
        }
        let mut want = Vec::new();
        let mut want_outer = Vec::new();
        for i in [0u64, 2] {
            for j in 0..4u64 {
                for (k0, k1) in [(1u64, 2u64), (3, 5)] {
                    want.extend((k0..k1).map(|k| i * 20 + j * 5 + k));
                    want_outer.push((vec![i, j], k0));
                }
            }
        }
        assert_eq!((offs, outer), (want, want_outer));
        // Merged runs: a full-width inner selection is one run per contiguous block.
        let full = vec![vec![(0, 2)], vec![(0, 3)]];
        assert_eq!(Runs::new(&[2, 3], &full).merged().collect::<Vec<_>>(), vec![(0, 6)]);
        let merged: Vec<(u64, u64)> = Runs::new(&extent, &ranges).merged().collect();
        let flat: Vec<u64> = merged.iter().flat_map(|&(o, l)| o..o + l).collect();
        assert_eq!(flat.len(), 2 * 4 * 3);
        assert!(merged.windows(2).all(|w| w[0].0 + w[0].1 < w[1].0));
        // Rank 1, and a selection with an empty axis.
        assert_eq!(
            Runs::new(&[10], &[vec![(2, 4), (6, 7)]]).merged().collect::<Vec<_>>(),
            vec![(2, 2), (6, 1)]
        );
        assert_eq!(Runs::new(&[2, 2], &[vec![(0, 2)], vec![]]).count(), 0);
    }
}
