//! Step 14, Hopper's warpgroup MMA: the 3xTF32 products of [`tensor_core`](crate::ladder::tensor_core)
//! issued as asynchronous `wgmma` instructions that read both operands from shared memory,
//! with each operand split into its TF32 `(hi, lo)` parts once per tile instead of once per use.
//!
//! Why: `tensor_core` (`mma.sync`) issues 5.9 instructions per tensor instruction and keeps
//! the tensor pipe 48% busy (ncu): every lane loads its fragments, splits them (again for
//! every column group), adds each step's products to its accumulators, and waits for the
//! tensor cores in between. Here a warpgroup (4 warps, 128 threads) multiplies a 64 x 8 slice
//! of `A` by an 8 x 128 slice of `B` in one instruction (`m64n128k8`), reading both from shared
//! memory, and the instruction runs while the threads prepare the next tile.
//!
//! Per 32-deep tile `t`:
//! 1. The 12 `wgmma` of tile `t` start (4 steps of 8 `k`, 3 products each: `a_lo b_hi`,
//!    `a_hi b_lo`, `a_hi b_hi`, see `tensor_core` for the split and its accuracy), summing into a
//!    fresh set of 64 accumulators per thread, `step`.
//! 2. Meanwhile the threads start the `cp.async` copies of tile `t + 2`, wait for tile `t + 1`
//!    and split it: read the raw tile, round each value to TF32 (`hi`, with two integer
//!    instructions) and the remainder too (`lo`), and write `A_hi`, `A_lo`, `B_hi`, `B_lo` in
//!    the core-matrix layout `wgmma` reads (8 rows of 16 bytes per 128-byte block; `B`
//!    transposed on the way, since TF32 `wgmma` wants both operands "K-major").
//! 3. They wait for tile `t`'s products and add `step` to the accumulators with `f32` additions
//!    (round to nearest): the tensor cores' own additions round toward zero, which on a running
//!    sum of thousands of terms grew the error 15 times beyond `f32`'s (`tensor_core`); a
//!    32-deep tile is the span they accumulate here.
//!
//! Two versions of this loop are compiled, and a block runs one or both:
//! - *plain* first: each thread splits half a row of the `A` tile and half a column of the `B`
//!   tile as they are, and checks each value against the [window](crate::production::window)
//!   where that split is exact. At the end the block votes; when every value it read was in the
//!   window, its accumulators are the product.
//! - *scaled* when not (inputs near the edges of the `f32` range, infinities, NaN): the block
//!   multiplies its tile again, each thread splitting a whole row or column scaled by a power of
//!   two chosen from its largest magnitude, and the step is scaled back as it is added
//!   ([`scaling`](crate::production::scaling)).
//!
//! Block: 128 x 128 of `C`, two warpgroups of 64 x 128 each; shared memory: 2 raw stages
//! (`A` rows padded to 36 floats, `B` rows to 136, so the split reads are conflict-free) and 2
//! split sets of 64 KiB, 198 KiB in all, one block per SM. Non-finite results are recomputed
//! exactly as in `tensor_core`, and `K` can be split across `blockIdx.z` by the same
//! convention; the host pads operands whose rows are not a multiple of 4 floats (`padding`).
//!
//! The instructions exist only on sm_90a (H100, H200), so the kernel is only in that module.
//!
//! Measurements, profiles and the attempts that did not help: `docs/performance-notes.md`.

use crate::infra::launch::{KernelSpec, Module, Padding, Shapes};

/// Rows and columns of `C` per block, and the `K` depth of a tile.
pub(crate) const BM: u32 = 128;
pub(crate) const BN: u32 = 128;
pub const BK: u32 = 32;
/// Threads per block: two warpgroups.
pub(crate) const THREADS: u32 = 256;
/// Raw tiles in flight or being split.
pub(crate) const STAGES: u32 = 2;
/// Row stride of a raw `A` tile (`[BM][A_LD]`), in floats: the split reads 16-byte pieces of
/// 8 consecutive rows at once, 144 bytes apart, in 8 distinct groups of 4 banks.
pub(crate) const A_LD: u32 = BK + 4;
/// Row stride of a raw `B` tile (`[BK][B_LD]`).
pub(crate) const B_LD: u32 = BN + 8;
/// Bytes of one split operand half (`A_hi`, `A_lo`, `B_hi` or `B_lo`: 128 x 32 values).
pub(crate) const HALF: u32 = BM * BK * 4;
/// Bytes of one split set: `A_hi`, `A_lo`, `B_hi`, `B_lo`.
pub(crate) const SPLIT: u32 = 4 * HALF;
/// Bytes of a raw stage's `A` tile, which its `B` tile follows.
pub(crate) const A_RAW: u32 = BM * A_LD * 4;
/// Bytes of one raw stage.
pub(crate) const STAGE: u32 = A_RAW + BK * B_LD * 4;
/// Bytes of one split set's shifts ([`scaling`](crate::production::scaling)): one `i32` (kept as
/// the bits of an `f32` word) per row of the `A` tile, then one per column of the `B` tile,
/// indexed by the thread that split it.
pub(crate) const SHIFTS: u32 = (BM + BN) * 4;

/// Row stride, in floats, of a warp's staging area in [`store_tile`](self)'s staged path: 8
/// banks past a multiple of 32, so the 8-byte stores of a half-warp (4 rows, 8 consecutive
/// floats of each) fall in 32 distinct banks.
pub(crate) const STAGED_LD: u32 = BN + 8;
/// Bytes of one warp's staging area: its 16 rows of the tile.
pub(crate) const STAGED_WARP: u32 = 16 * STAGED_LD * 4;
/// Bytes of the staging areas of the tile's 8 warps.
pub(crate) const STAGED_BYTES: u32 = THREADS / 32 * STAGED_WARP;

