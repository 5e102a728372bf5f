use super::accumulators::*;
use super::cell_block::*;
use super::elem::*;
use super::elementwise::*;
use super::keep::*;
use super::lanes::*;
use super::moments::*;
use super::rows::*;

use super::runs::*;
use super::sum_and_count::*;
use super::weighted::*;
use crate::plan::{Affine, KeyRange, order_key};

fn keep<T>(missing: Missing<T>) -> Keep<T> {
    Keep { missing, range: None }
}

#[test]
fn co_moments_of_blocks_merge_to_the_definition() {
    // Lengths around the four lanes, merged in uneven blocks, against the two-pass
    // definition in exact-enough f64 (values of moderate size).
    for n in [1usize, 3, 4, 5, 17, 512, 1000] {
        let x: Vec<f32> = (0..n).map(|i| ((i * 7919) % 97) as f32 * 0.5 - 20.0).collect();
        let y: Vec<f64> = (0..n)
            .map(|i| ((i * 104729) % 89) as f64 * 0.25 + x[i] as f64)
            .collect();
        let (mx, my) = (
            x.iter().map(|&v| v as f64).sum::<f64>() / n as f64,
            y.iter().sum::<f64>() / n as f64,
        );
        let dev = |a: &dyn Fn(usize) -> f64| (0..n).map(a).sum::<f64>();
        let want = [
            dev(&|i| (x[i] as f64 - mx).powi(2)),
            dev(&|i| (y[i] - my).powi(2)),
            dev(&|i| (x[i] as f64 - mx) * (y[i] - my)),
        ];
        let mut acc = CoMoment::default();
        let mut welford = CoMoment::default();
        let mut at = 0;
        for (k, len) in [1usize, 5, 300, 8].iter().cycle().enumerate() {
            if at >= n {
                break;
            }
            let end = (at + len + k % 3).min(n);
            acc.merge(CoMoment::of(&x[at..end], &y[at..end]));
            at = end;
        }
        (0..n).for_each(|i| welford.add(x[i] as f64, y[i]));
        for m in [acc, welford] {
            assert_eq!(m.n, n as u64);
            assert!((m.mean_x - mx).abs() <= 1e-12 * mx.abs().max(1.0), "{n}: {m:?}");
            assert!((m.mean_y - my).abs() <= 1e-12 * my.abs().max(1.0), "{n}: {m:?}");
            for (got, want) in [m.m2_x, m.m2_y, m.c2].into_iter().zip(want) {
                assert!((got - want).abs() <= 1e-9 * want.abs().max(1.0), "{n}: {got} vs {want}");
            }
        }
    }
}

fn brute(vals: &[f64]) -> (u64, f64, f64, f64, f64) {
    let n = vals.len() as u64;
    let s: f64 = vals.iter().sum();
    let mean = s / n as f64;
    let m2: f64 = vals.iter().map(|x| (x - mean) * (x - mean)).sum();
    let mn = vals.iter().cloned().fold(f64::INFINITY, f64::min);
    let mx = vals.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    (n, s, m2, mn, mx)
}

#[test]
fn runs_and_elementwise_agree_with_brute_force() {
    let needs = Needs {
        fsum: true,
        isum: true,
        min_max: true,
        moments: true,
    };
    let vals: Vec<f32> = (0..53).map(|i| ((i * 37) % 19) as f32 - 7.5).collect();
    let fill = Missing {
        values: vec![4.5f32],
        nan: false,
    };
    let kept: Vec<f64> = vals.iter().filter(|v| **v != 4.5).map(|v| *v as f64).collect();
    let (n, s, m2, mn, mx) = brute(&kept);
    // Split into uneven runs into one group.
    for (fsum, isum, min_max, moments, float) in
        (0..32).map(|b| (b & 1 != 0, b & 2 != 0, b & 4 != 0, b & 8 != 0, b & 16 != 0))
    {
        let needs = Needs {
            fsum,
            isum,
            min_max,
            moments,
        };
        // With the deferred counts allocated.
        let mut all = Accumulators::new(37, needs, float);
        all.count_later(0, 37);
        assert_eq!(
            Accumulators::bytes(37, needs, float),
            all.held_bytes(),
            "{needs:?}, float {float}"
        );
    }
    let mut acc = Accumulators::new(1, needs, true);
    for r in [&vals[..5], &vals[5..30], &vals[30..]] {
        fold_run(&mut acc, 0, r, &keep(fill.clone()));
    }
    assert_eq!(
        (acc.cells[0], acc.n[0], acc.fsum[0], acc.fmin[0], acc.fmax[0]),
        (53, n, s, mn, mx)
    );
    assert!((acc.m2[0] - m2).abs() < 1e-9 * m2.abs().max(1.0));
    // Elementwise into one group per element, then merged into another accumulator.
    let mut e = Accumulators::new(53, needs, true);
    fold_elementwise(&mut e, &vals, &keep(fill.clone()), |i| i);
    assert_eq!(e.cells.iter().sum::<u64>(), 53);
    assert_eq!(e.n.iter().sum::<u64>(), n);
    let mut a = Accumulators::new(53, needs, true);
    a.merge(&e);
    a.merge(&e);
    assert_eq!(a.fsum.iter().sum::<f64>(), 2.0 * s);
    // Integers: wrapping sums as DataFusion.
    let ints = [i64::MAX, 1, -3];
    let mut acc = Accumulators::new(1, needs, false);
    fold_run(&mut acc, 0, &ints, &Keep::default());
    assert_eq!(acc.isum[0], i64::MAX.wrapping_add(1).wrapping_add(-3));
    assert_eq!((acc.imin[0], acc.imax[0]), (-3, i64::MAX as i128));
    // NaN is seen.
    let mut acc = Accumulators::new(1, needs, true);
    fold_run(&mut acc, 0, &[1.0f64, f64::NAN, 3.0], &Keep::default());
    assert!(acc.nan[0] == NAN_POSITIVE && acc.fsum[0].is_nan());
    assert_eq!((acc.fmin[0], acc.fmax[0]), (1.0, 3.0));
    // Only NaN and +inf: the minimum is +inf; only NaN: no non-NaN bound at all.
    let mut acc = Accumulators::new(2, needs, true);
    fold_run(&mut acc, 0, &[f64::NAN, f64::INFINITY], &Keep::default());
    fold_run(&mut acc, 1, &[f64::NAN, f64::NAN], &Keep::default());
    assert_eq!((acc.fmin[0], acc.fmax[0]), (f64::INFINITY, f64::INFINITY));
    assert!(acc.fmin[1].is_nan() && acc.nan[1] != 0);
    let mut e = Accumulators::new(2, needs, true);
    fold_elementwise(&mut e, &[f64::INFINITY, f64::NAN], &Keep::default(), |i| i);
    assert_eq!(e.fmin[0], f64::INFINITY);
    assert!(e.fmin[1].is_nan() && e.nan[1] != 0);
}

