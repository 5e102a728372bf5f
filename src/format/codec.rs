//! Chunk codecs (the index's `codec` field): raw (0) and zstd (1). [`decode`] is the one
//! way stored bytes become a tile.

use super::error::{FormatError, Result};
use super::index::{ChunkEntry, Codec};
use std::borrow::Cow;

/// Decode the zstd frame of chunk index row `row` into `out`, an empty buffer with room
/// for `entry.raw_byte_len` bytes. A frame that yields more or fewer bytes is an error; the
/// output never grows beyond that room (and is never zero-filled first).
fn zstd_into(row: usize, entry: &ChunkEntry, stored: &[u8], out: &mut Vec<u8>) -> Result<()> {
    let room = out.capacity() as u64;
    if stored.len() as u64 != entry.stored_byte_len || !out.is_empty() || room < entry.raw_byte_len {
        return Err(FormatError::Decode {
            row,
            problem: format!(
                "got {} stored bytes and room for {room} bytes for stored_byte_len {} / raw_byte_len {}",
                stored.len(),
                entry.stored_byte_len,
                entry.raw_byte_len
            ),
        });
    }
    let decoded = zstd::bulk::Decompressor::new().and_then(|mut d| d.decompress_to_buffer(stored, out));
    let n = decoded.map_err(|e| FormatError::Decode {
        row,
        problem: format!(
            "zstd frame at payload offset {} ({} bytes) does not decode to {} bytes: {e}",
            entry.payload_offset, entry.stored_byte_len, entry.raw_byte_len
        ),
    })?;
    if n as u64 != entry.raw_byte_len {
        return Err(FormatError::Decode {
            row,
            problem: format!(
                "zstd frame at payload offset {} decoded to {n} bytes, expected raw_byte_len {}",
                entry.payload_offset, entry.raw_byte_len
            ),
        });
    }
    Ok(())
}

/// Check, before any buffer is sized from `raw_byte_len`, that a zstd frame's header is
/// readable and does not declare a different content size.
fn precheck(row: usize, entry: &ChunkEntry, stored: &[u8]) -> Result<()> {
    if entry.codec != Codec::Zstd {
        return Ok(());
    }
    match zstd::zstd_safe::get_frame_content_size(stored) {
        Ok(Some(n)) if n != entry.raw_byte_len => Err(FormatError::Decode {
            row,
            problem: format!(
                "zstd frame at payload offset {} declares {n} bytes, but raw_byte_len is {}",
                entry.payload_offset, entry.raw_byte_len
            ),
        }),
        Ok(_) => Ok(()),
        Err(_) => Err(FormatError::Decode {
            row,
            problem: format!(
                "zstd frame at payload offset {} ({} bytes) has no valid frame header",
                entry.payload_offset, entry.stored_byte_len
            ),
        }),
    }
}

/// The decoded length of chunk index row `row`, refused when it is above `max_decoded`
/// (or beyond memory addressing): the one check of a tile's claimed size.
pub(crate) fn decoded_len(row: usize, entry: &ChunkEntry, max_decoded: u64) -> Result<usize> {
    usize::try_from(entry.raw_byte_len)
        .ok()
        .filter(|_| entry.raw_byte_len <= max_decoded)
        .ok_or(FormatError::TooLarge {
            region: format!("chunk index row {row}"),
            what: "decoded tile",
            size: entry.raw_byte_len,
            limit: max_decoded,
        })
}