/// Bytes of shared memory the tile loop uses: two split sets, the raw stages, two sets of shifts.
pub(crate) const SMEM_BYTES: u32 = 2 * SPLIT + STAGES * STAGE + 2 * SHIFTS;

/// Launch configuration of [`sgemm_warpgroup`](self).
pub const SPEC: KernelSpec = KernelSpec {
    name: "warpgroup",
    entry: "sgemm_warpgroup",
    vec4_entry: None,
    vec4_b: true,
    summary: "128x128x32 tile on wgmma.m64n128k8 TF32 (sm_90a), operands split once per tile",
    block: (THREADS, 1),
    tile: (BM, BN),
    smem_bytes: SMEM_BYTES,
    min_blocks_per_sm: 1,
    members_per_block: 1,
    k_slices: Some(BM),
    padding: Padding::Always,
    arch: Some("sm_90a"),
    module: Module::Production,
    shapes: Shapes::Any,
    reads_a_transposed: false,
    reads_b_transposed: false,
};

const _: () = assert!(
    BM == BN && BM * BK / 4 == 4 * THREADS && BK == 32 && STAGES == 2 && BM + BN == THREADS,
    "each thread copies four 16-byte pieces of each operand per tile and splits one row of A or one column of B"
);

/// Tile rows of `C` in one band of [`band_order`].
const BAND_ROWS: u64 = 8;

/// The tile `(row, column)` of a grid of `rows x columns` tiles that the block `id`-th in
/// launch order computes. The blocks walk the tiles band by band, each band [`BAND_ROWS`] tile
/// rows tall (the last as tall as the rows left) and taken column by column, so the blocks
/// resident at one time, one per SM, cover a few columns of a few rows: at 8192 (64 x 64 tiles)
/// a wave of 132 blocks reads 8 panels of `A` and 17 of `B` instead of the 3 and 64 of row
/// order, and L2 serves each panel to the other blocks of its band. A bijection of the grid's
/// tiles, for `id < rows * columns`; with one band (at most [`BAND_ROWS`] rows) and one column,
/// or one row, it is row order itself. (Outside the device code so that host tests check it.)
#[inline(always)]
pub const fn band_order(id: u64, columns: u32, rows: u32) -> (u32, u32) {
    let (columns, rows) = (columns as u64, rows as u64);
    let band = id / (BAND_ROWS * columns);
    let height = if rows - band * BAND_ROWS < BAND_ROWS { rows - band * BAND_ROWS } else { BAND_ROWS };
    let within = id % (BAND_ROWS * columns);
    ((band * BAND_ROWS + within % height) as u32, (within / height) as u32)
}

/// `x` rounded to TF32, to nearest with ties away from zero, as an `f32` whose low 13 mantissa
/// bits are zero: adding half a TF32 unit to the bits carries into the kept ones exactly when
/// the dropped ones are at least half a unit (into the exponent too, which is how a value rounds
/// up to the next binade or to infinity). Two integer instructions, where `cvt.rna.tf32.f32` is
/// four on sm_90. A NaN must be `f32::NAN` (payload `0x40_0000`): one with the top payload bits
/// set (`0x7fff_ffff`, the NaN that GPU arithmetic makes) would carry into the sign and come out
/// zero. (Outside the device code so that host tests can split values exactly as the kernel.)
#[inline(always)]
pub const fn round_tf32(x: f32) -> f32 {
    f32::from_bits(x.to_bits().wrapping_add(0x1000) & 0xffff_e000)
}

#[cfg(all(target_arch = "nvptx64", target_feature = "sm_90a"))]
pub(crate) mod device_code {
    use super::{
        A_LD, A_RAW, B_LD, BK, BM, BN, HALF, SHIFTS, SPLIT, STAGE, STAGED_LD, STAGED_WARP, STAGES, THREADS,
        band_order, round_tf32,
    };
    use crate::infra::device::*;
    use crate::infra::ptx::{
        F32x4, MatrixDescriptor, SharedAddr, bar_red_or_named, bar_sync_named, cp_async_ca_4, cp_async_cg_16,
        cp_async_commit_group, cp_async_wait_group, fence_proxy_async_shared, ld_shared_f32,
        ld_shared_v4_f32, opaque_u64, st_shared_f32, st_shared_v2_f32, st_shared_v4_f32, sync_warp, vote_all,
        wgmma_commit_group, wgmma_fence, wgmma_m64n128k8_tf32, wgmma_m64n128k8_tf32_into, wgmma_wait_group,
    };
    use crate::production::scaling;
    use crate::production::window::WindowCheck;

    /// Byte offsets of the four halves in a split set.
    pub(crate) const A_HI: u32 = 0;
    pub(crate) const A_LO: u32 = HALF;
    pub(crate) const B_HI: u32 = 2 * HALF;
    pub(crate) const B_LO: u32 = 3 * HALF;
    /// Bytes between core matrices adjacent along `K`, and along `M` (or `N`): core matrix
    /// `(r / 8, c)` of a half, for rows `r` and 4-deep `k` pieces `c`, is 128 bytes at
    /// `(r / 8 * 8 + c) * 128`.
    pub(crate) const K_STRIDE: u32 = 128;
    pub(crate) const MN_STRIDE: u32 = (BK / 4) * 128;

    /// The byte offset, in a split half, of the 16-byte piece `c` (values `4 c..4 c + 4` along
    /// `K`) of row `r`.
    #[inline(always)]
    pub(crate) fn core_offset(r: u32, c: u32) -> u32 {
        (r / 8) * MN_STRIDE + c * K_STRIDE + (r % 8) * 16
    }

