//! Memory maps that survive their file being truncated under them.
//!
//! Another process may truncate a file we have mapped (`cp new.tet old.tet` truncates the
//! target, then writes it). A read of a page past the file's new end raises SIGBUS,
//! whose default action kills the process, and every query it runs with it. Reading with
//! `pread` instead would cost a copy of every payload byte; a map costs nothing until
//! the file is truncated. So on Linux each map is registered here, and a SIGBUS handler
//! (installed once, on the first map) that finds the faulting address inside a
//! registered map puts anonymous zero pages over the rest of that map, from the faulting
//! page on, counts a fault on it and returns: the read that faulted runs again and reads
//! zeros. Readers look at the count after using the bytes ([`Mapped::faulted`]) and turn
//! a fault into an error naming the file, so the zeros never reach an answer. Any other
//! SIGBUS goes to the handler installed before ours (Rust's stack-overflow handler, or
//! the default action, which ends the process as before).
//!
//! The registry is a list of fixed blocks of slots, grown by appending a block and never
//! shrunk, so the handler reads it with atomic loads only, without locks or allocation.

use memmap2::Mmap;

/// A read-only map of a file, registered for the handler while it lives.
#[derive(Debug)]
pub struct Mapped {
    /// Declared before `map`: unregistered first, so no fault inside a range the kernel
    /// may hand to another map is taken for ours.
    slot: Option<&'static guard::Slot>,
    map: Mmap,
}

impl Mapped {
    /// Map `file` read-only and register the map.
    pub fn map(file: &std::fs::File) -> std::io::Result<Mapped> {
        // SAFETY: the map is read-only. A file truncated under it raises SIGBUS on reads
        // past its new end, which the handler of this module turns into zero pages and a
        // fault count that every reader checks (see the module docs).
        let map = unsafe { Mmap::map(file)? };
        let slot = guard::register(map.as_ptr() as usize, map.len());
        Ok(Mapped { slot, map })
    }

    /// Whether a read of this map faulted (the file was truncated under it): its bytes
    /// from the fault on read as zeros.
    pub fn faulted(&self) -> bool {
        self.slot.is_some_and(guard::Slot::faulted)
    }
}

impl Drop for Mapped {
    fn drop(&mut self) {
        if let Some(slot) = self.slot.take() {
            guard::release(slot);
        }
    }
}

impl AsRef<[u8]> for Mapped {
    fn as_ref(&self) -> &[u8] {
        &self.map
    }
}

