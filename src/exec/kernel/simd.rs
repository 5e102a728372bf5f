//! The vector instructions the fold's kernels run with, chosen at run time.
//!
//! The crate is built for the target's baseline (SSE2 on x86-64), so that one binary runs
//! on any CPU of the architecture. The hot kernels (`multiversion!`) are compiled twice
//! more on x86-64, with AVX2 and FMA and with AVX-512 (F, BW, VL, DQ), and the copy chosen
//! runs on each call. All copies run the same source with the same order of operations
//! (explicit lanes, no reassociation, no fused multiply-add contraction), so their
//! results are bit-identical; only the width of the registers and the use of mask
//! registers differ. On aarch64 the baseline already includes NEON, so the portable copy
//! is the vector one; other targets run the portable copy. One loop is written by hand:
//! the f32 sum of a long run runs [`f32_lane_sums`], x86-64 assembly, in the AVX copies;
//! it adds in the portable loop's order, so its lanes are bit-identical too.
//!
//! The AVX2 copy runs by default where the CPU has it, also on AVX-512 CPUs: on the
//! benchmark's machines the AVX-512 copies were no faster on the plain folds and slower
//! on some (docs/performance.md), so they run only when asked for.
//! `TET_SIMD=avx512`, `avx2` or `portable` in the environment, read once per process,
//! picks that copy (or the best below it that the CPU has), for comparisons and
//! benchmarks.

use std::sync::atomic::{AtomicU8, Ordering};

/// An instruction-set level the kernels are compiled for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Isa {
    /// The target's baseline (SSE2 on x86-64, NEON on aarch64).
    Portable,
    /// x86-64 with AVX2 and FMA.
    Avx2,
    /// x86-64 with AVX-512 F, BW, VL and DQ (and AVX2, FMA).
    Avx512,
}

impl Isa {
    /// A short name (`"portable"`, `"avx2"`, `"avx512"`).
    pub fn name(self) -> &'static str {
        match self {
            Isa::Portable => "portable",
            Isa::Avx2 => "avx2",
            Isa::Avx512 => "avx512",
        }
    }

    /// Every level, in the order of [`Isa::code`].
    const ALL: [Isa; 3] = [Isa::Portable, Isa::Avx2, Isa::Avx512];

    /// The level's code in [`CHOSEN`] (0 there: not chosen yet).
    fn code(self) -> u8 {
        self as u8 + 1
    }
}

/// The chosen level's code ([`Isa::code`]); 0 until the first kernel call.
static CHOSEN: AtomicU8 = AtomicU8::new(0);

/// The best level this CPU supports (ignoring `TET_SIMD`).
pub fn detected() -> Isa {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::is_x86_feature_detected as has;
        if has!("avx2") && has!("fma") {
            if has!("avx512f") && has!("avx512bw") && has!("avx512vl") && has!("avx512dq") {
                return Isa::Avx512;
            }
            return Isa::Avx2;
        }
    }
    Isa::Portable
}

/// The level the kernels run with: AVX2 where the CPU has it (see the module's note on
/// AVX-512), unless `TET_SIMD` or [`force`] chose another.
#[inline(always)]
pub fn current() -> Isa {
    match CHOSEN.load(Ordering::Relaxed).checked_sub(1) {
        Some(i) => Isa::ALL[i as usize],
        None => init(),
    }
}

#[cold]
fn init() -> Isa {
    let asked = match std::env::var("TET_SIMD").as_deref() {
        Ok("portable") => Isa::Portable,
        Ok("avx512") => Isa::Avx512,
        _ => Isa::Avx2,
    };
    force(asked)
}

/// Run the kernels with `isa` from now on (tests and benchmarks compare the copies).
/// A level the CPU lacks falls back to [`detected`]; returns the level in force.
pub fn force(isa: Isa) -> Isa {
    let isa = isa.min(detected());
    CHOSEN.store(isa.code(), Ordering::Relaxed);
    isa
}