    /// Four values split into `(hi, lo)`: `hi = tf32(x)`, `lo = tf32(x - hi)` (`x - hi` is exact).
    /// An infinite `x` gives an infinite `hi` and a NaN `f32::NAN` (not another NaN, see
    /// [`round_tf32`]) a NaN `hi`, so every product it enters is not finite and the epilogue
    /// recomputes the output exactly.
    #[inline(always)]
    pub(crate) fn split4(x: F32x4) -> (F32x4, F32x4) {
        let hi = x.0.map(round_tf32);
        (F32x4(hi), F32x4(core::array::from_fn(|i| round_tf32(x.0[i] - hi[i]))))
    }

    /// The 12 products of the tile in split set `set` (a byte offset) started into `step`, as
    /// one `wgmma` group, by the warpgroup whose rows of `A` `a_desc` describes (`b_desc`: the
    /// split set base).
    ///
    /// # Safety
    /// The whole warpgroup runs this together; the split set was written and published to
    /// the async proxy ([`fence_proxy_async_shared`], then a barrier) before; `step` is not
    /// touched until a [`wgmma_wait_group`] that covers this group.
    #[inline(always)]
    pub(crate) unsafe fn products(
        step: &mut [f32; 64],
        a_desc: MatrixDescriptor,
        b_desc: MatrixDescriptor,
        set: u32,
    ) {
        unsafe {
            wgmma_fence();
            for s in 0..BK / 8 {
                // Step s: pieces 2 s and 2 s + 1 along K, K_STRIDE apart.
                let at = |half: u32| set + half + 2 * s * K_STRIDE;
                let (a_hi, a_lo) = (a_desc.offset_bytes(at(A_HI)), a_desc.offset_bytes(at(A_LO)));
                let (b_hi, b_lo) = (b_desc.offset_bytes(at(B_HI)), b_desc.offset_bytes(at(B_LO)));
                if s == 0 {
                    wgmma_m64n128k8_tf32_into(step, a_lo, b_hi);
                } else {
                    wgmma_m64n128k8_tf32(step, a_lo, b_hi);
                }
                wgmma_m64n128k8_tf32(step, a_hi, b_lo);
                wgmma_m64n128k8_tf32(step, a_hi, b_hi);
            }
            wgmma_commit_group();
        }
    }

    /// The first row and column of the tile of `C` this block computes: the tile
    /// [`band_order`] gives the block's place in launch order (`blockIdx.x` fastest).
    #[inline(always)]
    pub(crate) fn tile_origin() -> (u32, u32) {
        let (columns, rows) = (grid_x(), grid_y());
        let id = u64::from(block_y()) * u64::from(columns) + u64::from(block_x());
        let (row, column) = band_order(id, columns, rows);
        (row * BM, column * BN)
    }

    /// The `cp.async` copies of a block's raw tiles, `BK` deep, by a team of [`THREADS`]
    /// threads, into raw stages of `A` (`[BM][A_LD]`) and then `B` (`[BK][B_LD]`), `W` floats a
    /// copy: 16 bytes (`VEC4`) or 4. A row of the `A` tile is `BK / W` threads' copies and a row
    /// of the `B` tile `BN / W`; consecutive threads copy consecutive pieces of a row, and the
    /// team's next rows follow. With 16 bytes, thread `tid` copies rows `tid / 8 + 32 v` of the
    /// `A` tile (the 4-vector at `k` `tid % 8 * 4`) and rows `tid / 32 + 8 i` of the `B` tile
    /// (columns `tid % 32 * 4..+4`); with 4 bytes, rows `tid / 32 + 8 v` of `A` (`k` `tid % 32`)
    /// and rows `tid / 128 + 2 i` of `B` (column `tid % 128`). Either way each warp's copy reads
    /// whole 128-byte lines of global memory when the rows are aligned and writes consecutive
    /// shared words (no bank conflicts). Elements outside `A` and `B` are zero-filled, never
    /// read.
    ///
    /// The 16-byte copies need what the host's 16-byte entry conditions give (`a` and `b`
    /// 16-byte aligned, `lda`, `ldb`, `k` multiples of 4, `B` readable up to `n` rounded up to
    /// 4 columns); the 4-byte ones take any operand.
    pub(crate) struct RawCopy<const VEC4: bool> {
        k: u32,
        ldb: u32,
        a_k: u32,
        b_k: u32,
        /// Rows of `A` from this thread's first row to the end of `A` (0 past it).
        a_rows_left: u32,
        lda: u32,
        b_col_ok: bool,
        a_ptr: *const f32,
        b_ptr: *const f32,
        a_dst: SharedAddr,
        b_dst: SharedAddr,
    }

    impl<const VEC4: bool> RawCopy<VEC4> {
        /// Floats per copy.
        const W: u32 = if VEC4 { 4 } else { 1 };
        /// Rows of the `A` tile between one thread's copies.
        const A_ROW_STEP: u32 = THREADS / (BK / Self::W);
        /// Rows of the `B` tile between one thread's copies.
        const B_ROW_STEP: u32 = THREADS / (BN / Self::W);