#[test]
fn missing_rules_match_on_every_kernel_path() {
    let needs = Needs {
        fsum: true,
        isum: false,
        min_max: true,
        moments: true,
    };
    // 19 elements: the 8-lane body and the remainder both see every case.
    let vals: Vec<f64> = (0..19)
        .map(|i| match i % 4 {
            0 => f64::NAN,
            1 => -0.0,
            _ => i as f64,
        })
        .collect();
    let rules = [
        (
            Missing {
                values: vec![],
                nan: true,
            },
            "nan",
        ),
        (
            Missing {
                values: vec![0.0],
                nan: false,
            },
            "zero",
        ),
        (
            Missing {
                values: vec![0.0, 6.0],
                nan: true,
            },
            "several",
        ),
    ];
    for (rule, name) in &rules {
        let kept: Vec<f64> = vals.iter().copied().filter(|&x| !rule.test(x)).collect();
        let mut run = Accumulators::new(1, needs, true);
        fold_run(&mut run, 0, &vals, &keep(rule.clone()));
        let mut each = Accumulators::new(1, needs, true);
        fold_elementwise(&mut each, &vals, &keep(rule.clone()), |_| 0);
        for acc in [&run, &each] {
            assert_eq!(acc.n[0], kept.len() as u64, "{name}");
            assert_eq!(acc.cells[0], 19, "{name}");
            let sum: f64 = kept.iter().sum();
            assert!(
                acc.fsum[0] == sum || (sum.is_nan() && acc.fsum[0].is_nan()),
                "{name}: {} vs {sum}",
                acc.fsum[0]
            );
            assert_eq!(acc.nan[0] != 0, kept.iter().any(|x| x.is_nan()), "{name}");
        }
    }
    // Zero matches negative zero; NaN never equals a number.
    assert!(rules[1].0.test(-0.0) && !rules[1].0.test(f64::NAN));
}

/// Every set of statistics a fold of elements of type `T` can be asked for (an integer
/// sum only of integers).
fn every_needs<T: Elem>() -> impl Iterator<Item = Needs> {
    (0..16u8).map(|b| Needs {
        fsum: b & 1 != 0,
        isum: b & 2 != 0 && !T::FLOAT,
        min_max: b & 4 != 0,
        moments: b & 8 != 0,
    })
}