/// How far ahead of the elements being folded the kernels ask for memory in a short run
/// ([`prefetch_distance`]): a short run (`GROUP BY lat` folds one 2880-byte row per call)
/// is slowed by prefetches far past it.
const PREFETCH_NEAR: usize = 2048;

/// How far ahead they ask in a long run (whole tiles): far enough to cover the latency of
/// memory, near enough that the lines arrive before they are evicted. Both distances were
/// chosen by measurement against the native floor (docs/performance.md).
const PREFETCH_FAR: usize = 4096;

/// The least bytes of a long run: twice [`PREFETCH_FAR`], where most prefetches that far
/// ahead still land inside the run.
pub const LONG_RUN: usize = 2 * PREFETCH_FAR;

/// The prefetch distance for a run of `bytes` (the whole slice a kernel call folds):
/// [`PREFETCH_FAR`] in a run of [`LONG_RUN`] bytes or more, else [`PREFETCH_NEAR`].
#[inline(always)]
pub fn prefetch_distance(bytes: usize) -> usize {
    if bytes >= LONG_RUN { PREFETCH_FAR } else { PREFETCH_NEAR }
}

/// Ask the CPU to bring the cache line `ahead` bytes past the start of `x` into its
/// caches: a hint, not a read (it never faults, so that address may lie past the end of
/// the data). The kernels call it on each block before folding it, with `ahead` from
/// [`prefetch_distance`]: the hardware's own stream prefetchers stop at each 4 KiB page,
/// the kernels' loads would otherwise wait for memory at every page of a tile's run.
#[inline(always)]
pub fn prefetch_ahead<T>(x: &[T], ahead: usize) {
    prefetch_at(x.as_ptr().cast::<u8>().wrapping_add(ahead));
}

/// [`prefetch_ahead`] of each 64-byte cache line of `x` (once for a block of at most 64
/// bytes): a kernel's step over more bytes than a line still asks for all of them.
#[inline(always)]
pub fn prefetch_lines_ahead<T>(x: &[T], ahead: usize) {
    let p = x.as_ptr().cast::<u8>().wrapping_add(ahead);
    let mut at = 0;
    while at < std::mem::size_of_val(x) {
        prefetch_at(p.wrapping_add(at));
        at += 64;
    }
}