        /// Thread `tid`'s copies of this block's tiles, into stages at byte offsets from `raw`;
        /// the first copies tile 0.
        #[inline(always)]
        pub(crate) fn new(args: &GemmArgs, raw: SharedAddr, tid: u32) -> Self {
            let GemmArgs { m, n, k, a, lda, b, ldb, .. } = *args;
            let (row0, col0) = tile_origin();
            let (a_row, a_k) = (tid / (BK / Self::W), tid % (BK / Self::W) * Self::W);
            let (b_k, b_col) = (tid / (BN / Self::W), tid % (BN / Self::W) * Self::W);
            Self {
                k,
                ldb,
                a_k,
                b_k,
                a_rows_left: m.saturating_sub(row0 + a_row),
                lda,
                b_col_ok: col0 + b_col < n,
                a_ptr: a.wrapping_add(offset(row0 + a_row, a_k, lda)),
                b_ptr: b.wrapping_add(offset(b_k, col0 + b_col, ldb)),
                a_dst: raw.offset_bytes((a_row * A_LD + a_k) * 4),
                b_dst: raw.offset_bytes(A_RAW + (b_k * B_LD + b_col) * 4),
            }
        }

        /// Starts the copies of tile `k0` (the next tile) into the raw stage at byte offset
        /// `stage`, as one `cp.async` group (zero-filled past `K`).
        ///
        /// # Safety
        /// The GEMM contract; with `VEC4`, the 16-byte conditions above: the guards then admit
        /// only 4-vectors inside `A` and `B`. No thread reads or writes the stage until this
        /// group is waited for and a barrier (or a handoff) passed after it.
        #[inline(always)]
        pub(crate) unsafe fn tile(&mut self, stage: u32, k0: u32) {
            let Self { k, lda, ldb, a_k, b_k, a_rows_left, b_col_ok, a_ptr, b_ptr, a_dst, b_dst } = *self;
            // SAFETY: the contract; each guard admits only elements inside A and B.
            let copy = |dst: SharedAddr, src: *const f32, ok: bool| unsafe {
                if VEC4 { cp_async_cg_16(dst, src, ok) } else { cp_async_ca_4(dst, src, ok) }
            };
            let a_k_ok = k0 + a_k < k;
            // The 16-byte copies compute each row's address of A from the tile's: a running
            // pointer would wait for the previous copy to have read its address register. The
            // 4-byte ones, four times as many, step a pointer by an opaque step and compare
            // rows with an opaque bound, or the compiler keeps every copy's address and row
            // guard in registers of its own across the loop (the producers have 40).
            let opaque = |x: usize| if VEC4 { x } else { opaque_u64(x as u64) as usize };
            let a_rows_left = opaque(a_rows_left as usize) as u32;
            let (a_step, b_step) = (
                opaque(Self::A_ROW_STEP as usize * lda as usize),
                opaque(Self::B_ROW_STEP as usize * ldb as usize),
            );
            let mut src = a_ptr;
            for v in 0..BM / Self::A_ROW_STEP {
                let row = Self::A_ROW_STEP * v;
                let ok = a_k_ok && row < a_rows_left;
                let at = if VEC4 { a_ptr.wrapping_add(offset(row, 0, lda)) } else { src };
                copy(a_dst.offset_bytes(stage + row * A_LD * 4), at, ok);
                src = src.wrapping_add(a_step);
            }
            let mut src = b_ptr;
            for i in 0..BK / Self::B_ROW_STEP {
                let row = Self::B_ROW_STEP * i;
                let ok = k0 + b_k + row < k && b_col_ok;
                copy(b_dst.offset_bytes(stage + row * B_LD * 4), src, ok);
                src = src.wrapping_add(b_step);
            }
            // SAFETY: closes this tile's group.
            unsafe { cp_async_commit_group() };
            self.a_ptr = a_ptr.wrapping_add(BK as usize);
            self.b_ptr = b_ptr.wrapping_add(BK as usize * ldb as usize);
        }

        /// Moves the copies to the same tile of another member of the batch, whose `A` and `B`
        /// start `a_member` and `b_member` elements after this one's, from its first `K` tile,
        /// after `copied` tiles of this member (the same shapes and leading dimensions).
        #[inline(always)]
        pub(crate) fn next_member(&mut self, copied: u32, a_member: usize, b_member: usize) {
            let back = copied as usize * BK as usize;
            self.a_ptr = self.a_ptr.wrapping_add(a_member).wrapping_sub(back);
            self.b_ptr = self.b_ptr.wrapping_add(b_member).wrapping_sub(back * self.ldb as usize);
        }
    }

