//! Row-major box geometry: walking the contiguous innermost runs of a sub-box.

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

/// Call `f(outer_offset, inner_offset, run_len)` for every contiguous run along the last
/// axis of the box `start .. start + extent` of a row-major array of `outer` shape.
/// `outer_offset` is the element offset of the run in the array; `inner_offset` its offset
/// in the box packed row-major. Runs come in row-major order. Empty boxes make no calls.
pub fn for_each_run(outer: &[u64], start: &[u64], extent: &[u64], mut f: impl FnMut(u64, u64, u64)) {
    let n = outer.len();
    if n == 0 || extent.contains(&0) {
        return;
    }
    let st = strides(outer);
    let run = extent[n - 1];
    let outer_extents: Vec<usize> = extent[..n - 1].iter().map(|&e| e as usize).collect();
    let mut idx = vec![0usize; n - 1];
    let mut inner = 0u64;
    loop {
        let mut off = start[n - 1];
        for d in 0..n - 1 {
            off += (start[d] + idx[d] as u64) * st[d];
        }
        f(off, inner, run);
        inner += run;
        if !odometer_next(&mut idx, &outer_extents) {
            return;
        }
    }
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
        let mut seen = Vec::new();
        for_each_run(&shape, &[1, 2, 1], &[2, 2, 3], |o, i, n| seen.push((o, i, n)));
        // Brute force: enumerate cells of the box.
        let mut cells = Vec::new();
        for a in 1..3 {
            for b in 2..4 {
                for c in 1..4 {
                    cells.push(a * 20 + b * 5 + c);
                }
            }
        }
        let flat: Vec<u64> = seen.iter().flat_map(|&(o, _, n)| o..o + n).collect();
        assert_eq!(flat, cells);
        assert_eq!(seen.iter().map(|s| s.1).collect::<Vec<_>>(), vec![0, 3, 6, 9]);
        let mut none = 0;
        for_each_run(&shape, &[0, 0, 0], &[1, 0, 1], |_, _, _| none += 1);
        assert_eq!(none, 0);
    }
}