/// Folding a run into consecutive groups gives the element-wise fold's accumulators
/// bit for bit: every dtype class, missing rule, range and set of statistics, runs
/// landing on groups already holding values.
#[test]
fn consecutive_groups_fold_as_elementwise() {
    fn check<T: Elem + std::fmt::Debug>(vals: &[T], fill: T) {
        let keeps = [
            Keep::default(),
            keep(Missing {
                values: vec![],
                nan: T::FLOAT,
            }),
            keep(Missing {
                values: vec![fill],
                nan: false,
            }),
            keep(Missing {
                values: vec![fill, vals[3]],
                nan: T::FLOAT,
            }),
            Keep {
                missing: Missing {
                    values: vec![fill],
                    nan: false,
                },
                range: Some(KeyRange {
                    lo: order_key(-3.0),
                    hi: order_key(40.0),
                }),
            },
        ];
        for k in &keeps {
            for needs in every_needs::<T>() {
                let n = vals.len() + 7;
                let (mut want, mut got) = (
                    Accumulators::new(n, needs, T::FLOAT),
                    Accumulators::new(n, needs, T::FLOAT),
                );
                for (g, w) in [(0, 0..vals.len()), (7, 2..vals.len() - 5), (3, 10..11), (1, 4..4)] {
                    fold_elementwise(&mut want, &vals[w.clone()], k, |i| g + i);
                    fold_consecutive(&mut got, g, &vals[w], k);
                }
                // Merged twice before settling: the deferred counts merge too.
                let mut twice = Accumulators::new(n, needs, T::FLOAT);
                twice.merge(&got);
                twice.merge(&got);
                twice.settle();
                got.settle();
                let double = |v: &[u64]| v.iter().map(|c| 2 * c).collect::<Vec<_>>();
                assert_eq!((twice.cells, twice.n), (double(&want.cells), double(&want.n)));
                assert_eq!(format!("{got:?}"), format!("{want:?}"), "{needs:?} {k:?}");
            }
        }
    }
    let mut seed = 77;
    let f32s = f32s_with_nans(&mut seed, 203);
    check(&f32s, f32s[6]);
    let f64s: Vec<f64> = f32s.iter().map(|&x| x as f64 * 1.25).collect();
    check(&f64s, f64s[9]);
    let i16s: Vec<i16> = (0..203).map(|_| random(&mut seed) as i16).collect();
    check(&i16s, i16s[2]);
    let u64s: Vec<u64> = (0..203).map(|_| random(&mut seed)).collect();
    check(&u64s, u64s[4]);
}

/// A cell block folded over a stack of slices gives each cell the statistics of its
/// elements across the slices: the element-wise fold's counts, sums and extremes bit for
/// bit, its variance state (two passes here, Welford there) within rounding; and merged
/// into groups by a map, what folding straight into those groups gives.
#[test]
fn a_cell_block_folds_each_cell_over_its_slices() {
    fn check<T: Elem + std::fmt::Debug>(vals: &[T], fill: T) {
        let keeps = [
            Keep::default(),
            keep(Missing {
                values: vec![fill],
                nan: T::FLOAT,
            }),
            Keep {
                missing: Missing {
                    values: vec![fill],
                    nan: false,
                },
                range: Some(KeyRange {
                    lo: order_key(-3.0),
                    hi: order_key(40.0),
                }),
            },
        ];
        let slices: Vec<&[T]> = vals.chunks_exact(41).take(5).collect();
        let pieces = [
            Piece {
                slot: 0,
                offset: 3,
                len: 10,
            },
            Piece {
                slot: 10,
                offset: 20,
                len: 15,
            },
        ];
        // Slot `i` merges into group `to(i)`: two slots share group 2.
        let to = |i: usize| if i == 7 { 2 } else { 30 - i };
        for k in &keeps {
            for needs in every_needs::<T>() {
                let mut got = Accumulators::new(3, cell_block_needs(needs), T::FLOAT);
                // Slots reused: a fold before leaves nothing behind.
                fold_cell_block(&mut got, (needs, T::FLOAT, 10), &slices[1..], &pieces[..1], k);
                fold_cell_block(&mut got, (needs, T::FLOAT, 25), &slices, &pieces, k);
                let mut want = Accumulators::new(25, needs, T::FLOAT);
                let mut straight = Accumulators::new(31, needs, T::FLOAT);
                for s in &slices {
                    for p in &pieces {
                        let run = &s[p.offset..p.offset + p.len];
                        fold_elementwise(&mut want, run, k, |i| p.slot + i);
                        fold_elementwise(&mut straight, run, k, |i| to(p.slot + i));
                    }
                }
                let what = format!("{needs:?} {k:?}");
                assert_eq!(
                    (&got.cells, &got.n, &got.isum),
                    (&want.cells, &want.n, &want.isum),
                    "{what}"
                );
                assert_eq!(
                    format!("{:?}", (&got.fmin, &got.fmax, &got.nan)),
                    format!("{:?}", (&want.fmin, &want.fmax, &want.nan)),
                    "{what}"
                );
                assert_eq!((&got.imin, &got.imax), (&want.imin, &want.imax), "{what}");
                if needs.fsum {
                    assert_eq!(format!("{:?}", got.fsum), format!("{:?}", want.fsum), "{what}");
                }
                let near = |a: &[f64], b: &[f64]| {
                    a.len() == b.len()
                        && a.iter().zip(b).all(|(x, y)| {
                            (x.is_nan() && y.is_nan()) || (x - y).abs() <= 1e-9 * x.abs().max(y.abs()).max(1.0)
                        })
                };
                assert!(near(&got.mean, &want.mean) && near(&got.m2, &want.m2), "{what}");
                let mut merged = Accumulators::new(31, needs, T::FLOAT);
                merged.merge_mapped(&got, to);
                assert_eq!((&merged.cells, &merged.n), (&straight.cells, &straight.n), "{what}");
                assert!(
                    near(&merged.mean, &straight.mean) && near(&merged.m2, &straight.m2),
                    "{what}"
                );
                // Into groups in a row, over groups holding values or none: what the merge
                // by a map gives, bit for bit but the sign of a mean's zero.
                let (mut row, mut mapped) = (straight.clone(), straight.clone());
                row.merge_consecutive(&got, 3);
                mapped.merge_mapped(&got, |i| i + 3);
                let bits = |a: &Accumulators| {
                    let mean: Vec<f64> = a.mean.iter().map(|x| x + 0.0).collect();
                    format!(
                        "{:?}",
                        (
                            &a.cells, &a.n, &a.fsum, &a.isum, &a.fmin, &a.fmax, &a.nan, &a.imin, &a.imax, mean, &a.m2
                        )
                    )
                };
                assert_eq!(bits(&row), bits(&mapped), "{what}");
            }
        }
    }
    let mut seed = 59;
    let f32s = f32s_with_nans(&mut seed, 205);
    check(&f32s, f32s[6]);
    let f64s: Vec<f64> = f32s.iter().map(|&x| x as f64 * 1.25).collect();
    check(&f64s, f64s[9]);
    let i16s: Vec<i16> = (0..205).map(|_| random(&mut seed) as i16).collect();
    check(&i16s, i16s[2]);
}