    /// Multiplies this block's tile of its batch member (a product, or a K slice of one: see
    /// [`split_k`](crate::production::split_k)) into `acc` (this thread's fragment of the
    /// tile), with each tile's rows and columns scaled (module [`scaling`]) when `SCALED`, as
    /// they are when not. Returns whether `acc` is the product: always when `SCALED`; without,
    /// only when every element of the `A` rows and `B` columns the block multiplied is in the
    /// [window](crate::production::window) (the same answer in every thread of the team).
    ///
    /// The team is `THREADS` threads numbered `tid` (two warpgroups, whole warps in order),
    /// synchronized by named barrier `BAR` (0 when they are the whole block).
    /// `VEC4`: the tiles are copied 16 bytes at a time ([`RawCopy`]'s conditions), else 4.
    ///
    /// # Safety
    /// The GEMM contract (see [`gemm_entry!`](crate::infra::device)); every thread of the
    /// team calls it together; no other thread uses barrier `BAR` or the tile loop's shared
    /// memory meanwhile.
    #[inline(always)]
    pub(crate) unsafe fn multiply<const SCALED: bool, const BAR: u32, const VEC4: bool>(
        args: &GemmArgs,
        acc: &mut [f32; 64],
        tid: u32,
    ) -> bool {
        let GemmArgs { n, k, .. } = *args;
        // SAFETY (every named barrier below): the team reaches each one together (the loop is
        // uniform), and the caller gives it `BAR`.
        let sync = || unsafe { bar_sync_named::<BAR, THREADS>() };
        let col0 = tile_origin().1;

        let smem = dynamic_shared_f32();
        // SAFETY: the dynamic shared memory base; the launch sizes it (SPEC.smem_bytes).
        let base = unsafe { SharedAddr::of(smem) };
        let raw = base.offset_bytes(2 * SPLIT);
        let mut copies = RawCopy::<VEC4>::new(args, raw, tid);
        // SAFETY: the loop's protocol: a stage is refilled only after the barrier that ends
        // the split of the tile it held.
        let mut copy_tile = |stage: u32, k0: u32| unsafe { copies.tile(stage, k0) };

        // The split of a raw stage into a split set, scaled (module `scaling`): threads 0..128
        // take row r = tid of the A tile, threads 128..256 column r = tid - 128 of the B tile,
        // all 32 values along K, so each thread finds its row's (column's) largest magnitude
        // alone. For each piece c, 8 consecutive lanes read 8 rows 144 bytes apart (A) or 8
        // consecutive floats of a row (B), and write one core matrix's 128 contiguous bytes: no
        // bank conflicts. Returns whether this thread's shift is not 0.
        let (r, splits_a) = (tid % BM, tid < BM);
        let (hi_half, lo_half) = if splits_a { (A_HI, A_LO) } else { (B_HI, B_LO) };
        let shifts = base.offset_bytes(2 * SPLIT + STAGES * STAGE);
        let split_scaled = #[inline(always)]
        |stage: u32, set: u32| -> bool {
            // SAFETY: inside the raw stage, published by the last barrier.
            let x: [F32x4; (BK / 4) as usize] = core::array::from_fn(|c| unsafe {
                let c = c as u32;
                if splits_a {
                    ld_shared_v4_f32(raw.offset_bytes(stage + (r * A_LD + 4 * c) * 4))
                } else {
                    let at = |i: u32| raw.offset_bytes(stage + A_RAW + ((4 * c + i) * B_LD + r) * 4);
                    F32x4(core::array::from_fn(|i| ld_shared_f32(at(i as u32))))
                }
            });
            // The largest magnitude's bits; above 0x7f80_0000 only for a NaN.
            let max = x.iter().flat_map(|v| v.0).fold(0u32, |m, v| m.max(v.to_bits() & 0x7fff_ffff));
            let shift = scaling::shift(max);
            let x = if shift != 0 {
                let factor = scaling::exp2(shift);
                x.map(|v| F32x4(v.0.map(|v| v * factor)))
            } else if max > 0x7f80_0000 {
                x.map(|v| F32x4(v.0.map(|v| if v.is_nan() { f32::NAN } else { v })))
            } else {
                x
            };
            let to = base.offset_bytes(set);
            for (c, v) in x.iter().enumerate() {
                let (hi, lo) = split4(*v);
                let at = core_offset(r, c as u32);
                // SAFETY: the split set is not read by a pending wgmma, and its shifts by no
                // thread (the loop's protocol).
                unsafe {
                    st_shared_v4_f32(to.offset_bytes(hi_half + at), hi);
                    st_shared_v4_f32(to.offset_bytes(lo_half + at), lo);
                }
            }
            // SAFETY: as above.
            unsafe {
                st_shared_f32(
                    shifts.offset_bytes(set / SPLIT * SHIFTS + tid * 4),
                    f32::from_bits(shift as u32),
                )
            };
            fence_proxy_async_shared();
            shift != 0
        };

        // The split without scaling, shared evenly: thread tid takes row (of A) and column (of
        // B) r and the pieces c = tid / 128 + 2 j along K, so both warpgroups issue the same
        // loads (one 16-byte and four 4-byte per piece) and reach the barrier together. The same
        // reads and writes as above for each piece: no bank conflicts. Each value goes to the
        // window checks: of A (rows past m are zero-filled), and of B (columns past n may hold
        // anything, so that check counts only for a column inside C).
        let (mut a_window, mut b_window) = (WindowCheck::new(), WindowCheck::new());
        let b_live = col0 + r < n;
        let mut split_plain = #[inline(always)]
        |stage: u32, set: u32| {
            let to = base.offset_bytes(set);
            for j in 0..BK / 8 {
                let c = tid / BM + 2 * j;
                let at = core_offset(r, c);
                // SAFETY: the raw stage was published by the last barrier; the split set is not
                // read by a pending wgmma (the loop's protocol).
                unsafe {
                    let x = ld_shared_v4_f32(raw.offset_bytes(stage + (r * A_LD + 4 * c) * 4));
                    for &v in &x.0 {
                        a_window.see(v);
                    }
                    let (hi, lo) = split4(x);
                    st_shared_v4_f32(to.offset_bytes(A_HI + at), hi);
                    st_shared_v4_f32(to.offset_bytes(A_LO + at), lo);
                    let b_at = |i: u32| raw.offset_bytes(stage + A_RAW + ((4 * c + i) * B_LD + r) * 4);
                    let x = F32x4(core::array::from_fn(|i| ld_shared_f32(b_at(i as u32))));
                    for &v in &x.0 {
                        b_window.see(v);
                    }
                    let (hi, lo) = split4(x);
                    st_shared_v4_f32(to.offset_bytes(B_HI + at), hi);
                    st_shared_v4_f32(to.offset_bytes(B_LO + at), lo);
                }
            }
            fence_proxy_async_shared();
        };
        // Splits a raw stage into a split set; returns whether this thread scaled its line.
        let mut split = #[inline(always)]
        |stage: u32, set: u32| -> bool {
            if SCALED {
                split_scaled(stage, set)
            } else {
                split_plain(stage, set);
                false
            }
        };
        // The block-wide barrier that ends a split: returns whether any thread scaled its line.
        let barrier = #[inline(always)]
        |scaled: bool| -> bool {
            if SCALED {
                // SAFETY: as `sync`.
                unsafe { bar_red_or_named::<BAR, THREADS>(scaled) }
            } else {
                sync();
                false
            }
        };

        // Warpgroup w multiplies rows 64 w..64 w + 64 of the tile: its part of each A half starts
        // 8 w core matrices (64 w rows) in.
        let group = tid / 128;
        let a_desc = MatrixDescriptor::new(base.offset_bytes(group * 8 * MN_STRIDE), K_STRIDE, MN_STRIDE);
        let b_desc = MatrixDescriptor::new(base, K_STRIDE, MN_STRIDE);
        // Adds tile `t`'s step, split in set `set`, to the accumulators: as it is, or when the
        // block scaled any row or column of the tile (`scaled`, the same in every thread),
        // scaled back by the row's and the column's shifts (module `scaling`).
        let (warp, lane) = (tid / 32 % 4, tid % 32);
        let (g, t4) = (lane / 4, lane % 4);
        let add_step = #[inline(always)]
        |acc: &mut [f32; 64], step: &[f32; 64], set: u32, scaled: bool| {
            if !scaled {
                for (x, y) in acc.iter_mut().zip(step) {
                    *x += y;
                }
                return;
            }
            let at = shifts.offset_bytes(set / SPLIT * SHIFTS);
            // SAFETY: written by the split of this set before a barrier; not rewritten until
            // the barrier that ends this iteration.
            let load = |i: u32| unsafe { ld_shared_f32(at.offset_bytes(i * 4)).to_bits() as i32 };
            let row_shift: [i32; 2] =
                core::array::from_fn(|h| load(64 * group + 16 * warp + g + 8 * h as u32));
            // Column block j's two columns' shifts, read as they are needed.
            for (j, (x, y)) in acc.chunks_exact_mut(4).zip(step.chunks_exact(4)).enumerate() {
                let col_shift: [i32; 2] =
                    core::array::from_fn(|c| load(BM + 8 * j as u32 + 2 * t4 + c as u32));
                for e in 0..4 {
                    x[e] = scaling::unscale(y[e], row_shift[e / 2], col_shift[e % 2], x[e]);
                }
            }
        };

        // Prologue: tiles 0 and 1 in flight; tile 0 split into set 0.
        copy_tile(0, 0);
        copy_tile(STAGE, BK);
        // SAFETY: waiting has no preconditions.
        unsafe { cp_async_wait_group::<1>() };
        sync();
        let mut scaled = barrier(split(0, 0));

        *acc = [0.0f32; 64];
        let mut step = [0.0f32; 64];
        let tiles = k.div_ceil(BK);
        let (mut stage, mut set) = (0, 0);
        for t in 0..tiles {
            // SAFETY: the split set was published by the last barrier (proxy fence before it).
            unsafe { products(&mut step, a_desc, b_desc, set) };
            // The raw stage of tile t was split before the last barrier: refill it with tile
            // t + 2 (zero-filled past K).
            copy_tile(stage, (t + 2) * BK);
            stage ^= STAGE;
            let this_set = set;
            set ^= SPLIT;
            let mut scaled_next = false;
            if t + 1 < tiles {
                // Tile t + 1 has landed (only tile t + 2's group may be pending); the barrier
                // publishes it, and proves both warpgroups waited for tile t - 1's products,
                // the last readers of the split set it goes to.
                // SAFETY: as above.
                unsafe { cp_async_wait_group::<1>() };
                sync();
                scaled_next = split(stage, set);
            }
            // SAFETY: the whole warpgroup waits together.
            unsafe { wgmma_wait_group::<0>(&mut step) };
            add_step(acc, &step, this_set, scaled);
            scaled = barrier(scaled_next);
        }
        // Drain the (zero-filled) copies still in flight.
        // SAFETY: as above.
        unsafe { cp_async_wait_group::<0>() };
        // SAFETY: as `sync`.
        SCALED
            || !unsafe {
                bar_red_or_named::<BAR, THREADS>(!(a_window.holds() && (b_window.holds() || !b_live)))
            }
    }

