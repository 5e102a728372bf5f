//! Byte access for the parsers: a bounds-checked little-endian cursor and the [`ReadAt`]
//! trait through which a file's bytes are reached (a whole slice, an mmap, or a source
//! that fetches ranges on demand).

use super::error::{FormatError, Result};
use std::borrow::Cow;

/// Random access to the bytes of one file.
///
/// The parsers only ever ask for ranges they have bounds-checked against [`ReadAt::len`].
pub trait ReadAt {
    /// Total length of the file in bytes.
    fn len(&self) -> u64;
    /// True when the file is empty.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Bytes `offset .. offset + len`; the caller guarantees the range lies in the file.
    fn read_at(&self, offset: u64, len: u64) -> Result<Cow<'_, [u8]>>;
}

impl ReadAt for [u8] {
    fn len(&self) -> u64 {
        <[u8]>::len(self) as u64
    }
    fn read_at(&self, offset: u64, len: u64) -> Result<Cow<'_, [u8]>> {
        let start = usize::try_from(offset).ok();
        let end = offset.checked_add(len).and_then(|e| usize::try_from(e).ok());
        match (start, end) {
            (Some(s), Some(e)) if e <= <[u8]>::len(self) => Ok(Cow::Borrowed(&self[s..e])),
            _ => Err(FormatError::Truncated {
                region: "read",
                offset,
                need: len,
                file_len: <[u8]>::len(self) as u64,
            }),
        }
    }
}

impl ReadAt for Vec<u8> {
    fn len(&self) -> u64 {
        self.as_slice().len() as u64
    }
    fn read_at(&self, offset: u64, len: u64) -> Result<Cow<'_, [u8]>> {
        self.as_slice().read_at(offset, len)
    }
}

/// Read `len` bytes at `offset` of `src`, failing with a message naming `region` when the
/// range does not lie inside the file.
pub(crate) fn read_region<'a, R: ReadAt + ?Sized>(
    src: &'a R,
    region: &'static str,
    offset: u64,
    len: u64,
) -> Result<Cow<'a, [u8]>> {
    let file_len = src.len();
    match offset.checked_add(len) {
        Some(end) if end <= file_len => src.read_at(offset, len),
        _ => Err(FormatError::Truncated {
            region,
            offset,
            need: len,
            file_len,
        }),
    }
}

/// A little-endian cursor over a slice that never reads past its end.
pub(crate) struct Le<'a> {
    buf: &'a [u8],
    pos: usize,
    /// File offset of `buf[0]`, for messages.
    base: u64,
    region: &'static str,
}

impl<'a> Le<'a> {
    pub(crate) fn new(buf: &'a [u8], base: u64, region: &'static str) -> Self {
        Le {
            buf,
            pos: 0,
            base,
            region,
        }
    }

    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    pub(crate) fn offset(&self) -> u64 {
        self.base + self.pos as u64
    }

    pub(crate) fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    pub(crate) fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if n > self.remaining() {
            return Err(FormatError::Truncated {
                region: self.region,
                offset: self.offset(),
                need: n as u64,
                file_len: self.base + self.buf.len() as u64,
            });
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    pub(crate) fn u16(&mut self) -> Result<u16> {
        let b = self.take(2)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }

    pub(crate) fn u32(&mut self) -> Result<u32> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub(crate) fn u64(&mut self) -> Result<u64> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }
}

/// Round up to a multiple of 8, or `None` on overflow.
pub fn align8(n: u64) -> Option<u64> {
    n.checked_add(7).map(|v| v & !7)
}
