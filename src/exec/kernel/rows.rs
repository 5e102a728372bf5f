//! [`Rows`]: a block of whole rows of a tile, each folded into a group of its own, as
//! the walk hands them to [`fold_rows`](super::fold_rows).

/// Whole rows of the innermost axis, end to end in the tile from `tile_offset`: row `i`
/// (`row_len` cells) folds into group `base + ids[i] · stride`.
#[derive(Debug, Clone, Copy)]
pub struct Rows<'a> {
    pub tile_offset: usize,
    pub row_len: usize,
    pub base: usize,
    pub stride: usize,
    pub ids: &'a [u32],
}

impl<'a> Rows<'a> {
    /// The cells of all the rows.
    pub fn len(&self) -> usize {
        self.ids.len() * self.row_len
    }

    /// True when the rows hold no cells.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The group of each row, in order.
    pub fn groups(&self) -> impl Iterator<Item = usize> + 'a {
        let (base, stride) = (self.base, self.stride);
        self.ids.iter().map(move |&id| base + id as usize * stride)
    }

    /// Call `f(g, row)` on each row's group and cells in `tile` (the tile walked), in
    /// order; nothing for rows of no cells.
    #[inline(always)]
    pub fn each<T>(&self, tile: &[T], mut f: impl FnMut(usize, &[T])) {
        if self.row_len == 0 {
            return;
        }
        let cells = &tile[self.tile_offset..self.tile_offset + self.len()];
        for (g, row) in self.groups().zip(cells.chunks_exact(self.row_len)) {
            f(g, row);
        }
    }
}
