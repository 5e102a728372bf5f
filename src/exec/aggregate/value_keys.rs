//! A key of the value (`GROUP BY lat_band, floor(v)`): each distinct key found as the
//! fold meets it becomes a slot ([`KeySlots`]), and a cell folds into group `slot ·
//! count + g` of the axis keys' `count` groups ([`KeyedFold`]). Keys are told apart as
//! DataFusion's grouping tells floats apart: by their bits, -0.0 taken as 0.0.

use super::cell_walk::StoredRun;
use crate::exec::feed::exhausted;
use crate::exec::kernel::simd::multiversion;
use crate::exec::kernel::{Accumulators, Elem, Keep, Missing, Needs, fold_value};
use crate::exec::program::{BLOCK, Cells, Lane, Program, Scratch, Ty};
use crate::exec::walk::{GroupIndex, Segment, walk_segments};
use crate::format::{elements, with_dtype};
use crate::plan::{ChunkTask, KeyRounding, TableModel, ValueRanges};
use arrow::array::{ArrayRef, Float32Array, Float64Array};
use arrow::buffer::Buffer;
use datafusion::common::{Result, internal_err};
use datafusion::error::DataFusionError;
use datafusion::execution::memory_pool::MemoryReservation;
use std::collections::HashMap;
use std::sync::Arc;

/// Integral keys within a span of this many are found by a direct lookup; the others
/// (fractions, NaN, keys far apart) by a hash of their bits.
const WINDOW: i64 = 1 << 16;

/// The distinct keys of the value met so far, each a slot in the order first met.
#[derive(Debug)]
pub(super) struct KeySlots {
    /// The keys are Float32 (else Float64).
    f32: bool,
    /// Per slot, the key's bits in its type (`None`: the NULL key).
    keys: Vec<Option<u64>>,
    /// Slot + 1 of integral key `window_lo + i` at `window[i]` (0: none yet).
    window: Vec<u32>,
    window_lo: i64,
    /// An integral key went to `others`: the window no longer grows, so that a key is
    /// always found where it was put.
    frozen: bool,
    others: HashMap<u64, u32>,
    null: Option<u32>,
}

impl KeySlots {
    /// No keys yet, of type Float32 (`f32`) or Float64.
    pub(super) fn new(f32: bool) -> Self {
        KeySlots {
            f32,
            keys: Vec::new(),
            window: Vec::new(),
            window_lo: 0,
            frozen: false,
            others: HashMap::new(),
            null: None,
        }
    }

    /// How many keys.
    pub(super) fn len(&self) -> usize {
        self.keys.len()
    }

    /// Bytes held.
    pub(super) fn bytes(&self) -> usize {
        self.keys.capacity() * size_of::<Option<u64>>()
            + self.window.capacity() * size_of::<u32>()
            + self.others.capacity() * (size_of::<(u64, u32)>() + 1)
    }

    /// The bits of key `x` in the keys' type, -0.0 as 0.0 (`x` is of that type).
    #[inline(always)]
    fn bits(&self, x: f64) -> u64 {
        let bits = match (self.f32, x.is_nan()) {
            (false, _) => x.to_bits(),
            (true, false) => (x as f32).to_bits() as u64,
            // A NaN narrowed by its bits, as widening it kept them (its sign included,
            // which a cast need not keep).
            (true, true) => {
                let b = x.to_bits();
                (((b >> 32) as u32 & 0x8000_0000) | 0x7f80_0000 | ((b >> 29) as u32 & 0x7f_ffff)) as u64
            }
        };
        let sign = if self.f32 { 1u64 << 31 } else { 1u64 << 63 };
        if bits == sign { 0 } else { bits }
    }

    /// The slot of integral key `x` when the window has it.
    #[inline(always)]
    fn in_window(&self, x: f64) -> Option<usize> {
        let at = (x as i64).wrapping_sub(self.window_lo);
        // A NaN converts to 0 and a key out of range saturates: neither equals itself
        // converted back, and the window's keys are within ±2^62.
        let hit = (x as i64) as f64 == x && (at as u64) < self.window.len() as u64;
        match hit {
            true => (self.window[at as usize] as usize).checked_sub(1),
            false => None,
        }
    }

    /// The slot of the key of bits `bits` (a value of the keys' type, widened to `x`).
    #[inline(always)]
    fn slot(&mut self, x: f64, bits: u64) -> usize {
        // Integral: equal to its (saturating) conversion, within ±2^62 so that spans of
        // keys do not overflow; NaN converts to 0, which it does not equal.
        let i = x as i64;
        let int = (i as f64 == x && x.abs() < (1u64 << 62) as f64).then_some(i);
        if let Some(i) = int {
            let at = i.wrapping_sub(self.window_lo);
            if (0..self.window.len() as i64).contains(&at) && self.window[at as usize] != 0 {
                return self.window[at as usize] as usize - 1;
            }
            if self.widen(i) {
                let s = self.push(Some(bits));
                self.window[(i - self.window_lo) as usize] = s as u32 + 1;
                return s;
            }
            self.frozen = true;
        }
        match self.others.get(&bits) {
            Some(&s) => s as usize,
            None => {
                let s = self.push(Some(bits));
                self.others.insert(bits, s as u32);
                s
            }
        }
    }

