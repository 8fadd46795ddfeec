//! The warp-tiled thread layout of the flagship kernels (seed 000, section 5.2), shared by
//! every kernel that computes a `16 R x 64 WN` block tile with `128 WN` threads, `R`
//! accumulator rows per lane and `WN` warps across: `R = 8, WN = 2` for the 128 x 128 tiles,
//! `R = 16, WN = 2` for the 256 x 128 tile of [`wide_tile`](crate::ladder::wide_tile), and
//! `R = 4, WN = 1` for the 64 x 64 tile of [`small_tile`](crate::production::small_tile).
//!
//! The block's `4 WN` warps each own a `4 R x 64` region of the tile (4 warps down, `WN` across).
//! Inside a warp the 32 lanes form a 4 x 8 grid, and each lane owns an `R x 8` block of
//! accumulators made of `R / 4 x 2` blocks of 4 x 4: rows `r..r+4`, `r+16..r+20`, ... (every
//! 16 rows), columns `c..c+4` and `c+32..c+36`. For one `k` a lane therefore reads `R / 4`
//! 4-vectors of the (transposed) `A` tile and two of the `B` tile, all `ld.shared.v4`, with no
//! bank conflicts since the 8 lanes of each quarter-warp touch 2 distinct `A` vectors and 4
//! distinct, adjacent `B` vectors (each 16-byte vector is broadcast to at most 4 lanes).
//!
//! The epilogue writes `C` through shared memory: each warp stages 16 rows of its 64 columns at
//! a time (row stride [`STAGE_LD`], padded so the `st.shared.v4` of the two lane rows of a
//! quarter-warp fall in different banks) and then stores them row by row, a lane per column,
//! so every global store instruction writes 128 contiguous bytes and a row's two such runs go
//! out one after the other.

/// Rows of `C` per block with `r` accumulator rows per lane.
pub const fn bm(r: usize) -> u32 {
    16 * r as u32
}
/// Columns of `C` per block with `wn` warps across.
pub const fn bn(wn: usize) -> u32 {
    WARP_N * wn as u32
}
/// Threads per block with `wn` warps across (4 warps down).
pub const fn threads(wn: usize) -> u32 {
    128 * wn as u32
}
/// Leading dimension of the transposed `A` tile (`A_tile[k][row]`), in floats: the 4 extra
/// floats shift each `k` row by 4 banks.
pub const fn a_ld(r: usize) -> u32 {
    bm(r) + 4
}
/// Bytes of the `A` tile, which the `B` tile (`B_tile[k][col]`, [`bn`] floats a row) follows in a
/// stage.
pub const fn a_tile(r: usize) -> u32 {
    BK * a_ld(r) * 4
}
/// Bytes of one stage of shared memory (both tiles).
pub const fn stage(r: usize, wn: usize) -> u32 {
    a_tile(r) + BK * bn(wn) * 4
}
/// Rows of `C` per warp.
pub const fn warp_m(r: usize) -> u32 {
    4 * r as u32
}

/// The 128 x 128 geometry (`R = 8`) of the first flagship kernels: rows and columns of `C` per
/// block, the depth of a shared-memory tile along `K`, and the threads of a block.
pub const BM: u32 = bm(8);
pub const BN: u32 = bn(WARPS_N as usize);
pub const BK: u32 = 8;
pub const THREADS: u32 = threads(WARPS_N as usize);
/// [`a_ld`], [`a_tile`] and [`stage`] of the 128 x 128 geometry.
pub const A_LD: u32 = a_ld(8);
pub const A_TILE: u32 = a_tile(8);
pub const STAGE: u32 = stage(8, WARPS_N as usize);

/// Columns of `C` per warp.
pub const WARP_N: u32 = 64;
/// Warps across the 128 x 128 block tile (along `N`).
pub const WARPS_N: u32 = 2;
/// Row stride, in floats, of a warp's 16 x 64 staging area for `C`.
pub const STAGE_LD: u32 = WARP_N + 4;
/// Bytes of shared memory the epilogue needs per warp.
pub const STAGE_BYTES: u32 = 16 * STAGE_LD * 4;

/// The dynamic shared memory of a kernel with `wn` warps across whose main loop uses
/// `main_loop` bytes: the epilogue stages `C` in the same memory afterwards (16 x 64 per warp),
/// so the larger of the two.
pub const fn smem_bytes(main_loop: u32, wn: usize) -> u32 {
    let epilogue = (threads(wn) / 32) * STAGE_BYTES;
    if main_loop > epilogue { main_loop } else { epilogue }
}

