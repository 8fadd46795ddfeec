//! Raw tiles of operands whose rows do not start on 16-byte boundaries, copied 16 bytes at a
//! time: the copies of [`specialized`](crate::production::specialized)'s general entry (an `A`
//! or `B` whose leading dimension, `k` or `n` is not a multiple of 4 floats, or whose pointer is
//! not 16-byte aligned).
//!
//! Why: copied 4 bytes at a time (`warpgroup`'s `RawCopy`), a tile takes four times the
//! `cp.async` of 16-byte copies, all through L1 (`.ca`: only 16-byte copies may bypass it), and
//! `specialized`'s producers fall behind its tensor cores.
//!
//! How: a row segment of a tile (of `A`, 32 floats along `K`; of `B`, 128 along `N`) that
//! starts `o` floats past a 16-byte boundary ([`misalignment`]) lies in the aligned 16-byte
//! pieces of memory from that boundary on. Piece 0 holds the segment's first `4 - o` values
//! after `o` that belong to something else (another row, or memory before the matrix), so its
//! values are copied one by one, 4 bytes each, and only those of the segment. Pieces 1, 2, ...
//! are 16-byte copies that read only the values inside the segment and the matrix (the copy's
//! source size) and zero-fill the rest. Shared memory thus holds value `j` of the segment at
//! `o + j` of its raw row, the layout of the 16-byte copies shifted by `o`:
//! - `B`'s split reads the raw tile one value at a time, at that offset;
//! - `A`'s rows, which the consumers read 16 bytes at a time, are moved back by `o` in place
//!   ([`align_a_rows`](device_code::align_a_rows)) before the tile is handed over.
//!
//! Rows 4 apart start equally far from a boundary (they are `4 ld` floats apart), and so do a
//! row's segments in every tile (`A`'s tiles are 32 columns apart, `B`'s 32 rows). Each thread
//! copies rows 4 apart, so it has one offset per role.
//!
//! The work of thread `tid` of the team of [`TEAM`] (a `BM x BK` tile of `A` and a `BK x BN`
//! tile of `B` per call):
//! - `A`, pieces 1..=8: piece `1 + tid % 8` of rows `tid / 8 + 32 v`; 8 consecutive threads
//!   read a row's 128 bytes.
//! - `A`, piece 0: value `tid % 4` of rows `tid / 4 + 64 v`.
//! - `B`, pieces 1..=32: piece `1 + tid % 32` of rows `tid / 32 + 8 v`; a warp reads a row's
//!   512 bytes.
//! - `B`, piece 0: value `tid % 4` of row `tid / 4`, threads below 128.
//!
//! The raw rows are [`A_LD`] = 36 and [`B_LD`] = 136 floats long, room for the 9 and 33 pieces.

use crate::production::warpgroup::{A_LD, B_LD, BK, BM, BN};

/// Threads of the team that copies a block's tiles.
pub(crate) const TEAM: u32 = 256;

const _: () = assert!(
    BK == 32 && BM == 128 && BN == 128 && A_LD >= BK + 4 && B_LD >= BN + 4 && TEAM == 256,
    "the thread mapping above; room for the pieces of a shifted row"
);

#[cfg(all(target_arch = "nvptx64", target_feature = "sm_90a"))]
pub(crate) mod device_code {
    use super::{BK, BM, TEAM};
    use crate::infra::device::*;
    use crate::infra::ptx::{
        SharedAddr, cp_async_ca_4, cp_async_cg_16_first, cp_async_commit_group, ld_shared_f32, opaque_u64,
        st_shared_f32, sync_warp,
    };
    use crate::production::warpgroup::{A_LD, A_RAW, B_LD, BN};

    /// How many floats past the 16-byte boundary before it `p` lies (0 to 3).
    #[inline(always)]
    pub(crate) fn misalignment(p: *const f32) -> u32 {
        (p as usize / 4 % 4) as u32
    }

    /// The 16-byte copies of piece `piece` (1 or more) of row segments whose first values are
    /// at `start` and `rows - 1` more, `step` floats apart, with the same offset: `cols(v)` of
    /// segment `v`'s values lie inside the matrix (0 for a row outside it). To `dst` (piece
    /// `piece` of the first raw row) and on, `dst_step` bytes apart.
    ///
    /// # Safety
    /// The values `0..cols(v)` of each segment are readable; the destinations are raw rows.
    #[inline(always)]
    unsafe fn pieces(
        dst: SharedAddr,
        dst_step: u32,
        (start, step, rows): (*const f32, usize, u32),
        piece: u32,
        cols: impl Fn(u32) -> u32,
    ) {
        let o = misalignment(start);
        let first = 4 * piece - o;
        let mut src = start.wrapping_sub(o as usize).wrapping_add(4 * piece as usize);
        for v in 0..rows {
            let bytes = cols(v).saturating_sub(first).min(4) * 4;
            // SAFETY: the piece is 16-byte aligned; its first `bytes` are values `first..` of
            // the segment, below `cols(v)`; nothing is read when `bytes` is 0.
            unsafe { cp_async_cg_16_first(dst.offset_bytes(v * dst_step), src, bytes) };
            src = src.wrapping_add(step);
        }
    }

    /// The 4-byte copies of value `i` (0 to 3) of piece 0 of the same row segments as
    /// [`pieces`]: zero where the value is not the segment's.
    ///
    /// # Safety
    /// As [`pieces`].
    #[inline(always)]
    unsafe fn heads(
        dst: SharedAddr,
        dst_step: u32,
        (start, step, rows): (*const f32, usize, u32),
        i: u32,
        cols: impl Fn(u32) -> u32,
    ) {
        let o = misalignment(start);
        let j = i.wrapping_sub(o);
        let mut src = start.wrapping_add(j as usize);
        for v in 0..rows {
            // SAFETY: when the guard holds, value `j` of the segment, below `cols(v)`.
            unsafe { cp_async_ca_4(dst.offset_bytes(v * dst_step), src, i >= o && j < cols(v)) };
            src = src.wrapping_add(step);
        }
    }

