//! Memory the session's pool accounts for, owned by the bytes it accounts for.
//!
//! A decoded (zstd) tile or a span fetched from an object store is allocated per query,
//! up to `tet.max_tile_bytes` each, and lives as long as any Arrow array sharing it (a
//! scan's batch may be a slice of its tile, held downstream long after the scan moved on).
//! So each is reserved in DataFusion's memory pool before it is allocated, and the
//! reservation is owned by the bytes themselves ([`held`]): it returns to the pool when
//! the last array sharing them is dropped, wherever that happens. `-m` / a `RuntimeEnv`
//! memory limit then bounds them, and a query that would exceed it fails with
//! DataFusion's "resources exhausted" naming the file instead of being killed. Tiles that
//! are slices of a mapped local file are page cache, not allocations, and are not reserved.

use bytes::Bytes;
use datafusion::common::Result;
use datafusion::error::DataFusionError;
use datafusion::execution::memory_pool::{MemoryConsumer, MemoryPool, MemoryReservation};
use std::sync::Arc;

/// One partition's account in the session's memory pool for the tiles and payloads it
/// reads: one registered consumer, a reservation split off it per allocation.
#[derive(Debug)]
pub(crate) struct PoolAccount {
    base: MemoryReservation,
}

impl PoolAccount {
    /// An account in `pool` under the consumer name `name` (e.g. `TetScanExec[3] tiles`).
    pub(crate) fn new(pool: &Arc<dyn MemoryPool>, name: String) -> Self {
        PoolAccount {
            base: MemoryConsumer::new(name).register(pool),
        }
    }

    /// A reservation of `bytes` for `what` (a phrase naming the file and chunk), to be
    /// made before they are allocated; DataFusion's resources-exhausted error naming
    /// `what` when the pool cannot hold them.
    pub(crate) fn reserve(&self, bytes: usize, what: impl FnOnce() -> String) -> Result<MemoryReservation> {
        let r = self.base.new_empty();
        r.try_grow(bytes).map_err(|e| exhausted(e, what))?;
        Ok(r)
    }
}

/// `e` (of a memory pool's `try_grow`) saying what the memory was for: still a
/// `ResourcesExhausted` (so callers and DataFusion see the kind), its message led by
/// `what`.
pub(crate) fn exhausted(e: DataFusionError, what: impl FnOnce() -> String) -> DataFusionError {
    match e {
        DataFusionError::ResourcesExhausted(m) => DataFusionError::ResourcesExhausted(format!("{}: {m}", what())),
        e => e.context(what()),
    }
}

/// Bytes and the reservation accounting for them, dropped together.
struct Held<T> {
    bytes: T,
    _reservation: MemoryReservation,
}

impl<T: AsRef<[u8]>> AsRef<[u8]> for Held<T> {
    fn as_ref(&self) -> &[u8] {
        self.bytes.as_ref()
    }
}

/// `bytes` (not copied) owning `reservation`: the memory is returned to the pool when the
/// last `Bytes`, or Arrow buffer made of it, sharing them is dropped.
pub(crate) fn held<T: AsRef<[u8]> + Send + 'static>(bytes: T, reservation: MemoryReservation) -> Bytes {
    Bytes::from_owner(Held {
        bytes,
        _reservation: reservation,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::buffer::Buffer;
    use datafusion::execution::memory_pool::GreedyMemoryPool;

    #[test]
    fn reservations_live_as_long_as_the_bytes() {
        let pool: Arc<dyn MemoryPool> = Arc::new(GreedyMemoryPool::new(1000));
        let account = PoolAccount::new(&pool, "test".into());
        let r = account.reserve(600, || "first".into()).unwrap();
        let bytes = held(vec![7u8; 600], r);
        assert_eq!(pool.reserved(), 600);
        // A slice of an Arrow buffer made of them keeps them reserved.
        let slice = Buffer::from(bytes).slice(10);
        assert_eq!(slice.as_slice()[0], 7);
        let e = account.reserve(600, || "file.tet: chunk 1".into()).unwrap_err();
        assert!(matches!(e, DataFusionError::ResourcesExhausted(_)), "{e}");
        assert!(e.to_string().contains("file.tet: chunk 1"), "{e}");
        assert_eq!(pool.reserved(), 600);
        drop(slice);
        assert_eq!(pool.reserved(), 0);
        assert!(account.reserve(1000, || "again".into()).is_ok());
    }
}
