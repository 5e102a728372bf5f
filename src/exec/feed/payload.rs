//! Payloads: the stored bytes of a partition's chunks, read window by window, and the one
//! place they become decoded tiles (`decode_tile`), handed out per task with the tile of
//! every value column read (`payload_stream`). What they allocate (decoded tiles, bytes
//! fetched from object stores) is reserved in the session's memory pool first
//! ([`PoolAccount`]).

use super::assemble::assemble;
use super::chunk_feed::ChunkFeed;
use super::reservation::{PoolAccount, held};
use crate::exec::metrics::{ReadMetrics, Stopwatch};
use crate::format::{Codec, codec};
use crate::io::{FetchOptions, TetSource, windows};
use crate::plan::{ChunkTask, TableModel};
use arrow::buffer::Buffer;
use bytes::Bytes;
use datafusion::common::{Result, internal_err};
use datafusion::error::DataFusionError;
use datafusion::execution::TaskContext;
use datafusion::physical_plan::metrics::Time;
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use std::borrow::Cow;
use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;

/// A chunk task with the decoded tile of each value column of its table (`None` for the
/// columns not read).
pub(crate) type Payload = (Arc<ChunkTask>, Vec<Option<Buffer>>);

/// What reading a partition's payloads records: chunks and bytes read, object store
/// traffic, and the timers decoding runs under.
#[derive(Debug, Clone)]
pub(crate) struct PayloadMetrics {
    pub read: ReadMetrics,
    pub decode: Vec<Time>,
}

/// What a partition reads of its tasks: the value columns `columns` (indices into
/// `table.values`) of `table`, fetched with `fetch`, timed into `metrics`.
pub(crate) struct PayloadRead {
    pub table: Arc<TableModel>,
    pub columns: Vec<usize>,
    pub fetch: FetchOptions,
    pub metrics: PayloadMetrics,
}

/// The payloads of output `partition` of a node (`node`, for messages) fed by `feed`: its
/// chunk ids first, then [`payload_stream`] over their tasks.
pub(crate) fn feed_payloads(
    feed: ChunkFeed,
    partition: usize,
    context: Arc<TaskContext>,
    node: &'static str,
    read: PayloadRead,
) -> BoxStream<'static, Result<Payload>> {
    futures::stream::once(async move {
        let memory = PoolAccount::new(context.memory_pool(), format!("{node}[{partition}] tiles"));
        let tasks = feed.tasks_of(partition, context, node).await?;
        Ok::<_, DataFusionError>(payload_stream(read, tasks, memory))
    })
    .try_flatten()
    .boxed()
}

