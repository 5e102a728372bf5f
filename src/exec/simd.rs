//! The vector instructions the fold's kernels run with, chosen at run time.
//!
//! The crate is built for the target's baseline (SSE2 on x86-64), so that one binary runs
//! on any CPU of the architecture. The hot kernels ([`multiversion!`]) are compiled a
//! second time with AVX2 and FMA enabled and the copy is picked per call when the CPU has
//! them. Both copies run the same source with the same order of operations (explicit
//! lanes, no reassociation, no fused multiply-add contraction), so their results are
//! bit-identical; only the width of the registers differs. On aarch64 the baseline
//! already includes NEON, so the portable copy is the vector one; other targets run the
//! portable copy.
//!
//! `TET_SIMD=portable` in the environment (read once per process) forces the portable
//! copy, for comparisons and benchmarks.

use std::sync::atomic::{AtomicU8, Ordering};

/// An instruction-set level the kernels are compiled for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isa {
    /// The target's baseline (SSE2 on x86-64, NEON on aarch64).
    Portable,
    /// x86-64 with AVX2 and FMA.
    Avx2,
}

impl Isa {
    /// A short name (`"portable"`, `"avx2"`).
    pub fn name(self) -> &'static str {
        match self {
            Isa::Portable => "portable",
            Isa::Avx2 => "avx2",
        }
    }
}

const UNSET: u8 = 0;
const PORTABLE: u8 = 1;
const AVX2: u8 = 2;

static CHOSEN: AtomicU8 = AtomicU8::new(UNSET);

/// The best level this CPU supports (ignoring `TET_SIMD`).
pub fn detected() -> Isa {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
        return Isa::Avx2;
    }
    Isa::Portable
}

/// The level the kernels run with: [`detected`], unless `TET_SIMD=portable` or
/// [`force`] chose the portable copy.
#[inline(always)]
pub fn current() -> Isa {
    match CHOSEN.load(Ordering::Relaxed) {
        PORTABLE => Isa::Portable,
        AVX2 => Isa::Avx2,
        _ => init(),
    }
}

#[cold]
fn init() -> Isa {
    let isa = match std::env::var("TET_SIMD").as_deref() {
        Ok("portable") => Isa::Portable,
        _ => detected(),
    };
    store(isa);
    isa
}

fn store(isa: Isa) {
    CHOSEN.store(
        match isa {
            Isa::Portable => PORTABLE,
            Isa::Avx2 => AVX2,
        },
        Ordering::Relaxed,
    );
}

/// Run the kernels with `isa` from now on (tests and benchmarks compare the copies).
/// A level the CPU lacks falls back to [`detected`]; returns the level in force.
pub fn force(isa: Isa) -> Isa {
    let isa = if isa == Isa::Avx2 && detected() != Isa::Avx2 {
        detected()
    } else {
        isa
    };
    store(isa);
    isa
}

/// Define a kernel compiled twice (portable and, on x86-64, AVX2 + FMA) that runs the
/// copy [`current`] names. Generic parameters are listed in brackets and bounded in a
/// bracketed `where` clause:
///
/// ```ignore
/// multiversion! {
///     pub fn sum[T](x: &[T]) -> f64 where [T: Elem] { x.iter().map(|v| v.f()).sum() }
/// }
/// ```
macro_rules! multiversion {
    (
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
                if $crate::exec::simd::current() == $crate::exec::simd::Isa::Avx2 {
                    // SAFETY: `current` names AVX2 only when the CPU has AVX2 and FMA.
                    return unsafe { avx2::<$($g),*>($($arg),*) };
                }
            }
            portable::<$($g),*>($($arg),*)
        }
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
        let best = force(Isa::Avx2);
        assert_eq!(best, detected());
        assert_eq!(current(), best);
    }
}