    /// The GEMM of this block's tile: [`multiply`] without scaling, then with it if that was not
    /// exact; then the epilogue, which recomputes non-finite outputs with `f32` FMAs.
    ///
    /// # Safety
    /// The GEMM contract (see [`gemm_entry!`](crate::infra::device)).
    #[inline(always)]
    unsafe fn gemm(args: GemmArgs) {
        let mut acc = [0.0f32; 64];
        let tid = thread_x();
        // SAFETY: the contract; the whole block is the team (barrier 0), every thread runs
        // both calls, or neither of the second.
        unsafe {
            if !multiply::<false, 0, true>(&args, &mut acc, tid) {
                multiply::<true, 0, true>(&args, &mut acc, tid);
            }
            store_tile::<BN, false>(&args, &acc, tid, None);
        }
    }

    /// The epilogue: thread `tid` of the two warpgroups that multiplied the tile writes its
    /// fragment `acc` to `C`, of which only the first `COLS` columns of the tile (128, 64 or
    /// 32: at least those inside `C`, `n - col0`) are read.
    /// - Given a `staging` area, where the rows of `C` do not start on 32-byte sectors
    ///   ([`c_rows_on_sectors`]), a warp whose 16 x 128 part of the tile lies inside `C` and
    ///   is finite goes out through its part of the area ([`store_staged`]).
    /// - Else a fragment whose `COLS` columns lie inside `C` and are finite goes out as
    ///   `COLS / 4` column pairs ([`store_pairs`]: no branch per element).
    /// - Any other finite fragment element by element, in groups of 8 ([`update_c_runs`]),
    ///   skipping outputs outside `m x n`; one with a non-finite value through [`store_exact`],
    ///   which also recomputes the non-finite ones with `f32` FMAs.
    ///
    /// # Safety
    /// The GEMM contract (see [`gemm_entry!`](crate::infra::device)); every thread of the warp
    /// calls it; `staging`, when given, is [`STAGED_BYTES`](super::STAGED_BYTES) of shared
    /// memory that no thread but the tile's 256 (each in its own warp's part) touches until the
    /// block's next barrier.
    ///
    /// `FINITE`: the caller knows every value of `acc` is finite (its window checks held:
    /// module [`window`](crate::production::window)), so no output needs the exact
    /// recomputation, an out-of-line call that the caller's live registers would otherwise have
    /// to survive (in local memory).
    #[inline(always)]
    pub(crate) unsafe fn store_tile<const COLS: u32, const FINITE: bool>(
        args: &GemmArgs,
        acc: &[f32; 64],
        tid: u32,
        staging: Option<SharedAddr>,
    ) {
        let (row0, col0) = tile_origin();
        let (group, warp, lane) = (tid / 128, tid / 32 % 4, tid % 32);
        let (g, t4) = (lane / 4, lane % 4);
        let first = row0 + 64 * group + 16 * warp;
        let live = &acc[..COLS as usize / 2];
        let finite = FINITE || all_finite(live);
        if let Some(staging) = staging
            && COLS == BN
            && !c_rows_on_sectors(args)
            // SAFETY: the whole warp votes (the contract).
            && unsafe { vote_all(first + 15 < args.m && col0 + BN <= args.n && finite) }
        {
            // SAFETY: the warp's own part of the area; its rows and the tile's columns lie
            // inside C, every value finite (the vote).
            unsafe { store_staged(args, acc, staging.offset_bytes(tid / 32 * STAGED_WARP), first, lane) };
            return;
        }
        // Element 4 j + e of the fragment is at row `top + 8 (e / 2)`, column
        // `left + 8 j + e % 2`: rows `top` and `top + 8`, columns `left ..= left + COLS - 7`.
        let (top, left) = (first + g, col0 + 2 * t4);
        let position = |i: usize| {
            let (j, e) = (i as u32 / 4, i as u32 % 4);
            (top + 8 * (e / 2), left + 8 * j + e % 2)
        };
        if top + 8 < args.m && left + COLS - 7 < args.n && finite {
            // SAFETY: the fragment lies inside C (just checked).
            unsafe {
                match (args.beta == 0.0, c_pairs_aligned(args)) {
                    (true, true) => store_pairs::<true, true, COLS>(args, acc, top, left),
                    (true, false) => store_pairs::<true, false, COLS>(args, acc, top, left),
                    (false, true) => store_pairs::<false, true, COLS>(args, acc, top, left),
                    (false, false) => store_pairs::<false, false, COLS>(args, acc, top, left),
                }
            }
        } else if finite {
            // Across C's edge: groups of 8 elements, the ones outside C skipped, each group's
            // reads of C before its writes (`read_c`).
            for group in 0..live.len() / 8 {
                let at = |p: usize| position(8 * group + p);
                let x: [[f32; 1]; 8] = core::array::from_fn(|p| [live[8 * group + p]]);
                // SAFETY: the GEMM contract; only outputs inside C, each this thread's.
                unsafe {
                    update_c_runs::<1, false, 8>(
                        |p| args.c.wrapping_add(offset(at(p).0, at(p).1, args.ldc)),
                        |p| (at(p).0 < args.m) & (at(p).1 < args.n),
                        args.alpha,
                        &x,
                        args.beta,
                    )
                };
            }
        } else {
            for (i, &x) in live.iter().enumerate() {
                let (row, col) = position(i);
                // SAFETY: the GEMM contract; `store_exact` skips the outputs outside C.
                unsafe { store_exact(args, row, col, x) };
            }
        }
    }