#[cfg(target_os = "linux")]
mod guard {
    use std::sync::Once;
    use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};

    /// One registered map: `start..end` (end rounded up to a page), and its faults.
    /// Free when `end` is 0.
    #[derive(Debug)]
    pub struct Slot {
        start: AtomicUsize,
        end: AtomicUsize,
        faults: AtomicU64,
    }

    impl Slot {
        pub fn faulted(&self) -> bool {
            self.faults.load(Ordering::Acquire) > 0
        }
    }

    const SLOTS: usize = 256;

    struct Block {
        slots: [Slot; SLOTS],
        next: AtomicPtr<Block>,
    }

    static FIRST: AtomicPtr<Block> = AtomicPtr::new(std::ptr::null_mut());
    static PAGE: AtomicUsize = AtomicUsize::new(4096);
    static INSTALL: Once = Once::new();
    /// Whether our handler is in place (installing it can fail).
    static INSTALLED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    /// The handler installed before ours, to which other faults go.
    static mut PREVIOUS: std::mem::MaybeUninit<libc::sigaction> = std::mem::MaybeUninit::uninit();

    /// Register `start..start + len`; `None` when the handler could not be installed (the
    /// map then works as an unguarded one).
    pub fn register(start: usize, len: usize) -> Option<&'static Slot> {
        INSTALL.call_once(install);
        if !INSTALLED.load(Ordering::Acquire) || len == 0 {
            return None;
        }
        let page = PAGE.load(Ordering::Relaxed);
        let end = start.checked_add(len)?.checked_next_multiple_of(page)?;
        let mut link = &FIRST;
        loop {
            let mut block = link.load(Ordering::Acquire);
            if block.is_null() {
                let new = Box::into_raw(Box::new(Block {
                    slots: std::array::from_fn(|_| Slot {
                        start: AtomicUsize::new(0),
                        end: AtomicUsize::new(0),
                        faults: AtomicU64::new(0),
                    }),
                    next: AtomicPtr::new(std::ptr::null_mut()),
                }));
                block = match link.compare_exchange(std::ptr::null_mut(), new, Ordering::AcqRel, Ordering::Acquire) {
                    Ok(_) => new,
                    Err(other) => {
                        // SAFETY: `new` was never shared.
                        drop(unsafe { Box::from_raw(new) });
                        other
                    }
                };
            }
            // SAFETY: blocks are leaked on purpose and never freed.
            let block: &'static Block = unsafe { &*block };
            for slot in &block.slots {
                // Claimed with an `end` of 1: `start..1` holds no address of a map.
                if slot
                    .end
                    .compare_exchange(0, 1, Ordering::AcqRel, Ordering::Relaxed)
                    .is_ok()
                {
                    slot.faults.store(0, Ordering::Relaxed);
                    slot.start.store(start, Ordering::Release);
                    slot.end.store(end, Ordering::Release);
                    return Some(slot);
                }
            }
            link = &block.next;
        }
    }

    pub fn release(slot: &'static Slot) {
        slot.start.store(0, Ordering::Release);
        slot.end.store(0, Ordering::Release);
    }

    fn install() {
        // SAFETY: plain libc calls; `PREVIOUS` is written once here, before the handler
        // that reads it is installed.
        unsafe {
            let page = libc::sysconf(libc::_SC_PAGESIZE);
            if page > 0 {
                PAGE.store(page as usize, Ordering::Relaxed);
            }
            let mut ours: libc::sigaction = std::mem::zeroed();
            ours.sa_sigaction = on_sigbus as *const () as libc::sighandler_t;
            ours.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
            libc::sigemptyset(&mut ours.sa_mask);
            let previous = &raw mut PREVIOUS;
            if libc::sigaction(libc::SIGBUS, &ours, (*previous).as_mut_ptr()) == 0 {
                INSTALLED.store(true, Ordering::Release);
            }
        }
    }

    /// The registered slot holding `addr`.
    fn find(addr: usize) -> Option<&'static Slot> {
        let mut block = FIRST.load(Ordering::Acquire);
        while !block.is_null() {
            // SAFETY: blocks are never freed.
            let b: &'static Block = unsafe { &*block };
            for slot in &b.slots {
                let end = slot.end.load(Ordering::Acquire);
                if end > 1 && slot.start.load(Ordering::Acquire) <= addr && addr < end {
                    return Some(slot);
                }
            }
            block = b.next.load(Ordering::Acquire);
        }
        None
    }

    extern "C" fn on_sigbus(sig: libc::c_int, info: *mut libc::siginfo_t, context: *mut libc::c_void) {
        // SAFETY: the kernel hands a valid siginfo for SIGBUS; only async-signal-safe
        // calls follow (atomics, mmap, sigaction).
        unsafe {
            let addr = (*info).si_addr() as usize;
            if let Some(slot) = find(addr) {
                let page = PAGE.load(Ordering::Relaxed);
                let from = addr & !(page - 1);
                let end = slot.end.load(Ordering::Acquire);
                if end > from {
                    let zeros = libc::mmap(
                        from as *mut libc::c_void,
                        end - from,
                        libc::PROT_READ,
                        libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                        -1,
                        0,
                    );
                    if zeros != libc::MAP_FAILED {
                        slot.faults.fetch_add(1, Ordering::AcqRel);
                        return;
                    }
                }
            }
            let previous = &*(&raw const PREVIOUS).cast::<libc::sigaction>();
            let handler = previous.sa_sigaction;
            if handler == libc::SIG_DFL || handler == libc::SIG_IGN {
                // Restore the default action; the faulting read runs again and ends the
                // process as it would have without us.
                let mut default: libc::sigaction = std::mem::zeroed();
                default.sa_sigaction = libc::SIG_DFL;
                libc::sigaction(sig, &default, std::ptr::null_mut());
            } else if previous.sa_flags & libc::SA_SIGINFO != 0 {
                let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                    std::mem::transmute(handler);
                f(sig, info, context);
            } else {
                let f: extern "C" fn(libc::c_int) = std::mem::transmute(handler);
                f(sig);
            }
        }
    }
}

#[cfg(not(target_os = "linux"))]
mod guard {
    /// Without the handler (other platforms), maps are not guarded.
    #[derive(Debug)]
    pub enum Slot {}

    impl Slot {
        pub fn faulted(&self) -> bool {
            match *self {}
        }
    }

    pub fn register(_start: usize, _len: usize) -> Option<&'static Slot> {
        None
    }

    pub fn release(_slot: &'static Slot) {}
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn a_map_truncated_under_its_reader_reads_zeros_and_says_so() {
        let dir = std::env::temp_dir().join(format!("tet-mapped-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("shrinks.bin");
        let page = 4096;
        let mut f = std::fs::File::create(&path).unwrap();
        f.write_all(&vec![7u8; 8 * page]).unwrap();
        drop(f);
        let file = std::fs::File::open(&path).unwrap();
        let mapped = Mapped::map(&file).unwrap();
        let other = Mapped::map(&file).unwrap();
        assert_eq!(mapped.as_ref()[5 * page], 7);
        assert!(!mapped.faulted());
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(2 * page as u64)
            .unwrap();
        // Past the new end: zeros and a fault, not SIGBUS; before it, the bytes.
        let bytes = mapped.as_ref();
        assert_eq!(std::hint::black_box(bytes[6 * page + 1]), 0);
        assert_eq!(bytes[page], 7);
        assert!(mapped.faulted());
        assert!(!other.faulted(), "a fault counts on its own map only");
        assert_eq!(std::hint::black_box(other.as_ref()[3 * page]), 0);
        assert!(other.faulted());
        drop((mapped, other));
        // A slot freed is reused clean.
        let again = Mapped::map(&std::fs::File::open(&path).unwrap()).unwrap();
        assert!(!again.faulted());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