/// The tasks of one partition with the decoded tiles of the value columns `columns`
/// (indices into `table.values`), in task order.
///
/// Each chunk is read and decoded once, in the order tasks first need it, and dropped
/// after the last task that needs it (in a table of datasets with different chunk grids,
/// several tasks share a chunk). Local files hand out slices of the mmap. Object stores
/// are read a window of `opts.window` stored bytes at a time (of whichever files the
/// table's columns come from; each file's spans in the window by coalesced range
/// requests, at most `opts.concurrency` in flight), with the next window fetched while
/// the current one is consumed: memory is bounded by two windows and the tiles still
/// needed, never by the file size.
///
/// The bytes fetched from object stores and the tiles decoded are reserved in `memory`
/// before they are allocated, each reservation held by its bytes (see
/// [`reservation`](super::reservation)); the stream fails with DataFusion's resources
/// exhausted error, naming the file and chunk, when the pool cannot hold one.
pub(crate) fn payload_stream(
    read: PayloadRead,
    tasks: Vec<Arc<ChunkTask>>,
    memory: PoolAccount,
) -> BoxStream<'static, Result<Payload>> {
    let PayloadRead {
        table,
        columns,
        fetch: opts,
        metrics,
    } = read;
    let memory = Arc::new(memory);
    let n = table.values.len();
    if columns.is_empty() {
        return futures::stream::iter(tasks.into_iter().map(move |t| Ok((t, vec![None; n])))).boxed();
    }
    // Every chunk to read, in first-use order; and, where tasks may share chunks, the last
    // task using each. A table of one dataset has one task per chunk: its chunks are read
    // in task order and handed out as they come.
    let (reads, last_use) = if table.values.len() == 1 {
        let mut reads: Vec<ChunkKey> = Vec::with_capacity(tasks.len() * columns.len());
        for t in &tasks {
            for &k in &columns {
                t.for_each_chunk(k, |linear, _| reads.push((t.file, k, linear)));
            }
        }
        (reads, None)
    } else {
        let mut reads: Vec<ChunkKey> = Vec::new();
        let mut last_use: HashMap<ChunkKey, usize> = HashMap::new();
        for (i, t) in tasks.iter().enumerate() {
            for &k in &columns {
                t.for_each_chunk(k, |linear, _| {
                    if last_use.insert((t.file, k, linear), i).is_none() {
                        reads.push((t.file, k, linear));
                    }
                });
            }
        }
        (reads, Some(last_use))
    };
    let spans: Vec<Range<u64>> = reads
        .iter()
        .map(|&(file, k, linear)| {
            let v = &table.member(file).values[k];
            let (_, e) = v.source.file.chunk(v.dataset(), linear);
            e.payload_offset..e.payload_offset + e.stored_byte_len
        })
        .collect();
    // The files this partition reads, each once: checked to be intact as it goes.
    let mut sources: Vec<Arc<TetSource>> = Vec::new();
    for &(file, k, _) in &reads {
        let source = &table.member(file).values[k].source;
        if !sources.iter().any(|s| Arc::ptr_eq(s, source)) {
            sources.push(source.clone());
        }
    }
    // Windows of consecutive reads (of any files) of at most `opts.window` stored bytes
    // when a remote file is read; within a window each file's spans are fetched by
    // coalesced requests, one file after the other, and handed out in read order. (A
    // table over two files reads their chunks alternately: a window per file run would
    // be one request per chunk.)
    let remote = sources.iter().any(|s| s.is_remote());
    let window = if remote { opts.window } else { u64::MAX };
    let sizes: Vec<u64> = spans.iter().map(|s| s.end - s.start).collect();
    let groups = windows(&sizes, window);
    let (reads, spans) = (Arc::new(reads), Arc::new(spans));
    let fetch = metrics.read.fetch.clone();
    let fetched = {
        let (table, reads, memory) = (table.clone(), reads.clone(), memory.clone());
        futures::stream::iter(groups)
            .map(move |g| {
                let (table, reads, spans, fetch) = (table.clone(), reads.clone(), spans.clone(), fetch.clone());
                let memory = memory.clone();
                async move {
                    let mut items: Vec<Option<Bytes>> = vec![None; g.len()];
                    let mut left: Vec<usize> = g.clone().collect();
                    while let Some(&first) = left.first() {
                        let source_of = |i: usize| {
                            let (file, k, _) = reads[i];
                            &table.member(file).values[k].source
                        };
                        let source = source_of(first);
                        let (of_file, rest): (Vec<usize>, Vec<usize>) =
                            left.iter().partition(|&&i| Arc::ptr_eq(source_of(i), source));
                        let wanted: Vec<Range<u64>> = of_file.iter().map(|&i| spans[i].clone()).collect();
                        // Fetched bytes are allocations (a local file's are slices of its
                        // mapping): reserved before the requests are sent.
                        let mut reserved = Vec::new();
                        if source.is_remote() {
                            for &i in &of_file {
                                let (file, k, linear) = reads[i];
                                let len = spans[i].end - spans[i].start;
                                let what = || {
                                    format!(
                                        "{len} payload bytes of chunk {linear} of {}",
                                        table.member(file).values[k].describe()
                                    )
                                };
                                reserved.push(memory.reserve(usize::try_from(len).unwrap_or(usize::MAX), what)?);
                            }
                        }
                        let got = source.fetch(&wanted, &opts).await?;
                        if let Some(m) = &fetch {
                            m.record(got.requests, got.bytes_fetched);
                        }
                        let mut reserved = reserved.into_iter();
                        for (i, bytes) in of_file.into_iter().zip(got.spans) {
                            items[i - g.start] = Some(match reserved.next() {
                                Some(r) => held(bytes, r),
                                None => bytes,
                            });
                        }
                        left = rest;
                    }
                    let items: Vec<Result<(usize, Bytes)>> = g
                        .zip(items)
                        .map(|(i, b)| {
                            b.map(|b| (i, b))
                                .ok_or_else(|| DataFusionError::Internal(format!("no bytes fetched for read {i}")))
                        })
                        .collect();
                    Ok::<_, DataFusionError>(futures::stream::iter(items))
                }
            })
            .buffered(2)
            .try_flatten()
            .boxed()
    };
    let state = TileKeeper {
        table,
        sources,
        reads,
        columns: columns.into(),
        last_use,
        tiles: HashMap::new(),
        metrics,
        memory,
    };
    futures::stream::unfold(
        (fetched, tasks.into_iter().enumerate(), state, false),
        |(mut fetched, mut tasks, mut state, failed)| async move {
            if failed {
                return None;
            }
            // The tiles handed out before were used by the time the next is asked for: a
            // local file truncated or rewritten under them fails the query here, before
            // anything is answered from the zeros or the other version it read.
            let next = tasks.next();
            if let Err(e) = state.check_intact(next.is_none()) {
                return Some((Err(e), (fetched, tasks, state, true)));
            }
            let (i, task) = next?;
            match state.tiles_for(i, &task, &mut fetched).await {
                Ok(tiles) => Some((Ok((task, tiles)), (fetched, tasks, state, false))),
                Err(e) => Some((Err(e), (fetched, tasks, state, true))),
            }
        },
    )
    .boxed()
}

