//! The vector instructions the fold's kernels run with, chosen at run time.
//!
//! The crate is built for the target's baseline (SSE2 on x86-64), so that one binary runs
//! on any CPU of the architecture. The hot kernels (`multiversion!`) are compiled twice
//! more on x86-64, with AVX2 and FMA and with AVX-512 (F, BW, VL, DQ), and the copy chosen
//! runs on each call. All copies run the same source with the same order of operations
//! (explicit lanes, no reassociation, no fused multiply-add contraction), so their
//! results are bit-identical; only the width of the registers and the use of mask
//! registers differ. On aarch64 the baseline already includes NEON, so the portable copy
//! is the vector one; other targets run the portable copy.
//!
//! The AVX2 copy runs by default where the CPU has it, also on AVX-512 CPUs: on the
//! benchmark's machines (AMD EPYCs and an Intel Xeon; the README's performance section
//! has the figures) the AVX-512 copies were no faster on the plain folds and slower on
//! some, or faster in one run and slower in another, so they run only when asked for.
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
/// ([`prefetch_distance`]): `GROUP BY lat` folds one 2880-byte row per call, and 8 KiB ahead
/// made it 12–23% slower than 2 KiB, paired with the floor (Dec 2026).
const PREFETCH_NEAR: usize = 2048;

/// How far ahead they ask in a long run: 4 KiB. Over the benchmark's cube (whole tiles,
/// 1 MiB runs) on an Intel Xeon, with the distance set per run of the same build and the
/// settings alternating (Dec 6 2026, floor 18–19.5 ms): the kernel alone 1.08–1.10× the
/// floor at 4 KiB, 1.11–1.17× at 8 KiB, 1.10–1.12× at 2 KiB (three rounds); the full mean
/// through the Rust API 1.21–1.23× the paired floor at 4 KiB against 1.24–1.25× at 8 KiB,
/// `GROUP BY time` 1.23–1.24× against 1.25–1.26× (three rounds). Hours before (the night
/// of Dec 5 to 6, a slower spell), 8 KiB had beaten 2 KiB everywhere (4 KiB was not
/// measured). The native floor's own loop is fastest at 8 KiB and keeps it.
const PREFETCH_FAR: usize = 4096;

/// The prefetch distance for a run of `bytes` (the whole slice a kernel call folds):
/// [`PREFETCH_FAR`] from twice that distance on, where most prefetches still land inside
/// the run, else [`PREFETCH_NEAR`].
#[inline(always)]
pub fn prefetch_distance(bytes: usize) -> usize {
    if bytes >= 2 * PREFETCH_FAR {
        PREFETCH_FAR
    } else {
        PREFETCH_NEAR
    }
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

/// Define a kernel compiled for each [`Isa`] of the target (portable and, on x86-64,
/// AVX2 + FMA and AVX-512) that runs the copy [`current`] names. Generic parameters are
/// listed in brackets and bounded in a bracketed `where` clause:
///
/// ```ignore
/// multiversion! {
///     pub fn sum[T](x: &[T]) -> f64 where [T: Elem] { x.iter().map(|v| v.f()).sum() }
/// }
/// ```
///
/// A kernel whose AVX-512 copy measured slower than its AVX2 one starts with `up_to_avx2;`
/// and runs its AVX2 copy on AVX-512 CPUs too.
///
/// Only what is inlined into a copy is compiled for its features. The helpers and
/// closures on a kernel's hot path must be `#[inline(always)]`: a closure the compiler
/// chooses not to inline is compiled once, for the baseline, and each copy calls it (a
/// block kernel whose closure was left to the compiler ran 15–30% slower so). `nm -C -S`
/// on a binary shows such closures as `KERNEL::portable::{{closure}}`; today the only
/// ones are the tests of a list of missing values (`Keep::test`), which search the list
/// for each element whatever the copy.
macro_rules! multiversion {
    (up_to_avx2; $($kernel:tt)*) => {
        $crate::exec::simd::multiversion!(@up_to Avx2; $($kernel)*);
    };
    (
        @up_to $top:ident;
        $(#[$meta:meta])*
        $vis:vis fn $name:ident [$($g:ident),*] ($($arg:ident: $ty:ty),* $(,)?) $(-> $ret:ty)?
        where [$($bounds:tt)*] $body:block
    ) => {
        $(#[$meta])*
        $vis fn $name<$($g),*>($($arg: $ty),*) $(-> $ret)? where $($bounds)* {
            #[inline(always)]
            fn portable<$($g),*>($($arg: $ty),*) $(-> $ret)? where $($bounds)* $body
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx2,fma")]
                fn avx2<$($g),*>($($arg: $ty),*) $(-> $ret)? where $($bounds)* {
                    portable::<$($g),*>($($arg),*)
                }
                #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx2,fma")]
                fn avx512<$($g),*>($($arg: $ty),*) $(-> $ret)? where $($bounds)* {
                    portable::<$($g),*>($($arg),*)
                }
                match $crate::exec::simd::current().min($crate::exec::simd::Isa::$top) {
                    // SAFETY: `current` names a level only when the CPU has its features.
                    $crate::exec::simd::Isa::Avx512 => return unsafe { avx512::<$($g),*>($($arg),*) },
                    $crate::exec::simd::Isa::Avx2 => return unsafe { avx2::<$($g),*>($($arg),*) },
                    $crate::exec::simd::Isa::Portable => {}
                }
            }
            portable::<$($g),*>($($arg),*)
        }
    };
    ($($kernel:tt)*) => {
        $crate::exec::simd::multiversion!(@up_to Avx512; $($kernel)*);
    };
}
pub(crate) use multiversion;

#[cfg(test)]
mod tests {
    use super::*;

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