    /// The slot of the NULL key.
    fn null_slot(&mut self) -> usize {
        match self.null {
            Some(s) => s as usize,
            None => {
                let s = self.push(None);
                self.null = Some(s as u32);
                s
            }
        }
    }

    /// The slot of a key of another set (`bits`, `None`: NULL), added when new.
    fn slot_of(&mut self, bits: Option<u64>) -> usize {
        match bits {
            None => self.null_slot(),
            Some(b) => {
                let x = if self.f32 {
                    f32::from_bits(b as u32) as f64
                } else {
                    f64::from_bits(b)
                };
                self.slot(x, b)
            }
        }
    }

    fn push(&mut self, key: Option<u64>) -> usize {
        self.keys.push(key);
        self.keys.len() - 1
    }

    /// Make the window cover integral key `i` if it may; false when it may not.
    fn widen(&mut self, i: i64) -> bool {
        if self.frozen {
            return false;
        }
        if self.window.is_empty() {
            self.window_lo = i.saturating_sub(64);
            self.window = vec![0; 128];
            return true;
        }
        let (lo, hi) = (self.window_lo, self.window_lo + self.window.len() as i64);
        let (lo2, hi2) = (lo.min(i), hi.max(i + 1));
        if hi2 - lo2 > WINDOW {
            return false;
        }
        // Grow by at least the span itself, so that keys met one by one cost few copies.
        let span = (hi2 - lo2).max(2 * (hi - lo)).min(WINDOW);
        let (lo3, hi3) = if i < lo { (hi2 - span, hi2) } else { (lo2, lo2 + span) };
        let mut window = vec![0u32; (hi3 - lo3) as usize];
        window[(lo - lo3) as usize..(hi - lo3) as usize].copy_from_slice(&self.window);
        self.window = window;
        self.window_lo = lo3;
        true
    }

    /// The keys of `groups` (group `g` has the key of slot `g / count`).
    pub(super) fn column(&self, groups: &[usize], count: usize) -> ArrayRef {
        let key = |g: &usize| self.keys[g / count.max(1)];
        if self.f32 {
            Arc::new(Float32Array::from_iter(
                groups.iter().map(|g| key(g).map(|b| f32::from_bits(b as u32))),
            ))
        } else {
            Arc::new(Float64Array::from_iter(
                groups.iter().map(|g| key(g).map(f64::from_bits)),
            ))
        }
    }
}

/// A fold grouped by a key of the value as well as by the axis keys: its keys, and the
/// bytes of them and of the accumulators reserved in the session's pool.
#[derive(Debug)]
pub(super) struct KeyedFold {
    pub(super) slots: KeySlots,
    /// The groups of the axis keys.
    count: usize,
    float: bool,
    reserved: usize,
}

/// What a keyed fold reads of its plan: the key's program and rounding, and the ranges of
/// stored values that keep a row.
#[derive(Debug, Clone, Copy)]
pub(super) struct KeyedInput<'a> {
    pub(super) program: &'a Program,
    pub(super) rounding: KeyRounding,
    pub(super) ranges: &'a ValueRanges,
}

impl KeyedFold {
    /// No keys yet, over the `count` groups of the axis keys; the accumulators fold a
    /// float (`float`) or integer value; the keys are the type of `program`.
    pub(super) fn new(program: &Program, count: usize, float: bool) -> Self {
        KeyedFold {
            slots: KeySlots::new(program.ty() == Ty::F32),
            count: count.max(1),
            float,
            reserved: 0,
        }
    }

    /// The groups of the axis keys.
    pub(super) fn count(&self) -> usize {
        self.count
    }