/// Decode the stored bytes of chunk index row `row`: the one decode entry point.
///
/// Raw chunks are borrowed as they are (after checking their length); zstd chunks are
/// refused when `raw_byte_len` is above `max_decoded` (`decoded_len`: nothing is
/// allocated from a claim above the caller's limit), checked with `precheck` before a
/// buffer of `raw_byte_len` bytes is reserved, then decoded into it with `zstd_into`,
/// which never writes past that buffer.
pub fn decode<'a>(row: usize, entry: &ChunkEntry, stored: &'a [u8], max_decoded: u64) -> Result<Cow<'a, [u8]>> {
    match entry.codec {
        Codec::Raw => {
            if stored.len() as u64 != entry.raw_byte_len || stored.len() as u64 != entry.stored_byte_len {
                return Err(FormatError::Decode {
                    row,
                    problem: format!(
                        "got {} stored bytes for stored_byte_len {} / raw_byte_len {}",
                        stored.len(),
                        entry.stored_byte_len,
                        entry.raw_byte_len
                    ),
                });
            }
            Ok(Cow::Borrowed(stored))
        }
        Codec::Zstd => {
            // raw_byte_len was validated against the tile geometry at open time; it may
            // still claim more than the caller will hold.
            let len = decoded_len(row, entry, max_decoded)?;
            precheck(row, entry, stored)?;
            let mut out = Vec::new();
            out.try_reserve_exact(len).map_err(|e| FormatError::Decode {
                row,
                problem: format!("no memory for a decoded tile of {len} bytes: {e}"),
            })?;
            zstd_into(row, entry, stored, &mut out)?;
            Ok(Cow::Owned(out))
        }
    }
}

/// Compress a tile with zstd at `level`.
pub fn zstd_compress(raw: &[u8], level: i32) -> Result<Vec<u8>> {
    zstd::bulk::compress(raw, level).map_err(|e| FormatError::Write(format!("zstd compression failed: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(codec: Codec, raw: u64, stored: u64) -> ChunkEntry {
        ChunkEntry {
            dataset_id: 0,
            coords: [0; 8],
            payload_offset: 100,
            raw_byte_len: raw,
            stored_byte_len: stored,
            codec,
        }
    }

    #[test]
    fn claims_above_the_limit_allocate_nothing() {
        let raw = vec![5u8; 4096];
        let z = zstd_compress(&raw, 3).unwrap();
        let e = entry(Codec::Zstd, raw.len() as u64, z.len() as u64);
        assert_eq!(decode(0, &e, &z, 4096).unwrap().as_ref(), raw.as_slice());
        let err = decode(2, &e, &z, 4095).unwrap_err().to_string();
        assert!(
            err.contains("chunk index row 2") && err.contains("4096") && err.contains("4095"),
            "{err}"
        );
        // Without a limit, a claim of 2^62 bytes that the frame header contradicts is
        // refused before the buffer is allocated.
        let huge = entry(Codec::Zstd, 1 << 62, z.len() as u64);
        assert!(matches!(
            decode(0, &huge, &z, u64::MAX),
            Err(FormatError::Decode { .. })
        ));
    }

    #[test]
    fn zstd_round_trip_and_length_mismatch() {
        let raw: Vec<u8> = (0..4096u32).flat_map(|i| (i % 7).to_le_bytes()).collect();
        let z = zstd_compress(&raw, 3).unwrap();
        let room = |n: usize| Vec::with_capacity(n);
        let mut out = room(raw.len());
        zstd_into(0, &entry(Codec::Zstd, raw.len() as u64, z.len() as u64), &z, &mut out).unwrap();
        assert_eq!(out, raw);
        // The frame holds more bytes than the row claims: refused without growing the buffer.
        let mut small = room(raw.len() - 4);
        let cap = small.capacity();
        let e = zstd_into(3, &entry(Codec::Zstd, cap as u64, z.len() as u64), &z, &mut small);
        assert!(e.unwrap_err().to_string().contains("chunk index row 3"));
        assert_eq!(small.capacity(), cap);
        // And fewer.
        let mut big = room(raw.len() + 4);
        let claim = big.capacity() as u64;
        assert!(zstd_into(0, &entry(Codec::Zstd, claim, z.len() as u64), &z, &mut big).is_err());
        // Garbage.
        let garbage = vec![0xAAu8; 64];
        assert!(zstd_into(0, &entry(Codec::Zstd, 16, 64), &garbage, &mut room(16)).is_err());
    }
}