    /// Starts the copies of the tiles at `K` offset `k0` of this block (first row `row0` of
    /// `A`, first column `col0` of `B`) into the raw stage at `stage`, as one `cp.async` group,
    /// by thread `tid` of the team: `A`'s rows at their offsets, to be moved back by
    /// [`align_a_rows`] once landed; `B`'s rows at their offsets, which its readers add. Values
    /// outside `A` and `B` are zero-filled, never read.
    ///
    /// The operands' pointers, the origin, the thread's index and the steps between its rows
    /// pass through opaque moves, so the addresses and guards are computed here for each tile
    /// instead of being kept, tile after tile, in registers the copying threads do not have.
    ///
    /// # Safety
    /// The GEMM contract; no thread reads or writes the stage until this group is waited for
    /// and a barrier (or a handoff) passed after it.
    #[inline(always)]
    pub(crate) unsafe fn copy_tile(args: &GemmArgs, origin: (u32, u32), tid: u32, stage: SharedAddr, k0: u32) {
        let GemmArgs { m, n, k, lda, ldb, .. } = *args;
        let opaque = |x: usize| opaque_u64(x as u64) as usize;
        let [row0, col0, tid] = [origin.0, origin.1, tid].map(|x| opaque(x as usize) as u32);
        let (a, b) = (opaque(args.a as usize) as *const f32, opaque(args.b as usize) as *const f32);
        let a_cols = k.saturating_sub(k0).min(BK);
        let b_cols = n.saturating_sub(col0).min(BN);
        // Rows of A from `row` on, `step` apart, and their values inside A.
        let a_rows = |row: u32, step: u32, rows: u32| {
            ((a.wrapping_add(offset(row0 + row, k0, lda)), opaque(step as usize * lda as usize), rows), move |v: u32| {
                if row0 + row + step * v < m { a_cols } else { 0 }
            })
        };
        let b_rows = |row: u32, step: u32, rows: u32| {
            ((b.wrapping_add(offset(k0 + row, col0, ldb)), opaque(step as usize * ldb as usize), rows), move |v: u32| {
                if k0 + row + step * v < k { b_cols } else { 0 }
            })
        };
        let (a_row, b_row) = (A_LD * 4, B_LD * 4);
        // SAFETY (every copy): the column counts admit only values inside A and B; the
        // destinations are this thread's pieces of the stage's raw rows.
        unsafe {
            let (r, p) = (tid / 8, 1 + tid % 8);
            let (rows, cols) = a_rows(r, 32, BM / 32);
            pieces(stage.offset_bytes(r * a_row + 16 * p), 32 * a_row, rows, p, cols);
            let (r, i) = (tid / 4, tid % 4);
            let (rows, cols) = a_rows(r, 64, BM / 64);
            heads(stage.offset_bytes(r * a_row + 4 * i), 64 * a_row, rows, i, cols);
            let (r, p) = (tid / 32, 1 + tid % 32);
            let (rows, cols) = b_rows(r, 8, BK / 8);
            pieces(stage.offset_bytes(A_RAW + r * b_row + 16 * p), 8 * b_row, rows, p, cols);
            if tid < 4 * BK {
                let (r, i) = (tid / 4, tid % 4);
                let (rows, cols) = b_rows(r, 0, 1);
                heads(stage.offset_bytes(A_RAW + r * b_row + 4 * i), 0, rows, i, cols);
            }
            cp_async_commit_group();
        }
    }

    /// Moves the rows of the landed `A` tile in the raw stage at `stage` back by their offsets,
    /// so that value `j` of each row is at `j`, as the 16-byte copies leave it: warp `tid / 32`
    /// of the team moves rows `tid / 32 + 8 q`, a value a lane.
    ///
    /// # Safety
    /// The GEMM contract; every thread of the team calls it, warps whole, after the tile's
    /// copies (`copy_tile` at the same `k0`, same origin) landed and a barrier of the team
    /// passed; no other thread touches the stage's `A` tile meanwhile.
    #[inline(always)]
    pub(crate) unsafe fn align_a_rows(args: &GemmArgs, row0: u32, tid: u32, stage: SharedAddr, k0: u32) {
        let (warp, lane) = (tid / 32, tid % 32);
        // Rows 8 apart share the offset; the same in every warp's lanes (no divergence).
        let o = misalignment(args.a.wrapping_add(offset(row0 + warp, k0, args.lda)));
        if o == 0 {
            return;
        }
        const BATCH: u32 = 4;
        const WARPS: u32 = TEAM / 32;
        for q in 0..BM / WARPS / BATCH {
            let row_at = |x: u32| stage.offset_bytes((warp + WARPS * (BATCH * q + x)) * A_LD * 4);
            // SAFETY: inside the stage's A tile; the copies landed (the contract). Every lane
            // reads its values of the batch's rows before any lane writes (the warp barrier).
            unsafe {
                let v: [f32; BATCH as usize] = core::array::from_fn(|x| ld_shared_f32(row_at(x as u32).offset_bytes((o + lane) * 4)));
                sync_warp();
                for (x, &v) in v.iter().enumerate() {
                    st_shared_f32(row_at(x as u32).offset_bytes(lane * 4), v);
                }
            }
        }
    }
}
