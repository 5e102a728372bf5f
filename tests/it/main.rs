//! The one integration-test binary: every module below is a group of tests.
//!
//! A counting global allocator records the largest single allocation made by each thread,
//! so tests over malformed files can assert that no length read from a file was trusted
//! for an allocation.

mod agg_differential;
mod analysis;
mod approx_percentiles;
mod archive;
#[cfg(all(feature = "ballista", feature = "cli"))]
mod ballista;
mod cf;
#[cfg(feature = "cli")]
mod cli;
mod common;
mod faulty_http;
mod format_fixtures;
mod format_malformed;
mod format_roundtrip;
mod format_upstream;
mod gcs;
#[cfg(feature = "cli")] // runs the tet-sql binary
mod hostile;
mod layers;
mod local_files;
mod maps;
mod memory;
mod multi;
mod order_stats;
mod remote;
mod servers;
mod sql_concurrency;
mod sql_differential;
mod sql_fixtures;
mod sql_schema;
mod value_keys;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

struct Counting;

thread_local! {
    static LARGEST: Cell<usize> = const { Cell::new(0) };
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

fn note(size: usize) {
    let _ = LARGEST.try_with(|l| {
        if size > l.get() {
            l.set(size)
        }
    });
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// Run `f` and return its result with the largest single allocation this thread made in it.
pub fn largest_allocation<T>(f: impl FnOnce() -> T) -> (T, usize) {
    LARGEST.with(|l| l.set(0));
    let out = f();
    (out, LARGEST.with(|l| l.get()))
}