#[test]
fn rows_fold_as_runs_into_their_groups() {
    fn check<T: Elem + std::fmt::Debug>(vals: &[T], fill: T) {
        let keeps = [
            Keep::default(),
            keep(Missing {
                values: vec![fill],
                nan: T::FLOAT,
            }),
            Keep {
                missing: Missing::default(),
                range: Some(KeyRange {
                    lo: order_key(-3.0),
                    hi: order_key(40.0),
                }),
            },
        ];
        // Rows of 23 (a remainder past the lanes), 8, 16 and 48 (the hand-written loop
        // of f32 rows), groups repeated and skipped.
        let ids = [2u32, 0, 2, 5, 1, 1, 4, 0];
        let (base, stride) = (3, 2);
        for k in &keeps {
            for needs in every_needs::<T>() {
                for row_len in [23, 8, 16, 48] {
                    // The rows start past the tile's first cell.
                    let rows = Rows {
                        tile_offset: 3,
                        row_len,
                        base,
                        stride,
                        ids: &ids,
                    };
                    let n = base + 5 * stride + 1;
                    let new = || Accumulators::new(n, needs, T::FLOAT);
                    let (mut want, mut got) = (new(), new());
                    let row = |i: usize| &vals[3 + i * row_len..3 + (i + 1) * row_len];
                    for (i, &id) in ids.iter().enumerate() {
                        fold_run(&mut want, base + id as usize * stride, row(i), k);
                    }
                    fold_rows(&mut got, vals, &rows, k);
                    fold_rows(&mut got, vals, &Rows { row_len: 0, ..rows }, k);
                    got.settle();
                    want.settle();
                    assert_eq!(format!("{got:?}"), format!("{want:?}"), "{needs:?} {k:?} {row_len}");
                    // Every cell in its row's group, and no other group touched.
                    let mut cells = vec![0u64; n];
                    ids.iter()
                        .for_each(|&id| cells[base + id as usize * stride] += row_len as u64);
                    if k.range.is_none() {
                        assert_eq!(got.cells, cells);
                    }
                }
            }
        }
    }
    let mut seed = 5;
    let f32s = f32s_with_nans(&mut seed, 400);
    check(&f32s, f32s[6]);
    let i16s: Vec<i16> = (0..400).map(|_| random(&mut seed) as i16).collect();
    check(&i16s, i16s[2]);
}

/// `T::bounds` keeps exactly the values the f64 comparison keeps.
fn bounds_agree<T: Elem + std::fmt::Debug>(xs: &[T], edges: &[f64]) {
    for &lo in edges {
        for &hi in edges {
            let Some((l, h)) = T::bounds(lo, hi) else { continue };
            for &x in xs.iter().filter(|x| !x.is_nan()) {
                let want = lo <= x.f() && x.f() <= hi;
                assert_eq!(l <= x && x <= h, want, "{x:?} in [{lo}, {hi}] as [{l:?}, {h:?}]");
            }
        }
    }
}

#[test]
fn native_bounds_agree_with_f64_comparisons() {
    let mut edges = vec![
        f64::NAN,
        f64::NEG_INFINITY,
        f64::INFINITY,
        f64::MAX,
        f64::MIN,
        0.0,
        -0.0,
        -4.9e-324,
        4.9e-324,
        1e-46,
        290.0,
        290.0f64.next_up(),
        290.00003,
        -1.5,
        255.0,
        255.5,
        65535.9,
        -32768.5,
        4294967295.0,
        3.4e38,
        3.5e38,
    ];
    edges.extend(edges.clone().iter().map(|x| x.next_down()));
    let f32s: Vec<f32> = edges
        .iter()
        .flat_map(|&x| [x as f32, (x as f32).next_up(), (x as f32).next_down()])
        .collect();
    bounds_agree(&f32s, &edges);
    let f64s: Vec<f64> = edges.iter().flat_map(|&x| [x, x.next_up(), x.next_down()]).collect();
    bounds_agree(&f64s, &edges);
    let u8s: Vec<u8> = (0..=255).collect();
    bounds_agree(&u8s, &edges);
    let i16s: Vec<i16> = (-300..300).chain([i16::MIN, i16::MAX]).collect();
    bounds_agree(&i16s, &edges);
    let u32s: Vec<u32> = [0, 1, 254, 255, 256, 290, 291, u32::MAX - 1, u32::MAX].to_vec();
    bounds_agree(&u32s, &edges);
}