    /// Fold one task of a table of one dataset (its tile `tile`) into `acc`, every
    /// group a key it meets adds reserved in `reservation` before it is allocated.
    pub(super) fn task(
        &mut self,
        (table, gi, task): (&TableModel, &GroupIndex, &Arc<ChunkTask>),
        input: KeyedInput,
        acc: &mut Accumulators,
        tile: Option<&Buffer>,
        reservation: &MemoryReservation,
    ) -> Result<()> {
        let Some(tile) = tile else {
            return internal_err!("TetAggregateExec: a key of v without its tile");
        };
        let start = table.tile_start(task);
        let mut failed: Option<DataFusionError> = None;
        with_dtype!(table.dataset().dtype(), T => {
            let keep = Keep {
                missing: Missing::<T>::of(&table.value().missing),
                range: input.ranges.of(0),
            };
            let t = elements::<T>(tile);
            let mut scratch = input.program.scratch();
            let mut at = vec![0u32; BLOCK];
            walk_segments(gi, task, &start, None, |s| {
                if failed.is_some() {
                    return;
                }
                let run = StoredRun {
                    x: &t[s.tile_offset..s.tile_offset + s.len],
                    packing: table.value().packing,
                    keep: &keep,
                };
                let mut folding = Folding { keyed: &mut *self, acc: &mut *acc, reservation };
                let done = match input.program.eval_ty() {
                    Ty::F32 => keyed_segment::<T, f32>(&mut folding, &s, &run, input, &mut scratch, &mut at),
                    Ty::F64 => keyed_segment::<T, f64>(&mut folding, &s, &run, input, &mut scratch, &mut at),
                };
                if let Err(e) = done {
                    failed = Some(e);
                }
            });
        });
        match failed {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Merge another partition's keyed fold (`other`, its accumulators `b`) into this one
    /// (`a`): its keys mapped to this fold's slots, added when new.
    pub(super) fn merge(&mut self, a: &mut Accumulators, other: &KeyedFold, b: &Accumulators) {
        let to: Vec<usize> = other.slots.keys.iter().map(|&k| self.slots.slot_of(k)).collect();
        let count = self.count;
        a.grow(self.slots.len() * count, self.float);
        a.merge_mapped(b, |g| to[g / count] * count + g % count);
    }

    /// Keep the reservation at the bytes of `acc` and the keys, plus `more`.
    fn reserve(&mut self, acc: &Accumulators, more: usize, reservation: &MemoryReservation) -> Result<()> {
        let want = acc.held_bytes().saturating_add(self.slots.bytes()).saturating_add(more);
        if want > self.reserved {
            reservation.try_grow(want - self.reserved).map_err(|e| {
                exhausted(e, || {
                    format!(
                        "{} groups of {} keys of the value",
                        self.count.saturating_mul(self.slots.len() + 1),
                        self.slots.len() + 1
                    )
                })
            })?;
            self.reserved = want;
        }
        Ok(())
    }
}

/// A keyed fold, its accumulators and the pool, while a task is folded.
struct Folding<'a> {
    keyed: &'a mut KeyedFold,
    acc: &'a mut Accumulators,
    reservation: &'a MemoryReservation,
}

impl Folding<'_> {
    /// Make the accumulators hold the groups of slot `slot`, added (and reserved) when
    /// the slot is new.
    #[inline(always)]
    fn cover(&mut self, slot: usize) -> Result<()> {
        if self.acc.len() <= slot * self.keyed.count {
            self.add_groups(slot)?;
        }
        Ok(())
    }

    /// Add the groups of slot `slot` (and of every slot before it), reserved first.
    #[cold]
    fn add_groups(&mut self, slot: usize) -> Result<()> {
        let count = self.keyed.count;
        let groups = (slot + 1).max(self.keyed.slots.len()) * count;
        let per_group = Accumulators::bytes(1, self.acc.needs, self.keyed.float);
        let more = (groups - self.acc.len()).saturating_mul(per_group);
        self.keyed.reserve(self.acc, more, self.reservation)?;
        self.acc.grow(groups, self.keyed.float);
        Ok(())
    }
}

multiversion! {
    /// Fold segment `s` (its stored values `run`): each kept cell into the group of its
    /// key, each row whose value is missing into the group of the NULL key.
    fn keyed_segment[T, F](
        folding: &mut Folding<'_>,
        s: &Segment<'_>,
        run: &StoredRun<'_, T>,
        input: KeyedInput<'_>,
        scratch: &mut Scratch,
        at: &mut [u32],
    ) -> Result<()> where [T: Elem, F: Lane + Elem] = keyed_segment_body;
}