/// The prefetch of the line at `p`.
#[inline(always)]
fn prefetch_at(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch reads nothing architecturally and never faults, whatever the
    // address; SSE is part of the x86-64 baseline.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.cast::<i8>())
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// The step of the hand-written f32 loops ([`f32_lane_sums`], [`f32_row_totals`]), as
/// assembly text: 64 bytes at `{p}` widened to f64 and added to lanes 0–3 (ymm0) and
/// 4–7 (ymm1), one prefetch `{ahead}` bytes past them between the loads; then `{p}`
/// advanced and compared with `{end}` (the caller's `jne` closes the loop).
#[cfg(target_arch = "x86_64")]
macro_rules! f32_step {
    () => {
        concat!(
            "vcvtps2pd ymm2, xmmword ptr [{p}]\n",
            "prefetcht0 byte ptr [{p} + {ahead}]\n",
            "vaddpd ymm0, ymm0, ymm2\n",
            "vcvtps2pd ymm3, xmmword ptr [{p} + 16]\n",
            "vaddpd ymm1, ymm1, ymm3\n",
            "vcvtps2pd ymm2, xmmword ptr [{p} + 32]\n",
            "vaddpd ymm0, ymm0, ymm2\n",
            "vcvtps2pd ymm3, xmmword ptr [{p} + 48]\n",
            "vaddpd ymm1, ymm1, ymm3\n",
            "add {p}, 64\n",
            "cmp {p}, {end}",
        )
    };
}

/// Add the f32 of `x`'s whole 16-element blocks to eight f64 lanes, in order, when `x` is a
/// long run ([`LONG_RUN`] bytes or more): lane `i` takes the elements at `i` mod 8, one
/// chain of adds per lane, as the fold's portable loop adds them (so the lanes are
/// bit-identical to its). Each 64-byte step prefetches the line [`PREFETCH_FAR`] bytes
/// past it. Returns how many elements it added: a multiple of 16, 0 for a shorter run.
///
/// Written in assembly because at memory speed this loop's shape sets its pace, and the
/// compiler's shapes (unrolled to 128 bytes per step, or with indexed loads) lost to it;
/// one prefetch per 64-byte step, between the loads, measured fastest of the shapes tried
/// (docs/performance.md). Shorter runs are left to the portable loop, which was faster on
/// them.
///
/// It names ymm0–ymm3 in its text and declares xmm0–xmm3 clobbered (their classes need
/// no target feature): the compiler's registers alias (a clobber of xmm0 is one of ymm0
/// and zmm0), so nothing it keeps there survives the call.
///
/// # Safety
/// The CPU must have AVX ([`current`] is [`Isa::Avx2`] or above).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub unsafe fn f32_lane_sums(x: &[f32], lanes: &mut [f64; 8]) -> usize {
    if size_of_val(x) < LONG_RUN {
        return 0;
    }
    let (whole, ahead) = (x.len() / 16 * 16, PREFETCH_FAR);
    let p = x.as_ptr();
    // SAFETY: the loop reads the `whole` f32 from `p` (16 per step, stopping at `p +
    // whole`, a non-zero multiple of 16 elements away), prefetches (which never fault) and
    // reads and writes the eight f64 of `lanes`; AVX is the caller's promise.
    unsafe {
        std::arch::asm!(
            "vmovupd ymm0, ymmword ptr [{lanes}]",
            "vmovupd ymm1, ymmword ptr [{lanes} + 32]",
            "2:",
            f32_step!(),
            "jne 2b",
            "vmovupd ymmword ptr [{lanes}], ymm0",
            "vmovupd ymmword ptr [{lanes} + 32], ymm1",
            p = inout(reg) p => _,
            end = in(reg) p.add(whole),
            ahead = in(reg) ahead,
            lanes = in(reg) lanes.as_mut_ptr(),
            out("xmm0") _,
            out("xmm1") _,
            out("xmm2") _,
            out("xmm3") _,
            options(nostack),
        );
    }
    whole
}

/// The f64 sum of each row of `x` (rows of `row_len` f32 back to back, `row_len` a
/// non-zero multiple of 16, one total per row into `totals`), added as the fold adds a
/// run of them: eight lanes from zero, lane `i` taking the elements at `i` mod 8 in
/// order, then `((l0 + l4) + (l1 + l5)) + ((l2 + l6) + (l3 + l7))`, so that each total
/// is bit-identical to the portable loop's. The loop of [`f32_lane_sums`] per row, in one
/// call for a block of rows (`GROUP BY lat`'s 720-value rows: a call per row cost more
/// than the row's loop gained), prefetching [`PREFETCH_FAR`] bytes ahead, into the rows
/// that follow: a block is one long stream. Returns false, doing nothing, unless `x`
/// holds exactly `totals.len()` (at least one) such rows.
///
/// # Safety
/// The CPU must have AVX ([`current`] is [`Isa::Avx2`] or above).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
#[must_use]
pub unsafe fn f32_row_totals(x: &[f32], row_len: usize, totals: &mut [f64]) -> bool {
    if row_len == 0
        || !row_len.is_multiple_of(16)
        || totals.is_empty()
        || Some(x.len()) != row_len.checked_mul(totals.len())
    {
        return false;
    }
    let ahead = PREFETCH_FAR;
    // SAFETY: each row's loop reads its `row_len` f32 (16 per step, a non-zero multiple
    // of 16) and the outer loop stops after `totals.len()` rows, `x.len()` f32 in all;
    // prefetches never fault; each row writes one f64 of `totals`. AVX is the caller's
    // promise.
    unsafe {
        std::arch::asm!(
            "2:",
            "vxorpd ymm0, ymm0, ymm0",
            "vxorpd ymm1, ymm1, ymm1",
            "lea {end}, [{p} + {bytes}]",
            "3:",
            f32_step!(),
            "jne 3b",
            // (l0 + l4, l1 + l5, l2 + l6, l3 + l7), then its pairs' sums, then theirs.
            "vaddpd ymm0, ymm0, ymm1",
            "vextractf128 xmm1, ymm0, 1",
            "vhaddpd xmm0, xmm0, xmm0",
            "vhaddpd xmm1, xmm1, xmm1",
            "vaddsd xmm0, xmm0, xmm1",
            "vmovsd qword ptr [{out}], xmm0",
            "add {out}, 8",
            "cmp {out}, {out_end}",
            "jne 2b",
            p = inout(reg) x.as_ptr() => _,
            out = inout(reg) totals.as_mut_ptr() => _,
            end = out(reg) _,
            bytes = in(reg) row_len * 4,
            ahead = in(reg) ahead,
            out_end = in(reg) totals.as_mut_ptr().add(totals.len()),
            out("xmm0") _,
            out("xmm1") _,
            out("xmm2") _,
            out("xmm3") _,
            options(nostack),
        );
    }
    true
}