#[test]
fn ranges_agree_with_brute_force_on_every_kernel_path() {
    let specials = [
        f64::NAN,
        -f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        0.0,
        -0.0,
        1.5,
        -2.5,
        f64::MIN_POSITIVE,
        1e300,
    ];
    let needs = Needs {
        fsum: true,
        isum: false,
        min_max: true,
        moments: true,
    };
    let vals: Vec<f64> = (0..37)
        .map(|i| specials[i % specials.len()] + (i / 10) as f64)
        .collect();
    let ranges = [
        KeyRange {
            lo: order_key(0.0),
            hi: i64::MAX,
        },
        KeyRange {
            lo: order_key(-0.0) + 1,
            hi: order_key(2.0),
        },
        KeyRange {
            lo: i64::MIN,
            hi: order_key(f64::INFINITY),
        },
        KeyRange::ALL,
        KeyRange { lo: i64::MIN, hi: -1 },
        // `v >= NaN`: only the NaNs of the largest payloads, which keys tell.
        KeyRange {
            lo: order_key(f64::NAN),
            hi: i64::MAX,
        },
    ];
    for (r, missing) in ranges.iter().flat_map(|r| {
        [
            (*r, Missing::default()),
            (
                *r,
                Missing {
                    values: vec![],
                    nan: true,
                },
            ),
            (
                *r,
                Missing {
                    values: vec![1.5],
                    nan: false,
                },
            ),
        ]
    }) {
        let kept: Vec<f64> = vals
            .iter()
            .copied()
            .filter(|&x| !missing.test(x) && r.contains(order_key(x)))
            .collect();
        let k = Keep {
            missing: missing.clone(),
            range: Some(r),
        };
        let mut run = Accumulators::new(1, needs, true);
        fold_run(&mut run, 0, &vals, &k);
        let mut each = Accumulators::new(1, needs, true);
        fold_elementwise(&mut each, &vals, &k, |_| 0);
        // Pieces of eight without a NaN take the float-comparison loops.
        let mut pieces = Accumulators::new(1, needs, true);
        for w in [0, 2, 10, 12, 20, 22, 30, 37].windows(2) {
            fold_run(&mut pieces, 0, &vals[w[0]..w[1]], &k);
        }
        for acc in [&run, &each, &pieces] {
            assert_eq!(
                (acc.cells[0], acc.n[0]),
                (kept.len() as u64, kept.len() as u64),
                "{r:?}"
            );
            let sum: f64 = kept.iter().sum();
            assert!(acc.fsum[0] == sum || (sum.is_nan() && acc.fsum[0].is_nan()), "{r:?}");
            let signs = kept.iter().filter(|x| x.is_nan()).fold(0, |s, x| {
                s | if x.is_sign_negative() {
                    NAN_NEGATIVE
                } else {
                    NAN_POSITIVE
                }
            });
            assert_eq!(acc.nan[0], signs, "{r:?}");
        }
    }
}

/// `n` f32s: a NaN of each sign in every 17 (at 0 and 5), random sixteenths in
/// [-50, 75) between.
fn f32s_with_nans(seed: &mut u64, n: usize) -> Vec<f32> {
    (0..n)
        .map(|i| match i % 17 {
            0 => f32::NAN,
            5 => -f32::NAN,
            _ => (random(seed) % 2000) as f32 / 16.0 - 50.0,
        })
        .collect()
}

/// A small deterministic generator (xorshift) for the tests below.
fn random(seed: &mut u64) -> u64 {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    *seed
}

#[test]
fn variances_of_runs_agree_with_brute_force() {
    // The squared deviations (`run_m2`) under each rule of what is kept: nothing
    // missing, NaN missing, one fill value, and a range; runs of every length to 40.
    let mut seed = 7;
    let vals: Vec<f32> = f32s_with_nans(&mut seed, 40)
        .into_iter()
        .enumerate()
        .map(|(i, x)| if i % 17 == 5 { 2.5 } else { x })
        .collect();
    let needs = Needs {
        fsum: true,
        moments: true,
        ..Needs::default()
    };
    let missings = [
        Missing::default(),
        Missing {
            values: vec![],
            nan: true,
        },
        Missing {
            values: vec![2.5],
            nan: true,
        },
    ];
    for n in 0..=vals.len() {
        // Without NaNs where nothing is missing: their M2 is NaN whatever the order.
        let plain: Vec<f32> = vals[..n].iter().map(|&x| if x.is_nan() { 1.0 } else { x }).collect();
        let cases = [
            (plain.clone(), Missing::<f32>::default(), None),
            (
                plain.clone(),
                Missing {
                    values: vec![2.5],
                    nan: false,
                },
                None,
            ),
            (vals[..n].to_vec(), missings[1].clone(), None),
            (vals[..n].to_vec(), missings[2].clone(), None),
            (
                vals[..n].to_vec(),
                missings[1].clone(),
                Some(KeyRange {
                    lo: order_key(-10.0),
                    hi: order_key(30.0),
                }),
            ),
            (plain, missings[0].clone(), Some(KeyRange::ALL)),
        ];
        for (run, missing, range) in cases {
            let keep = Keep { missing, range };
            let kept: Vec<f64> = run.iter().filter(|&&x| keep.test(x)).map(|&x| x as f64).collect();
            let mean = kept.iter().sum::<f64>() / kept.len().max(1) as f64;
            let m2: f64 = kept.iter().map(|x| (x - mean) * (x - mean)).sum();
            let mut acc = Accumulators::new(1, needs, true);
            fold_run(&mut acc, 0, &run, &keep);
            assert_eq!(acc.n[0], kept.len() as u64, "{keep:?}");
            let tol = 1e-12 * m2.max(1.0);
            assert!((acc.m2[0] - m2).abs() <= tol, "{keep:?}: {} against {m2}", acc.m2[0]);
        }
    }
}

