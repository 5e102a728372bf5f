//! Turning payload spans into requests: coalescing, splitting and windows.
//!
//! Pure functions over byte ranges, so the policy is tested without a server.

use std::ops::Range;

/// How payload reads become requests (session options `tet.coalesce_gap_bytes`,
/// `tet.max_request_bytes`, `tet.fetch_concurrency`, `tet.fetch_window_bytes`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FetchOptions {
    /// Spans closer than this are read by one request (the gap is read and dropped).
    pub coalesce_gap: u64,
    /// Coalesced requests are split so none is larger than this (a single larger span
    /// stays one request).
    pub max_request: u64,
    /// Requests in flight at once, per partition.
    pub concurrency: usize,
    /// Stored bytes of the chunks fetched ahead of the ones being decoded, per
    /// partition: memory use is bounded by about two windows.
    pub window: u64,
}

impl Default for FetchOptions {
    fn default() -> Self {
        FetchOptions {
            coalesce_gap: 1 << 20,
            max_request: 8 << 20,
            concurrency: 8,
            window: 32 << 20,
        }
    }
}

/// The requests that read `spans`, and for each span the request holding it.
///
/// Spans are merged (in offset order) while the gap to the next one is at most
/// `coalesce_gap` and the merged request stays within `max_request`. Empty spans get a
/// request of their own only if nothing else covers them; they cost no bytes.
pub fn coalesce(spans: &[Range<u64>], coalesce_gap: u64, max_request: u64) -> (Vec<Range<u64>>, Vec<usize>) {
    let mut order: Vec<usize> = (0..spans.len()).collect();
    order.sort_by_key(|&i| (spans[i].start, spans[i].end));
    let mut requests: Vec<Range<u64>> = Vec::new();
    let mut owner = vec![0usize; spans.len()];
    for i in order {
        let s = &spans[i];
        if let Some(last) = requests.last_mut() {
            let merged_end = last.end.max(s.end);
            let close = s.start <= last.end.saturating_add(coalesce_gap);
            if close && merged_end - last.start <= max_request.max(1) || s.end <= last.end {
                last.end = merged_end;
                owner[i] = requests.len() - 1;
                continue;
            }
        }
        requests.push(s.clone());
        owner[i] = requests.len() - 1;
    }
    (requests, owner)
}

/// Split `sizes` (in order) into consecutive groups of total at most `window` bytes
/// (each group holds at least one item). Returns the group boundaries as index ranges.
pub fn windows(sizes: &[u64], window: u64) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut total = 0u64;
    for (i, &s) in sizes.iter().enumerate() {
        if i > start && total.saturating_add(s) > window {
            out.push(start..i);
            start = i;
            total = 0;
        }
        total = total.saturating_add(s);
    }
    if start < sizes.len() {
        out.push(start..sizes.len());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Brute force: every span lies inside its request, each request is exactly the hull
    /// of its spans, and a request holding several spans respects `max`.
    fn check(spans: &[Range<u64>], gap: u64, max: u64) {
        let (req, owner) = coalesce(spans, gap, max);
        for (i, s) in spans.iter().enumerate() {
            let r = &req[owner[i]];
            assert!(r.start <= s.start && s.end <= r.end, "{s:?} not in {r:?}");
        }
        for (k, r) in req.iter().enumerate() {
            let members: Vec<usize> = (0..spans.len()).filter(|&i| owner[i] == k).collect();
            assert!(!members.is_empty(), "request {r:?} reads for nobody");
            let lo = members.iter().map(|&i| spans[i].start).min();
            let hi = members.iter().map(|&i| spans[i].end).max();
            assert_eq!(
                (lo, hi),
                (Some(r.start), Some(r.end)),
                "request is exactly its spans' hull"
            );
            let contained = |i: usize| {
                members
                    .iter()
                    .any(|&j| j != i && spans[j].start <= spans[i].start && spans[i].end <= spans[j].end)
            };
            if members.len() > 1 && !members.iter().all(|&i| contained(i) || spans[i] == *r) {
                assert!(
                    r.end - r.start <= max,
                    "{r:?} holds {} spans but exceeds {max}",
                    members.len()
                );
            }
        }
        // Sorted by start; a neighbour within the gap was only left apart for size.
        for w in req.windows(2) {
            assert!(w[0].start <= w[1].start);
            if w[1].start <= w[0].end.saturating_add(gap) {
                assert!(w[1].end.max(w[0].end) - w[0].start > max, "{w:?} should have merged");
            }
        }
    }

    #[test]
    fn coalesces_close_spans_and_splits_large_requests() {
        let spans = vec![0..10, 12..20, 100..110, 111..200, 5000..6000];
        let (req, owner) = coalesce(&spans, 5, 1000);
        assert_eq!(req, vec![0..20, 100..200, 5000..6000]);
        assert_eq!(owner, vec![0, 0, 1, 1, 2]);
        // Gap 0 keeps only touching spans together.
        let (req, _) = coalesce(&[0..10, 10..20, 21..30], 0, 1000);
        assert_eq!(req, vec![0..20, 21..30]);
        // max_request splits a run of adjacent spans.
        let (req, _) = coalesce(&[0..10, 10..20, 20..30, 30..40], 1 << 20, 20);
        assert_eq!(req, vec![0..20, 20..40]);
        // Out-of-order input maps back to the right requests.
        let (req, owner) = coalesce(&[100..110, 0..10], 0, 1000);
        assert_eq!(req, vec![0..10, 100..110]);
        assert_eq!(owner, vec![1, 0]);
    }

    #[test]
    fn coalesce_invariants_on_random_spans() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..500 {
            let n = (next() % 20) as usize;
            let mut spans = Vec::new();
            for _ in 0..n {
                let start = next() % 10_000;
                spans.push(start..start + next() % 500);
            }
            let gap = next() % 300;
            let max = 1 + next() % 3000;
            check(&spans, gap, max);
        }
    }

    #[test]
    fn windows_bound_bytes_but_keep_big_items() {
        assert_eq!(windows(&[10, 10, 10, 50, 5], 25), vec![0..2, 2..3, 3..4, 4..5]);
        assert_eq!(windows(&[], 25), Vec::<Range<usize>>::new());
        assert_eq!(windows(&[1, 1, 1], 100), vec![0..3]);
    }
}
