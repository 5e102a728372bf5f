//! Payloads: the stored bytes of a partition's chunks, read window by window, and the one
//! place they become decoded tiles ([`decode_tile`]).

use super::ChunkFeed;
use super::metrics::FetchMetrics;
use crate::format::codec;
use crate::io::{FetchOptions, windows};
use crate::plan::{ChunkTask, TableModel};
use arrow::buffer::Buffer;
use bytes::Bytes;
use datafusion::common::Result;
use datafusion::error::DataFusionError;
use datafusion::execution::TaskContext;
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use std::borrow::Cow;
use std::ops::Range;
use std::sync::Arc;

/// A chunk task with its stored payload (`None` when the payload is not needed).
pub(crate) type Payload = (ChunkTask, Option<Bytes>);

/// The payloads of output `partition` of a node fed by `feed`: its chunk ids first, then
/// [`payload_stream`] over their tasks.
#[allow(clippy::too_many_arguments)]
pub(crate) fn feed_payloads(
    feed: ChunkFeed,
    partition: usize,
    context: Arc<TaskContext>,
    node: &'static str,
    table: Arc<TableModel>,
    reads_payload: bool,
    opts: FetchOptions,
    metrics: Option<FetchMetrics>,
) -> BoxStream<'static, Result<Payload>> {
    futures::stream::once(async move {
        let tasks = feed.tasks_of(partition, context, node).await?;
        Ok::<_, DataFusionError>(payload_stream(table, tasks, reads_payload, opts, metrics))
    })
    .try_flatten()
    .boxed()
}

/// The tasks of one partition with their stored payloads, in task order.
///
/// Local files hand out slices of the mmap. Object stores are read a window of
/// `opts.window` stored bytes at a time (coalesced range requests, at most
/// `opts.concurrency` in flight), with the next window fetched while the current one is
/// consumed: memory is bounded by two windows, never by the file size.
pub(crate) fn payload_stream(
    table: Arc<TableModel>,
    tasks: Vec<ChunkTask>,
    reads_payload: bool,
    opts: FetchOptions,
    metrics: Option<FetchMetrics>,
) -> BoxStream<'static, Result<Payload>> {
    if !reads_payload {
        return futures::stream::iter(tasks.into_iter().map(|t| Ok((t, None)))).boxed();
    }
    let (file, ds) = (&table.source.file, table.dataset());
    let spans: Vec<Range<u64>> = tasks
        .iter()
        .map(|t| {
            let (_, e) = file.chunk(ds, t.linear);
            e.payload_offset..e.payload_offset + e.stored_byte_len
        })
        .collect();
    let window = if table.source.is_remote() {
        opts.window
    } else {
        u64::MAX
    };
    let sizes: Vec<u64> = spans.iter().map(|s| s.end - s.start).collect();
    let groups = windows(&sizes, window);
    let tasks = Arc::new(tasks);
    let spans = Arc::new(spans);
    futures::stream::iter(groups)
        .map(move |g| {
            let (table, tasks, spans, metrics) = (table.clone(), tasks.clone(), spans.clone(), metrics.clone());
            async move {
                let fetched = table.source.fetch(&spans[g.clone()], &opts).await?;
                if let Some(m) = &metrics {
                    m.record(fetched.requests, fetched.bytes_fetched);
                }
                let items: Vec<Result<Payload>> = tasks[g]
                    .iter()
                    .cloned()
                    .zip(fetched.spans)
                    .map(|(t, b)| Ok((t, Some(b))))
                    .collect();
                Ok::<_, DataFusionError>(futures::stream::iter(items))
            }
        })
        .buffered(2)
        .try_flatten()
        .boxed()
}

/// The decoded tile of `task` from its stored bytes: the stored buffer itself when the
/// chunk is raw (zero-copy over the mmap), a new buffer when it is compressed.
/// The access plan refused tiles above the session's `tet.max_tile_bytes`; the decoder
/// holds to the same limit.
pub(crate) fn decode_tile(table: &TableModel, task: &ChunkTask, stored: Bytes) -> Result<Buffer> {
    let (row, entry) = table.source.file.chunk(table.dataset(), task.linear);
    let max = table.limits.max_tile_bytes;
    let decoded = match codec::decode(row, entry, &stored, max).map_err(|e| e.in_file(&table.source.location))? {
        Cow::Borrowed(_) => None,
        Cow::Owned(v) => Some(v),
    };
    Ok(match decoded {
        None => Buffer::from(stored),
        Some(v) => Buffer::from_vec(v),
    })
}
