//! Chunk codecs (the index's `codec` field): raw (0) and zstd (1). [`decode`] is the one
//! way stored bytes become a tile.

use super::error::{FormatError, Result};
use super::index::{ChunkEntry, Codec};
use std::borrow::Cow;

/// Decode the zstd frame of chunk index row `row` into `out`, which must be exactly
/// `entry.raw_byte_len` bytes. A frame that yields more or fewer bytes is an error; the
/// output never grows beyond `out`.
fn zstd_into(row: usize, entry: &ChunkEntry, stored: &[u8], out: &mut [u8]) -> Result<()> {
    if stored.len() as u64 != entry.stored_byte_len || out.len() as u64 != entry.raw_byte_len {
        return Err(FormatError::Decode {
            row,
            problem: format!(
                "got {} stored bytes and a {}-byte output for stored_byte_len {} / raw_byte_len {}",
                stored.len(),
                out.len(),
                entry.stored_byte_len,
                entry.raw_byte_len
            ),
        });
    }
    let n = zstd::bulk::decompress_to_buffer(stored, out).map_err(|e| FormatError::Decode {
        row,
        problem: format!(
            "zstd frame at payload offset {} ({} bytes) does not decode to {} bytes: {e}",
            entry.payload_offset, entry.stored_byte_len, entry.raw_byte_len
        ),
    })?;
    if n != out.len() {
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

/// Decode the stored bytes of chunk index row `row`: the one decode entry point.
///
/// Raw chunks are borrowed as they are (after checking their length); zstd chunks are
/// checked with [`precheck`] before a buffer of `raw_byte_len` bytes is allocated, then
/// decoded into it with [`zstd_into`].
pub fn decode<'a>(row: usize, entry: &ChunkEntry, stored: &'a [u8]) -> Result<Cow<'a, [u8]>> {
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
            // raw_byte_len was validated against the tile geometry at open time.
            precheck(row, entry, stored)?;
            let mut out = vec![0u8; entry.raw_byte_len as usize];
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
    fn zstd_round_trip_and_length_mismatch() {
        let raw: Vec<u8> = (0..4096u32).flat_map(|i| (i % 7).to_le_bytes()).collect();
        let z = zstd_compress(&raw, 3).unwrap();
        let mut out = vec![0u8; raw.len()];
        zstd_into(0, &entry(Codec::Zstd, raw.len() as u64, z.len() as u64), &z, &mut out).unwrap();
        assert_eq!(out, raw);
        // The frame holds more bytes than the row claims: refused without growing the buffer.
        let mut small = vec![0u8; raw.len() - 4];
        let e = zstd_into(
            3,
            &entry(Codec::Zstd, small.len() as u64, z.len() as u64),
            &z,
            &mut small,
        );
        assert!(e.unwrap_err().to_string().contains("chunk index row 3"));
        // And fewer.
        let mut big = vec![0u8; raw.len() + 4];
        assert!(zstd_into(0, &entry(Codec::Zstd, big.len() as u64, z.len() as u64), &z, &mut big).is_err());
        // Garbage.
        let garbage = vec![0xAAu8; 64];
        assert!(zstd_into(0, &entry(Codec::Zstd, 16, 64), &garbage, &mut [0u8; 16]).is_err());
    }
}
