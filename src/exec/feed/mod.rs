//! What a node reads: its [`ChunkFeed`] (the chunks of each partition), the payloads of
//! those chunks window by window ([`payload`]), tiles assembled from the chunks a task
//! spreads over (`assemble`), and the memory they hold, reserved in the session's pool
//! (`reservation`).

mod assemble;
mod chunk_feed;
pub mod payload;
mod reservation;

pub use chunk_feed::ChunkFeed;
pub(crate) use chunk_feed::chunk_node_methods;
pub(crate) use reservation::{PoolAccount, exhausted};