#[test]
fn sum_and_count_fold_in_one_pass_as_apart() {
    // `fold_run_sum_and_count` must give each input what `fold_run` gives it alone, bit for bit,
    // whether `sum_and_count_stats` takes the two or not; it must take those it is for.
    fn check<T: Elem + std::fmt::Debug>(vals: &[T], missing: &Missing<T>, range: KeyRange, one_pass: bool) {
        let sums = Keep {
            missing: missing.clone(),
            range: None,
        };
        let counts = Keep {
            missing: missing.clone(),
            range: Some(range),
        };
        let sum_needs = Needs {
            fsum: true,
            ..Needs::default()
        };
        let (mut a, mut b) = (
            Accumulators::new(2, sum_needs, true),
            Accumulators::new(2, Needs::default(), true),
        );
        fold_run_sum_and_count(&mut a, &mut b, 1, vals, &sums, &counts);
        let (mut a1, mut b1) = (
            Accumulators::new(2, sum_needs, true),
            Accumulators::new(2, Needs::default(), true),
        );
        fold_run(&mut a1, 1, vals, &sums);
        fold_run(&mut b1, 1, vals, &counts);
        let what = format!("{} values, {missing:?}, {range:?}", vals.len());
        assert_eq!(a.fsum[1].to_bits(), a1.fsum[1].to_bits(), "sum: {what}");
        assert_eq!((a.n[1], a.cells[1]), (a1.n[1], a1.cells[1]), "sum's counts: {what}");
        assert_eq!((b.n[1], b.cells[1]), (b1.n[1], b1.cells[1]), "counts: {what}");
        assert_eq!((a.n[0], b.n[0], a.fsum[0]), (0, 0, 0.0));
        let taken = sum_and_count_stats(vals, &sums, sum_needs, &counts, Needs::default()).is_some();
        assert_eq!(taken, one_pass, "one pass: {what}");
    }
    let ranges = [
        // `v > 1.0`: every positive NaN too (some NaNs: decided by keys).
        KeyRange {
            lo: order_key(1.0) + 1,
            hi: i64::MAX,
        },
        // `v BETWEEN -0.1 AND 2`: no NaN; -0.1 is no f32.
        KeyRange {
            lo: order_key(-0.1),
            hi: order_key(2.0),
        },
        // Everything, NaNs included.
        KeyRange::ALL,
    ];
    let mut seed = 7;
    for n in (0..70).chain([1000, 4099]) {
        // Magnitudes far apart (another order of adds gives other bits), a fill value
        // and NaNs of both signs.
        let f32s: Vec<f32> = (0..n)
            .map(|i| match random(&mut seed) % 23 {
                0 => 1.5,
                1 if i % 2 == 0 => f32::NAN,
                1 => -f32::NAN,
                _ => {
                    let m = (random(&mut seed) % 4096) as f32 - 2048.0;
                    m * 2f32.powi((random(&mut seed) % 40) as i32 - 20)
                }
            })
            .collect();
        let no_nans: Vec<f32> = f32s.iter().map(|&x| if x.is_nan() { 3.0 } else { x }).collect();
        for vals in [&f32s, &no_nans] {
            let f64s: Vec<f64> = vals.iter().map(|&x| x as f64 * 1.1).collect();
            let fill32 = Missing {
                values: vec![1.5f32],
                nan: false,
            };
            let fill64 = Missing {
                values: vec![1.5f64 * 1.1],
                nan: false,
            };
            for r in ranges {
                let nan32 = Missing::<f32> {
                    values: vec![],
                    nan: true,
                };
                let nan64 = Missing::<f64> {
                    values: vec![],
                    nan: true,
                };
                check(vals, &Missing::default(), r, true);
                check(vals, &nan32, r, true);
                check(vals, &fill32, r, true);
                check(&f64s, &Missing::default(), r, true);
                check(&f64s, &nan64, r, true);
                check(&f64s, &fill64, r, true);
                // Two fill values, and types it is not for: two passes.
                let fills = Missing {
                    values: vec![1.5f32, 3.0],
                    nan: false,
                };
                check(vals, &fills, r, false);
                let ints: Vec<i32> = vals.iter().map(|&x| x as i32).collect();
                check(&ints, &Missing::default(), r, false);
            }
        }
    }
}