/// A chunk read: (file of the table, value column, chunk id in that file's dataset).
pub(crate) type ChunkKey = (u32, usize, u64);

/// The decoded tiles a partition still needs, filled from the fetched payloads in order.
struct TileKeeper {
    table: Arc<TableModel>,
    /// The files read, each once.
    sources: Vec<Arc<TetSource>>,
    reads: Arc<Vec<ChunkKey>>,
    /// Shared, so that a task's walk over them may borrow the keeper mutably.
    columns: Arc<[usize]>,
    /// The last task using each chunk; `None` when each chunk is one task's (then the
    /// fetched payloads come in the order the tasks need them and nothing is kept).
    last_use: Option<HashMap<ChunkKey, usize>>,
    tiles: HashMap<ChunkKey, Buffer>,
    metrics: PayloadMetrics,
    /// Where decoded tiles are reserved.
    memory: Arc<PoolAccount>,
}

impl TileKeeper {
    /// `Ok` while the bytes of every file read are the file's; `at_end` also looks at each
    /// local file's path (one `stat` per file and partition).
    fn check_intact(&self, at_end: bool) -> Result<()> {
        for source in &self.sources {
            source.check_intact(at_end)?;
        }
        Ok(())
    }

    /// The tiles of task `i`: read (and decoded) up to those it needs, then dropped where
    /// this is their last task.
    async fn tiles_for(
        &mut self,
        i: usize,
        task: &ChunkTask,
        fetched: &mut BoxStream<'static, Result<(usize, Bytes)>>,
    ) -> Result<Vec<Option<Buffer>>> {
        let mut out = vec![None; self.table.values.len()];
        let columns = self.columns.clone();
        for &k in columns.iter() {
            if task.spread_of(k).is_some() {
                out[k] = Some(self.assembled(i, k, task, fetched).await?);
                continue;
            }
            let mut key = (task.file, k, task.linear);
            task.for_each_chunk(k, |linear, _| key.2 = linear);
            let Some(last_use) = &self.last_use else {
                let (read, tile) = self.next_tile(fetched, key).await?;
                if read != key {
                    return internal_err!(
                        "chunk {} of {} fetched out of order",
                        key.2,
                        self.table.file_of(task).values[k].describe()
                    );
                }
                out[k] = Some(tile);
                continue;
            };
            while !self.tiles.contains_key(&key) {
                let (read, tile) = self.next_tile(fetched, key).await?;
                self.tiles.insert(read, tile);
            }
            out[k] = self.tiles.get(&key).cloned();
            if last_use.get(&key) == Some(&i) {
                self.tiles.remove(&key);
            }
        }
        Ok(out)
    }

