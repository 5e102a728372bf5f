//! [`AxisSelection`]: the positions selected along one axis, as sorted disjoint ranges.

/// Selected positions `0..extent` of one axis, as sorted, disjoint, non-empty half-open
/// ranges.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AxisSelection {
    extent: u64,
    ranges: Vec<(u64, u64)>,
}

impl AxisSelection {
    /// Every position.
    pub fn all(extent: u64) -> Self {
        let ranges = if extent > 0 { vec![(0, extent)] } else { vec![] };
        AxisSelection { extent, ranges }
    }

    /// No position.
    pub fn none(extent: u64) -> Self {
        AxisSelection { extent, ranges: vec![] }
    }

    /// From ranges that are sorted and disjoint (adjacent ones are merged, empty dropped,
    /// everything clipped to the extent).
    pub fn from_sorted_ranges(extent: u64, ranges: impl IntoIterator<Item = (u64, u64)>) -> Self {
        let mut out: Vec<(u64, u64)> = Vec::new();
        for (lo, hi) in ranges {
            let hi = hi.min(extent);
            if lo >= hi {
                continue;
            }
            match out.last_mut() {
                Some(last) if last.1 >= lo => last.1 = last.1.max(hi),
                _ => out.push((lo, hi)),
            }
        }
        AxisSelection { extent, ranges: out }
    }

    /// From ranges received from elsewhere (e.g. a serialized plan): they must be
    /// non-empty, sorted, disjoint and within `extent`, or the error says which is not.
    pub fn try_from_ranges(extent: u64, ranges: &[(u64, u64)]) -> Result<Self, String> {
        let mut end = 0;
        for (i, &(lo, hi)) in ranges.iter().enumerate() {
            if lo >= hi || hi > extent || (i > 0 && lo <= end) {
                return Err(format!(
                    "range {i} ({lo}..{hi}) is empty, out of order or beyond the extent {extent}"
                ));
            }
            end = hi;
        }
        Ok(AxisSelection {
            extent,
            ranges: ranges.to_vec(),
        })
    }

    /// Axis extent.
    pub fn extent(&self) -> u64 {
        self.extent
    }

    /// The ranges.
    pub fn ranges(&self) -> &[(u64, u64)] {
        &self.ranges
    }

    /// Number of selected positions.
    pub fn count(&self) -> u64 {
        self.ranges.iter().map(|(a, b)| b - a).sum()
    }

    /// True when every position is selected.
    pub fn is_all(&self) -> bool {
        self.count() == self.extent
    }

    /// Smallest and largest selected position.
    pub fn bounds(&self) -> Option<(u64, u64)> {
        Some((self.ranges.first()?.0, self.ranges.last()?.1 - 1))
    }

    /// The selected ranges clipped to `lo..hi`, found by binary search (ranges are sorted
    /// and disjoint), so that one stretch costs no walk of the whole selection.
    pub fn ranges_within(&self, lo: u64, hi: u64) -> impl Iterator<Item = (u64, u64)> + '_ {
        let from = self.ranges.partition_point(|&(_, b)| b <= lo);
        self.ranges[from..]
            .iter()
            .take_while(move |&&(a, _)| a < hi)
            .map(move |&(a, b)| (a.max(lo), b.min(hi)))
            .filter(|(a, b)| a < b)
    }

    /// Positions selected by both.
    pub fn intersect(&self, other: &AxisSelection) -> AxisSelection {
        let (mut i, mut j) = (0, 0);
        let mut out = Vec::new();
        while i < self.ranges.len() && j < other.ranges.len() {
            let (a, b) = (self.ranges[i], other.ranges[j]);
            let lo = a.0.max(b.0);
            let hi = a.1.min(b.1);
            if lo < hi {
                out.push((lo, hi));
            }
            if a.1 < b.1 { i += 1 } else { j += 1 }
        }
        AxisSelection::from_sorted_ranges(self.extent, out)
    }

    /// Positions selected by either.
    pub fn union(&self, other: &AxisSelection) -> AxisSelection {
        let mut all: Vec<(u64, u64)> = self.ranges.iter().chain(&other.ranges).copied().collect();
        all.sort_unstable();
        AxisSelection::from_sorted_ranges(self.extent, all)
    }

    /// Positions not selected.
    pub fn complement(&self) -> AxisSelection {
        let mut out = Vec::with_capacity(self.ranges.len() + 1);
        let mut at = 0;
        for &(lo, hi) in &self.ranges {
            out.push((at, lo));
            at = hi;
        }
        out.push((at, self.extent));
        AxisSelection::from_sorted_ranges(self.extent, out)
    }

    /// Every selected position in order.
    pub fn positions(&self) -> impl Iterator<Item = u64> + '_ {
        self.ranges.iter().flat_map(|&(a, b)| a..b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_from_elsewhere_are_checked() {
        let ok = AxisSelection::try_from_ranges(10, &[(0, 2), (3, 10)]).unwrap();
        assert_eq!(ok, AxisSelection::from_sorted_ranges(10, [(0, 2), (3, 10)]));
        assert!(AxisSelection::try_from_ranges(10, &[]).unwrap().count() == 0);
        for bad in [
            vec![(2, 2)],
            vec![(3, 1)],
            vec![(0, 11)],
            vec![(4, 6), (1, 2)],
            vec![(0, 2), (2, 4)],
        ] {
            assert!(AxisSelection::try_from_ranges(10, &bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn intersect_matches_brute_force() {
        let a = AxisSelection::from_sorted_ranges(20, [(0, 3), (5, 9), (12, 20)]);
        let b = AxisSelection::from_sorted_ranges(20, [(2, 6), (8, 13), (19, 25)]);
        let got: Vec<u64> = a.intersect(&b).positions().collect();
        let want: Vec<u64> = (0..20)
            .filter(|p| a.positions().any(|x| x == *p) && b.positions().any(|x| x == *p))
            .collect();
        assert_eq!(got, want);
        assert_eq!(a.count(), 3 + 4 + 8);
        assert_eq!(
            AxisSelection::from_sorted_ranges(10, [(0, 2), (2, 4)]).ranges(),
            &[(0, 4)]
        );
        assert!(AxisSelection::all(0).ranges().is_empty());
        let union: Vec<u64> = a.union(&b).positions().collect();
        let want: Vec<u64> = (0..20)
            .filter(|p| a.positions().any(|x| x == *p) || b.positions().any(|x| x == *p))
            .collect();
        assert_eq!(union, want);
        let not_a: Vec<u64> = a.complement().positions().collect();
        assert_eq!(
            not_a,
            (0..20).filter(|p| !a.positions().any(|x| x == *p)).collect::<Vec<_>>()
        );
        assert_eq!(AxisSelection::none(7).complement(), AxisSelection::all(7));
        assert_eq!(AxisSelection::all(7).complement(), AxisSelection::none(7));
        assert_eq!(a.bounds(), Some((0, 19)));
        // Ranges within a stretch: the intersection's.
        for (lo, hi) in [(0, 20), (1, 6), (3, 5), (9, 12), (8, 13), (19, 20), (20, 20), (4, 2)] {
            let got: Vec<(u64, u64)> = a.ranges_within(lo, hi).collect();
            let stretch = AxisSelection::from_sorted_ranges(20, [(lo, hi.max(lo))]);
            assert_eq!(got, a.intersect(&stretch).ranges(), "{lo}..{hi}");
        }
    }
}