    /// [`store_tile`]'s path for a `C` whose rows do not start on 32-byte sectors: the
    /// fragments' own layout writes runs of 8 floats on 8 rows per instruction, and on such a
    /// `C` each of those runs straddles two sectors. Here the warp of lane `lane` writes its
    /// 16 x 128 part of the fragments to `area`, then rows `first..first + 16` of `C` one at a
    /// time, each row's 128 outputs as one 16-byte run a lane where the rows of `C` are
    /// 16-byte aligned ([`c_rows_aligned`]), else as four runs of 32 floats, one float a lane.
    ///
    /// # Safety
    /// The GEMM contract; the whole warp calls it, with its rows `first..first + 16` and the
    /// tile's columns inside `C`; `area` is [`STAGED_WARP`] bytes of shared memory that no
    /// other warp touches meanwhile.
    #[inline(always)]
    unsafe fn store_staged(args: &GemmArgs, acc: &[f32; 64], area: SharedAddr, first: u32, lane: u32) {
        let col0 = tile_origin().1;
        let (g, t4) = (lane / 4, lane % 4);
        for j in 0..BN / 8 {
            for h in 0..2 {
                let i = (4 * j + 2 * h) as usize;
                let at = ((g + 8 * h) * STAGED_LD + 8 * j + 2 * t4) * 4;
                // SAFETY: inside the warp's area, 8-byte aligned.
                unsafe { st_shared_v2_f32(area.offset_bytes(at), [acc[i], acc[i + 1]]) };
            }
        }
        let GemmArgs { alpha, beta, c, ldc, .. } = *args;
        let at = |r: u32, col: u32| area.offset_bytes((r * STAGED_LD + col) * 4);
        // SAFETY (the rest): the whole warp, which then reads what its lanes wrote; every
        // output is inside C (the contract).
        unsafe {
            sync_warp();
            // Groups of 8 rows (or of 16 values), each group's reads of C before its writes
            // (`read_c`).
            if c_rows_aligned(args) {
                for half in 0..2 {
                    let r = |h: usize| 8 * half + h as u32;
                    let x: [[f32; 4]; 8] = core::array::from_fn(|h| ld_shared_v4_f32(at(r(h), 4 * lane)).0);
                    let ptr = |h: usize| c.wrapping_add(offset(first + r(h), col0 + 4 * lane, ldc));
                    update_c_runs::<4, true, 8>(ptr, |_| true, alpha, &x, beta);
                }
            } else {
                // A lane's values of a row: one in each run of 32 columns.
                const PER_ROW: usize = (BN / 32) as usize;
                const ROWS: u32 = (16 / PER_ROW) as u32;
                for group in 0..16 / ROWS {
                    let (r, col) = (
                        |e: usize| ROWS * group + (e / PER_ROW) as u32,
                        |e: usize| 32 * (e % PER_ROW) as u32 + lane,
                    );
                    let x: [[f32; 1]; 16] = core::array::from_fn(|e| [ld_shared_f32(at(r(e), col(e)))]);
                    let ptr = |e: usize| c.wrapping_add(offset(first + r(e), col0 + col(e), ldc));
                    update_c_runs::<1, false, 16>(ptr, |_| true, alpha, &x, beta);
                }
            }
        }
    }