#[cfg(target_arch = "nvptx64")]
pub use device_code::*;

#[cfg(target_arch = "nvptx64")]
mod device_code {
    use super::{STAGE_BYTES, STAGE_LD, WARP_N, a_ld, a_tile, warp_m};
    use crate::infra::device::{offset, update_c_runs};
    use crate::infra::ptx::{
        F32x4, SharedAddr, ld_shared_f32, ld_shared_v4_f32, st_shared_v4_f32, sync_warp,
    };

    /// Where one thread sits in the block tile: just its first accumulator row and column, the
    /// two values the main loop needs (everything else is derived from them in the epilogue,
    /// so no other index stays live across the loop and costs registers).
    #[derive(Clone, Copy)]
    pub struct WarpTile<const R: usize, const WN: usize> {
        /// The block-tile row of the thread's first accumulator row (`+ 0..4`, `+ 16..20`, ...).
        pub row: u32,
        /// The block-tile column of its first accumulator column (`+ 0..4`, `+ 32..36`).
        pub col: u32,
    }

    impl<const R: usize, const WN: usize> WarpTile<R, WN> {
        const WARP_M: u32 = warp_m(R);
        const A_LD: u32 = a_ld(R);
        const A_TILE: u32 = a_tile(R);

        /// The layout for thread `tid` of a block of [`threads(WN)`](super::threads).
        #[inline(always)]
        pub fn of(tid: u32) -> Self {
            let (warp, lane) = (tid / 32, tid % 32);
            let wn = WN as u32;
            let (warp_row, warp_col) = (warp / wn * Self::WARP_M, warp % wn * WARP_N);
            // Lanes 0,1 are rows 0,1 of column 0; lanes 2,3 of column 1; ... lanes 16.. rows 2,3.
            let (lane_row, lane_col) = (lane / 16 * 2 + lane % 2, lane % 16 / 2);
            Self { row: warp_row + lane_row * 4, col: warp_col + lane_col * 4 }
        }

        /// The warp's first row and column in the block tile (the lane offsets are below 32
        /// rows and 64 columns).
        #[inline(always)]
        fn warp_origin(&self) -> (u32, u32) {
            (self.row / Self::WARP_M * Self::WARP_M, self.col / WARP_N * WARP_N)
        }

        /// The thread's `R` `A` values for one `k`: `R / 4` `ld.shared.v4` from the transposed
        /// tile row at `a_k` (`A_tile[k][row..]`), 16 rows apart.
        ///
        /// # Safety
        /// `a_k` is the shared address of that tile row, 16-byte aligned, rows of at least
        /// `16 R` floats, written before a barrier this thread has passed.
        #[inline(always)]
        pub unsafe fn a_fragment(&self, a_k: SharedAddr) -> [f32; R] {
            let mut out = [0.0f32; R];
            for g in 0..R / 4 {
                // SAFETY: the caller's contract; row + 16 g + 4 <= 16 R.
                let v = unsafe { ld_shared_v4_f32(a_k.offset_bytes((self.row + 16 * g as u32) * 4)) };
                for q in 0..4 {
                    out[4 * g + q] = v.0[q];
                }
            }
            out
        }

        /// The thread's 8 `B` values for one `k`, from the `B` tile row at `b_k`.
        ///
        /// # Safety
        /// As [`a_fragment`](Self::a_fragment), for the `B` tile.
        #[inline(always)]
        pub unsafe fn b_fragment(&self, b_k: SharedAddr) -> [f32; 8] {
            unsafe {
                join(
                    ld_shared_v4_f32(b_k.offset_bytes(self.col * 4)),
                    ld_shared_v4_f32(b_k.offset_bytes((self.col + 32) * 4)),
                )
            }
        }