#[test]
fn plain_sums_add_in_the_stated_lane_order() {
    // Sums with nothing missing and no range take their own path (`run_stats`). Its
    // result must be the stated order exactly: element `i` into lane `i` mod 8, the
    // lanes combined pairwise, as the general path (here, with min/max) adds them.
    fn check<T: Elem>(vals: &[T]) {
        let mut lane = [0f64; 8];
        for (i, x) in vals.iter().enumerate() {
            lane[i % 8] += x.f();
        }
        let expected = ((lane[0] + lane[4]) + (lane[1] + lane[5])) + ((lane[2] + lane[6]) + (lane[3] + lane[7]));
        for needs in [
            Needs {
                fsum: true,
                ..Needs::default()
            },
            Needs {
                fsum: true,
                min_max: true,
                ..Needs::default()
            },
        ] {
            let mut acc = Accumulators::new(2, needs, T::FLOAT);
            fold_run(&mut acc, 1, vals, &Keep::default());
            assert_eq!(
                acc.fsum[1].to_bits(),
                expected.to_bits(),
                "{needs:?}, {} values",
                vals.len()
            );
            assert_eq!((acc.n[1], acc.cells[1]), (vals.len() as u64, vals.len() as u64));
            assert_eq!((acc.n[0], acc.fsum[0]), (0, 0.0));
        }
    }
    let mut seed = 99;
    for n in 0..70 {
        // Magnitudes far apart, so that another order of adds gives other bits.
        let f32s: Vec<f32> = (0..n)
            .map(|_| (random(&mut seed) % 4096) as f32 * 2f32.powi((random(&mut seed) % 40) as i32 - 20))
            .collect();
        check(&f32s);
        check(&f32s.iter().map(|&x| x as f64 * 1.1).collect::<Vec<f64>>());
        check(&(0..n).map(|_| random(&mut seed) as i32).collect::<Vec<i32>>());
    }
}

#[test]
fn counts_of_32_bit_runs_agree_with_brute_force() {
    // Count-only folds (`count(*) … WHERE v > c`) of f32 and i32 runs of every length
    // up to 70, with NaNs, missing rules and ranges.
    fn check<T: Elem + std::fmt::Debug>(vals: &[T], fill: T) {
        let missing = [
            Missing::default(),
            Missing {
                values: vec![],
                nan: T::FLOAT,
            },
            Missing {
                values: vec![fill],
                nan: false,
            },
        ];
        let ranges = [
            None,
            Some(KeyRange {
                lo: order_key(0.0),
                hi: i64::MAX,
            }),
            Some(KeyRange {
                lo: order_key(-20.0),
                hi: order_key(25.0),
            }),
        ];
        for (m, range) in missing.iter().flat_map(|m| ranges.map(|r| (m, r))) {
            let k = Keep {
                missing: m.clone(),
                range,
            };
            for n in 0..=vals.len() {
                let mut acc = Accumulators::new(1, Needs::default(), T::FLOAT);
                fold_run(&mut acc, 0, &vals[..n], &k);
                let kept = vals[..n].iter().filter(|x| k.test(**x)).count() as u64;
                let cells = if range.is_some() { kept } else { n as u64 };
                assert_eq!((acc.cells[0], acc.n[0]), (cells, kept), "{n} {m:?} {range:?}");
            }
        }
    }
    let mut seed = 11;
    let f32s = f32s_with_nans(&mut seed, 70);
    check(&f32s, f32s[6]);
    let i32s: Vec<i32> = (0..70).map(|_| (random(&mut seed) % 100) as i32 - 50).collect();
    check(&i32s, i32s[3]);
}

#[test]
fn blocks_are_visited_once_in_order_and_the_rest_returned() {
    // Lengths with an even and an odd number of whole blocks, with and without a tail.
    for n in 0..70usize {
        let x: Vec<u32> = (0..n as u32).collect();
        let mut seen8 = Vec::new();
        let rest = for_blocks(&x, |b: &[u32; 8]| seen8.extend_from_slice(b));
        assert_eq!(seen8, x[..n / 8 * 8], "n = {n}");
        assert_eq!(rest, &x[n / 8 * 8..], "n = {n}");
        let mut seen16 = Vec::new();
        let rest = for_blocks(&x, |b: &[u32; 16]| seen16.extend_from_slice(b));
        assert_eq!(seen16, x[..n / 16 * 16], "n = {n}");
        assert_eq!(rest, &x[n / 16 * 16..], "n = {n}");
    }
}