    /// [`store_tile`]'s branch-free path: the fragment `acc` whose rows are `top` and `top + 8`
    /// and columns `left ..= left + COLS - 7` goes to `C` as `COLS / 4` column pairs, eight
    /// pairs' reads of `C` before their writes ([`update_c_runs`]): 8-byte accesses when
    /// `ALIGNED`, no reads of `C` when `BETA_ZERO`.
    ///
    /// # Safety
    /// The GEMM contract; the fragment lies inside `C` (`top + 8 < m`, `left + COLS - 7 < n`),
    /// and `left` is even; `BETA_ZERO` only where `beta == 0`, `ALIGNED` only where
    /// [`c_pairs_aligned`] holds.
    #[inline(always)]
    unsafe fn store_pairs<const BETA_ZERO: bool, const ALIGNED: bool, const COLS: u32>(
        args: &GemmArgs,
        acc: &[f32; 64],
        top: u32,
        left: u32,
    ) {
        let GemmArgs { alpha, beta, c, ldc, .. } = *args;
        // A beta of zero as a constant: no reads of C and no tests of beta.
        let beta = if BETA_ZERO { 0.0 } else { beta };
        // Pair p of a group of 8 (4 columns of pairs, on both rows): `acc[4 j + 2 h ..][..2]`
        // at row `top + 8 h`, column `left + 8 j`. Each group's reads of C come before its
        // writes (`read_c`).
        for group in 0..COLS / 32 {
            let (j, h) = (|p: usize| 4 * group + p as u32 / 2, |p: usize| p as u32 % 2);
            let x: [[f32; 2]; 8] = core::array::from_fn(|p| {
                let i = (4 * j(p) + 2 * h(p)) as usize;
                [acc[i], acc[i + 1]]
            });
            let ptr = |p: usize| c.wrapping_add(offset(top + 8 * h(p), left + 8 * j(p), ldc));
            // SAFETY: the contract: each pair's row and columns (the first even) are inside C.
            unsafe { update_c_runs::<2, ALIGNED, 8>(ptr, |_| true, alpha, &x, beta) };
        }
    }

    gemm_entry! { production:
        /// `C = alpha * A * B + beta * C` for one batch member (or K slice) per `blockIdx.z`,
        /// on `wgmma` with 16-byte copies only: the host launches it with `a` and `b` 16-byte
        /// aligned, `lda`, `ldb` and `k` (the slice depth) multiples of 4, and `B` readable up
        /// to `n` rounded up to 4 columns (`SPEC.padding`).
        sgemm_warpgroup => gemm
    }
}

#[cfg(test)]
mod tests {
    use super::band_order;

    #[test]
    fn band_order_gives_every_tile_to_one_block() {
        for rows in [1u32, 2, 7, 8, 9, 16, 17, 33, 64] {
            for columns in [1u32, 2, 5, 32, 64] {
                let mut seen = vec![false; (rows * columns) as usize];
                for id in 0..u64::from(rows * columns) {
                    let (row, column) = band_order(id, columns, rows);
                    assert!(
                        row < rows && column < columns,
                        "{rows} x {columns}: block {id} -> ({row}, {column})"
                    );
                    let tile = (row * columns + column) as usize;
                    assert!(!seen[tile], "{rows} x {columns}: tile ({row}, {column}) twice");
                    seen[tile] = true;
                }
            }
        }
        // Consecutive blocks go down a band's column, then to the next column.
        assert_eq!(
            [0, 1, 7, 8, 16].map(|id| band_order(id, 64, 64)),
            [(0, 0), (1, 0), (7, 0), (0, 1), (0, 2)]
        );
        // The last band of a 9-row grid is one row: row order there.
        assert_eq!([8 * 5, 8 * 5 + 1].map(|id| band_order(id, 5, 9)), [(8, 0), (8, 1)]);
    }
}