/// The body of [`keyed_segment`], compiled into each of its copies.
#[inline(always)]
fn keyed_segment_body<T: Elem, F: Lane + Elem>(
    folding: &mut Folding<'_>,
    s: &Segment<'_>,
    run: &StoredRun<'_, T>,
    input: KeyedInput<'_>,
    scratch: &mut Scratch,
    at: &mut [u32],
) -> Result<()> {
    let plain = run.plain();
    let mut mask = [0u8; BLOCK];
    let mut found = [0usize; BLOCK];
    for b in 0..s.len.div_ceil(BLOCK) {
        let from = b * BLOCK;
        let n = BLOCK.min(s.len - from);
        let m = if plain { n } else { run.kept(from, n, at) };
        let kept = (m < n).then_some(&at[..m]);
        let (y, _) = input.program.eval::<StoredRun<T>, F>(run, from, kept, m, scratch);
        // The slots of the block's kept cells first (by the window where it has them),
        // then their values folded: the accumulators grow at most once per block.
        let slots = &mut folding.keyed.slots;
        let mut top = 0usize;
        for (j, &v) in y.iter().enumerate() {
            let x = round(v.f(), input.rounding);
            let slot = match slots.in_window(x) {
                Some(slot) => slot,
                None => slots.slot(x, slots.bits(x)),
            };
            top = top.max(slot);
            found[j] = slot;
        }
        if m > 0 {
            folding.cover(top)?;
        }
        let count = folding.keyed.count;
        let acc = &mut *folding.acc;
        let group = |j: usize| {
            let i = kept.map_or(j, |a| a[j] as usize);
            (slot_group(found[j], count, s, from + i), i)
        };
        if acc.needs == Needs::default() {
            // Counts alone: neighbouring cells share their group mostly (a histogram's
            // bins), so a run of one group is counted once.
            let (mut last, mut run_len) = (usize::MAX, 0u64);
            for j in 0..m {
                let (g, _) = group(j);
                if g != last {
                    if run_len > 0 {
                        acc.add_sum(last, run_len, run_len, 0.0);
                    }
                    (last, run_len) = (g, 0);
                }
                run_len += 1;
            }
            if run_len > 0 {
                acc.add_sum(last, run_len, run_len, 0.0);
            }
        } else {
            for j in 0..m {
                let (g, i) = group(j);
                acc.cells[g] += 1;
                fold_value(acc, g, run.x[from + i]);
            }
        }
        // Without a range every cell is a row: the missing ones have the NULL key.
        if m < n && !run.ranged() {
            run.mask(from, n, &mut mask[..n]);
            let null = folding.keyed.slots.null_slot();
            folding.cover(null)?;
            let count = folding.keyed.count;
            for (i, _) in mask[..n].iter().enumerate().filter(|(_, k)| **k == 0) {
                folding.acc.cells[slot_group(null, count, s, from + i)] += 1;
            }
        }
    }
    Ok(())
}

/// The group of a cell of slot `slot` at the segment's cell `i`, of `count` axis groups.
#[inline(always)]
fn slot_group(slot: usize, count: usize, s: &Segment, i: usize) -> usize {
    slot * count + s.target.group(i)
}

/// `x` rounded as the key's SQL function rounds it (in the key's type: exact in f64 for
/// an f32 widened).
#[inline(always)]
fn round(x: f64, rounding: KeyRounding) -> f64 {
    match rounding {
        KeyRounding::None => x,
        KeyRounding::Floor => x.floor(),
        KeyRounding::Ceil => x.ceil(),
        KeyRounding::Trunc => x.trunc(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Slots found by the window and the hash alike equal a brute force keyed by the
    /// canonical bits: keys met in both directions, far apart (the window frozen), -0.0
    /// with 0.0, NaNs of both signs apart, fractions, infinities and NULL.
    #[test]
    fn slots_are_one_per_distinct_key() {
        for f32 in [false, true] {
            let mut slots = KeySlots::new(f32);
            let mut want: HashMap<Option<u64>, usize> = HashMap::new();
            let mut keys: Vec<Option<f64>> = vec![Some(5.0), Some(-0.0), Some(0.0), None, Some(f64::NAN)];
            keys.push(Some(-f64::NAN));
            keys.extend((0..300).map(|i| Some(((i * 7919) % 601) as f64 - 300.0)));
            keys.extend([
                Some(-1e6),
                Some(2.5),
                Some(1e6),
                Some(f64::INFINITY),
                Some(-3.0e9),
                None,
            ]);
            keys.extend((0..300).map(|i| Some(((i * 104_729) % 90_001) as f64 - 45_000.0)));
            keys.extend((0..50).map(|i| Some(i as f64 * 0.25)));
            for round in 0..2 {
                for &k in &keys {
                    let got = match k {
                        None => slots.null_slot(),
                        Some(x) => {
                            let x = if f32 { x as f32 as f64 } else { x };
                            slots.slot(x, slots.bits(x))
                        }
                    };
                    let bits = k.map(|x| slots.bits(if f32 { x as f32 as f64 } else { x }));
                    let n = want.len();
                    let expect = *want.entry(bits).or_insert(n);
                    assert_eq!(got, expect, "{k:?} (f32 {f32}, round {round})");
                    assert_eq!(slots.keys[got], bits);
                }
            }
            assert_eq!(slots.len(), want.len());
            assert!(slots.frozen && slots.window.len() as i64 <= WINDOW);
            // -0.0 and 0.0 are one key; the two NaNs are two.
            assert_eq!(slots.slot(-0.0, slots.bits(-0.0)), slots.slot(0.0, slots.bits(0.0)));
            assert_ne!(slots.bits(f64::NAN), slots.bits(-f64::NAN));
        }
    }
}