    /// The tile of value column `k` for task `i`, whose cells of it lie in several of its
    /// chunks: each read (and decoded) up to those needed, their cells copied into one
    /// tile of the task's geometry ([`assemble`]), and dropped where this is their last
    /// task.
    async fn assembled(
        &mut self,
        i: usize,
        k: usize,
        task: &ChunkTask,
        fetched: &mut BoxStream<'static, Result<(usize, Bytes)>>,
    ) -> Result<Buffer> {
        let mut chunks: Vec<u64> = Vec::new();
        task.for_each_chunk(k, |linear, _| chunks.push(linear));
        let file = task.file;
        for &linear in &chunks {
            while !self.tiles.contains_key(&(file, k, linear)) {
                let (read, tile) = self.next_tile(fetched, (file, k, linear)).await?;
                self.tiles.insert(read, tile);
            }
        }
        let tile = {
            let _timer = Stopwatch::start(&self.metrics.decode);
            assemble(&self.table, k, task, |linear| self.tiles.get(&(file, k, linear)))?
        };
        if let Some(last_use) = &self.last_use {
            for linear in chunks {
                if last_use.get(&(file, k, linear)) == Some(&i) {
                    self.tiles.remove(&(file, k, linear));
                }
            }
        }
        Ok(tile)
    }

    /// The next fetched payload, decoded: its read and tile. `wanted` names the chunk
    /// awaited, for the error when none is left.
    async fn next_tile(
        &self,
        fetched: &mut BoxStream<'static, Result<(usize, Bytes)>>,
        wanted: ChunkKey,
    ) -> Result<(ChunkKey, Buffer)> {
        let Some(next) = fetched.next().await else {
            return internal_err!(
                "no payload fetched for chunk {} of {}",
                wanted.2,
                self.table.member(wanted.0).values[wanted.1].describe()
            );
        };
        let (r, stored) = next?;
        let read = self.reads[r];
        self.metrics.read.chunk(stored.len() as u64);
        let _timer = Stopwatch::start(&self.metrics.decode);
        Ok((read, decode_tile(&self.table, read, stored, &self.memory)?))
    }
}

/// The decoded tile of chunk `linear` of value column `k` of `table` from its stored bytes:
/// the stored buffer itself when the chunk is raw (zero-copy over the mmap, or over the
/// fetched bytes, which hold their own reservation), a new buffer when it is compressed,
/// reserved in `memory` before it is allocated and returned to the pool when the last
/// array sharing it is dropped. The access plan refused tiles above the session's
/// `tet.max_tile_bytes`; the decoder holds to the same limit (a claim above it is refused
/// by the decoder, not reserved).
pub(crate) fn decode_tile(
    table: &TableModel,
    (file, k, linear): ChunkKey,
    stored: Bytes,
    memory: &PoolAccount,
) -> Result<Buffer> {
    let v = &table.member(file).values[k];
    let (row, entry) = v.source.file.chunk(v.dataset(), linear);
    let max = table.limits.max_tile_bytes;
    let reservation = match entry.codec {
        Codec::Zstd if entry.raw_byte_len <= max => {
            let len = usize::try_from(entry.raw_byte_len).unwrap_or(usize::MAX);
            let what = || format!("a decoded tile of {len} bytes (chunk {linear} of {})", v.describe());
            Some(memory.reserve(len, what)?)
        }
        _ => None,
    };
    let decoded = match codec::decode(row, entry, &stored, max).map_err(|e| e.in_file(&v.source.location))? {
        Cow::Borrowed(_) => None,
        Cow::Owned(v) => Some(v),
    };
    Ok(match (decoded, reservation) {
        (None, _) => Buffer::from(stored),
        (Some(v), Some(r)) => Buffer::from(held(v, r)),
        (Some(v), None) => Buffer::from_vec(v),
    })
}