/// Every kernel of every dtype under each instruction-set copy: the portable copy, the
/// AVX2 one and the AVX-512 one (where the CPU has them) give bit-identical
/// accumulators.
#[test]
fn isa_copies_agree_bitwise() {
    use crate::exec::kernel::simd::{Isa, force};
    fn all<T: Elem>(vals: &[T], fill: T) -> String {
        let needs = Needs {
            fsum: true,
            isum: !T::FLOAT,
            min_max: true,
            moments: true,
        };
        let ranges = [
            None,
            Some(KeyRange {
                lo: order_key(-3.0),
                hi: order_key(40.0),
            }),
        ];
        let missings = [
            Missing::default(),
            Missing {
                values: vec![fill],
                nan: T::FLOAT,
            },
        ];
        let mut out = String::new();
        for range in ranges {
            for missing in missings.clone() {
                let k = Keep { missing, range };
                let mut acc = Accumulators::new(3, needs, T::FLOAT);
                for (g, w) in [(0, 0..vals.len()), (1, 3..vals.len() / 2), (2, 1..9)] {
                    fold_run(&mut acc, g, &vals[w.clone()], &k);
                    fold_weighted_run(&mut acc, g, &vals[w.clone()], &k, Some(Affine::IDENTITY), Some(0.5));
                    fold_dot(
                        &mut acc,
                        g,
                        &vals[w.clone()],
                        &k,
                        |x, w| x.f() * w,
                        |i| (i % 5 != 0).then_some(i as f64),
                    );
                    // One weight for the run: the dot product with that weight (its
                    // sum in other lanes: equal up to rounding).
                    let f32_product = |x: T, w: f64| (x.f32() * w as f32) as f64;
                    let (mut a, mut b) = (
                        Accumulators::new(1, needs, T::FLOAT),
                        Accumulators::new(1, needs, T::FLOAT),
                    );
                    fold_scaled(&mut a, 0, &vals[w.clone()], &k, 0.3);
                    fold_dot(&mut b, 0, &vals[w.clone()], &k, f32_product, |_| Some(0.3));
                    assert_eq!((a.cells[0], a.n[0]), (b.cells[0], b.n[0]));
                    let (x, y) = (a.fsum[0], b.fsum[0]);
                    let close = x == y || (x.is_nan() && y.is_nan()) || (x - y).abs() <= 1e-12 * y.abs();
                    assert!(close, "{x} vs {y}");
                    fold_scaled(&mut acc, g, &vals[w], &k, 0.3);
                }
                out += &format!("{acc:?}");
                // Consecutive groups, without moments (the vector passes).
                let needs = Needs {
                    moments: false,
                    ..needs
                };
                let mut acc = Accumulators::new(vals.len(), needs, T::FLOAT);
                fold_consecutive(&mut acc, 0, vals, &k);
                fold_consecutive(&mut acc, 5, &vals[..vals.len() - 9], &k);
                acc.settle();
                out += &format!("{acc:?}");
            }
        }
        out
    }
    let mut seed = 0x9e3779b97f4a7c15;
    let n = 1003;
    let f32s: Vec<f32> = (0..n)
        .map(|_| (random(&mut seed) % 2000) as f32 / 16.0 - 50.0)
        .collect();
    let mut f64s: Vec<f64> = f32s.iter().map(|x| *x as f64 * 1.000001).collect();
    f64s[17] = f64::NAN;
    let i16s: Vec<i16> = (0..n).map(|_| random(&mut seed) as i16).collect();
    let u8s: Vec<u8> = (0..n).map(|_| random(&mut seed) as u8).collect();
    let run = |isa| {
        force(isa);
        [
            all(&f32s, f32s[5]),
            all(&f64s, f64s[6]),
            all(&i16s, i16s[7]),
            all(&u8s, u8s[8]),
        ]
    };
    let portable = run(Isa::Portable);
    let avx2 = run(Isa::Avx2);
    let avx512 = run(Isa::Avx512);
    force(crate::exec::kernel::simd::detected());
    assert_eq!(portable, avx2);
    assert_eq!(portable, avx512);
}

/// Sums accumulate in f64, eight lanes over a run then pairwise: for `n` elements the
/// error is at most `(n / 8 + 3) · 2⁻⁵³ · Σ|x|` (f32 and smaller values convert to f64
/// exactly; no lane holds more than `⌈n/8⌉` elements, the remainder being spread over
/// the lanes, so an element passes through at most `⌈n/8⌉ − 1` adds in its lane and 3
/// in the combination). Checked against the exact sum (integers scaled by a power of
/// two) on large magnitudes that cancel.
#[test]
fn sums_stay_within_the_stated_error_bound() {
    let mut seed = 12345;
    let n = 100_003;
    // x = m · 2^e, m < 2^24, e in [-20, 40]: exactly representable in f32.
    let vals: Vec<f32> = (0..n)
        .map(|i| {
            let m = (random(&mut seed) % (1 << 24)) as f32;
            let e = (random(&mut seed) % 61) as i32 - 20;
            let big = if i % 2 == 0 { 1.0 } else { -1.0 };
            big * m * 2f32.powi(e)
        })
        .collect();
    // Exact: every value is an integer multiple of 2^-20.
    let exact: i128 = vals.iter().map(|x| (*x as f64 * 2f64.powi(20)) as i128).sum();
    let exact = exact as f64 / 2f64.powi(20);
    let abs: f64 = vals.iter().map(|x| x.abs() as f64).sum();
    let mut acc = Accumulators::new(
        1,
        Needs {
            fsum: true,
            ..Needs::default()
        },
        true,
    );
    fold_run(&mut acc, 0, &vals, &Keep::default());
    let bound = (n as f64 / 8.0 + 3.0) * 2f64.powi(-53) * abs;
    let err = (acc.fsum[0] - exact).abs();
    assert!(err <= bound, "error {err:e} above the bound {bound:e}");
    // The data cancel: the result is far smaller than its terms.
    assert!(exact.abs() < abs / 10.0);
}