/// Declare a kernel compiled for each [`Isa`] of the target (portable and, on x86-64,
/// AVX2 + FMA and AVX-512) that runs the copy [`current`] names. The kernel's body is an
/// ordinary `#[inline(always)]` function beside it (so that rustfmt formats it); the macro
/// takes the kernel's signature, with generic parameters in brackets and their bounds in a
/// bracketed `where` clause, and the body's name:
///
/// ```ignore
/// multiversion! {
///     /// The f64 sum of `x`.
///     pub fn sum[T](x: &[T]) -> f64 where [T: Elem] = sum_body;
/// }
///
/// #[inline(always)]
/// fn sum_body<T: Elem>(x: &[T]) -> f64 {
///     x.iter().map(|v| v.f()).sum()
/// }
/// ```
///
/// A kernel whose AVX-512 copy measured slower than its AVX2 one starts with `up_to_avx2;`
/// and runs its AVX2 copy on AVX-512 CPUs too.
///
/// Only what is inlined into a copy is compiled for its features: the body and the
/// helpers and closures on its hot path must be `#[inline(always)]`. A closure the
/// compiler chooses not to inline is compiled once, for the baseline, and each copy calls
/// it, slowly (docs/performance.md). `nm -C -S` on a binary shows such closures as
/// `KERNEL_body::{{closure}}`; today the only ones are the tests of a list of missing
/// values (`Keep::test`), which search the list for each element whatever the copy.
macro_rules! multiversion {
    (up_to_avx2; $($kernel:tt)*) => {
        $crate::exec::kernel::simd::multiversion!(@up_to Avx2; $($kernel)*);
    };
    (
        @up_to $top:ident;
        $(#[$meta:meta])*
        $vis:vis fn $name:ident [$($g:ident),*] ($($arg:ident: $ty:ty),* $(,)?) $(-> $ret:ty)?
        where [$($bounds:tt)*] = $body:ident;
    ) => {
        $(#[$meta])*
        $vis fn $name<$($g),*>($($arg: $ty),*) $(-> $ret)? where $($bounds)* {
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx2,fma")]
                fn avx2<$($g),*>($($arg: $ty),*) $(-> $ret)? where $($bounds)* {
                    $body::<$($g),*>($($arg),*)
                }
                #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx2,fma")]
                fn avx512<$($g),*>($($arg: $ty),*) $(-> $ret)? where $($bounds)* {
                    $body::<$($g),*>($($arg),*)
                }
                use $crate::exec::kernel::simd::{Isa, current};
                match current().min(Isa::$top) {
                    // SAFETY: `current` names a level only when the CPU has its features.
                    Isa::Avx512 => return unsafe { avx512::<$($g),*>($($arg),*) },
                    Isa::Avx2 => return unsafe { avx2::<$($g),*>($($arg),*) },
                    Isa::Portable => {}
                }
            }
            $body::<$($g),*>($($arg),*)
        }
    };
    ($($kernel:tt)*) => {
        $crate::exec::kernel::simd::multiversion!(@up_to Avx512; $($kernel)*);
    };
}
pub(crate) use multiversion;

#[cfg(test)]
mod tests {
    use super::*;

    /// `n` f32 of magnitudes from about 1e-3 to 2e6 and both signs: any other order of
    /// adds shows in the bits of some lane.
    #[cfg(target_arch = "x86_64")]
    fn mixed_f32s(n: u32) -> Vec<f32> {
        (0..n)
            .map(|i| {
                let h = i.wrapping_mul(2_654_435_761);
                (h >> 8) as f32 / 7.0 * if h & 1 == 0 { 1e-3 } else { -1.0 }
            })
            .collect()
    }

    /// `lanes` plus each element of `x` added in order to lane `k` mod 8 (`k` its index):
    /// the lanes by definition, one f64 add at a time.
    #[cfg(target_arch = "x86_64")]
    fn lanes_of(x: &[f32], mut lanes: [f64; 8]) -> [f64; 8] {
        for (k, &v) in x.iter().enumerate() {
            lanes[k % 8] += v as f64;
        }
        lanes
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn the_f32_loop_adds_each_element_to_its_lane_in_order() {
        if !std::arch::is_x86_feature_detected!("avx") {
            eprintln!("skipped: this CPU has no AVX");
            return;
        }
        let data = mixed_f32s(5000);
        let long = LONG_RUN / 4;
        for start in 0..5 {
            for len in [
                0,
                1,
                16,
                100,
                long - 1,
                long,
                long + 1,
                long + 15,
                long + 16,
                long + 17,
                5000 - start,
            ] {
                let x = &data[start..start + len];
                // The lanes start non-zero: the loop adds to them.
                let mut lanes = [0.25, -1.5, 1e9, 0.0, -0.0, 3.0, 7.5, -1e-9];
                let start_lanes = lanes;
                // SAFETY: the CPU has AVX.
                let done = unsafe { f32_lane_sums(x, &mut lanes) };
                assert_eq!(done, if len < long { 0 } else { len / 16 * 16 }, "len {len}");
                let want = lanes_of(&x[..done], start_lanes);
                assert_eq!(
                    lanes.map(f64::to_bits),
                    want.map(f64::to_bits),
                    "start {start} len {len}"
                );
            }
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn the_f32_row_loop_totals_each_row_as_the_fold_does() {
        if !std::arch::is_x86_feature_detected!("avx") {
            eprintln!("skipped: this CPU has no AVX");
            return;
        }
        let data = mixed_f32s(3000);
        for (start, row_len, rows) in [(0, 16, 1), (1, 16, 7), (3, 48, 5), (2, 720, 4), (0, 2048, 1)] {
            let x = &data[start..start + row_len * rows];
            let mut totals = vec![f64::NAN; rows];
            // SAFETY: the CPU has AVX.
            assert!(unsafe { f32_row_totals(x, row_len, &mut totals) });
            for (r, row) in x.chunks_exact(row_len).enumerate() {
                let l = lanes_of(row, [0.0; 8]);
                let want = ((l[0] + l[4]) + (l[1] + l[5])) + ((l[2] + l[6]) + (l[3] + l[7]));
                assert_eq!(totals[r].to_bits(), want.to_bits(), "row {r} of {rows} x {row_len}");
            }
        }
        // Not whole rows of a multiple of 16: nothing done.
        let mut totals = [7.0; 2];
        for (x, row_len) in [(&data[..40], 20), (&data[..48], 16), (&data[..0], 16), (&data[..32], 0)] {
            // SAFETY: the CPU has AVX.
            assert!(!unsafe { f32_row_totals(x, row_len, &mut totals) });
        }
        assert_eq!(totals, [7.0; 2]);
    }

    #[test]
    fn forcing_a_level_sticks_and_falls_back_to_what_the_cpu_has() {
        assert_eq!(force(Isa::Portable), Isa::Portable);
        assert_eq!(current(), Isa::Portable);
        let avx2 = force(Isa::Avx2);
        assert_eq!(avx2, Isa::Avx2.min(detected()));
        assert_eq!(current(), avx2);
        let best = force(Isa::Avx512);
        assert_eq!(best, detected());
        assert_eq!(current(), best);
    }
}