        /// The thread's `A` and `B` fragments for `k = p` of the stage at `stage` (the `A`
        /// tile, then the `B` tile, as [`stage`](super::stage) lays them out, with the `B`
        /// tile's rows `b_ld` floats apart: [`bn`](super::bn), or more where padded).
        ///
        /// # Safety
        /// `stage` is a 16-byte aligned stage inside this block's shared memory, written
        /// before a barrier this thread has passed; `b_ld` a multiple of 4 of at least `bn`.
        #[inline(always)]
        pub unsafe fn fragments(&self, stage: SharedAddr, p: u32, b_ld: u32) -> ([f32; R], [f32; 8]) {
            unsafe {
                (
                    self.a_fragment(stage.offset_bytes(p * Self::A_LD * 4)),
                    self.b_fragment(stage.offset_bytes(Self::A_TILE + p * b_ld * 4)),
                )
            }
        }

        /// Writes `alpha * acc + beta * C` for the thread's accumulators, whose block tile
        /// starts at `(row0, col0)` of `C`, through shared memory so that each store
        /// instruction of a warp covers 128 contiguous bytes of a row. Elements outside the
        /// `m x n` matrix are skipped; `C` is read only when `beta != 0`.
        ///
        /// # Safety
        /// `staging` is this block's shared memory, `STAGE_BYTES` per warp, that
        /// no thread reads or writes any more (call after a barrier that follows the last
        /// use of the tiles); `c` is a valid `m x n` matrix with leading dimension `ldc`.
        #[inline(always)]
        #[allow(clippy::too_many_arguments)]
        pub unsafe fn store_c(
            &self,
            acc: &[[f32; 8]; R],
            staging: SharedAddr,
            (row0, col0): (u32, u32),
            (m, n): (u32, u32),
            alpha: f32,
            beta: f32,
            c: *mut f32,
            ldc: u32,
        ) {
            let (warp_row, warp_col) = self.warp_origin();
            let warp = warp_row / Self::WARP_M * WN as u32 + warp_col / WARP_N;
            let (lane_row, lane_col) = ((self.row - warp_row) / 4, (self.col - warp_col) / 4);
            let lane = lane_row / 2 * 16 + lane_col * 2 + lane_row % 2;
            let stage = staging.offset_bytes(warp * STAGE_BYTES);
            // The warp's strip of C: columns `strip..strip + 64`, of which `strip_cols` inside C.
            let strip = col0 + warp_col;
            let strip_cols = n.saturating_sub(strip);
            for i in 0..R / 4 {
                // SAFETY: the warp's own staging area, 16-byte aligned slots; bar.warp.sync
                // orders the lanes' writes before their reads and the reads before the next
                // block's writes.
                unsafe {
                    for j in 0..2 {
                        for r in 0..4 {
                            let at = stage
                                .offset_bytes(((lane_row * 4 + r) * STAGE_LD + j * 32 + lane_col * 4) * 4);
                            let acc_row = &acc[i * 4 + r as usize];
                            let v = [0, 1, 2, 3].map(|q| acc_row[j as usize * 4 + q]);
                            st_shared_v4_f32(at, F32x4(v));
                        }
                    }
                    sync_warp();
                    // Row by row, each row's two runs of 32 columns one after the other: where
                    // the rows of C do not start on 32-byte sectors, the sector the two runs share
                    // is then complete in the L2 before it could be evicted half written (and be
                    // read from memory to be merged). Four rows at a time, their reads of C
                    // before their writes (`read_c`).
                    for rows in 0..4 {
                        let row = |q: usize| row0 + warp_row + i as u32 * 16 + rows * 4 + q as u32;
                        let strip_of_row: [*mut f32; 4] =
                            core::array::from_fn(|q| c.wrapping_add(offset(row(q), strip, ldc)));
                        // Output `e` is row `e / 2`'s run `e % 2`: column `x(e)` of the strip.
                        let x = |e: usize| 32 * (e as u32 % 2) + lane;
                        let v: [[f32; 1]; 8] = core::array::from_fn(|e| {
                            [ld_shared_f32(
                                stage.offset_bytes(((rows * 4 + e as u32 / 2) * STAGE_LD + x(e)) * 4),
                            )]
                        });
                        update_c_runs::<1, false, 8>(
                            |e| strip_of_row[e / 2].wrapping_add(x(e) as usize),
                            |e| (row(e / 2) < m) & (x(e) < strip_cols),
                            alpha,
                            &v,
                            beta,
                        );
                    }
                    sync_warp();
                }
            }
        }
    }

    #[inline(always)]
    fn join(lo: F32x4, hi: F32x4) -> [f32; 8] {
        let ([a, b, c, d], [e, f, g, h]) = (lo.0, hi.0);
        [a, b, c, d, e, f, g, h]
    }
}
