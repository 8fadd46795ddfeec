//! Step 13, tensor cores at `f32` accuracy: the products run on the tensor cores
//! (`mma.sync` with TF32 operands) as three TF32 products per `f32` product, which keeps the
//! error at `f32`'s level, and any non-finite result is recomputed exactly with `f32` FMAs.
//!
//! Why: the FFMA kernels stop at 0.90-0.96x cuBLAS on the H100, and the evidence (ncu issue
//! slots and dispatch stalls, see [`pipelined`](crate::ladder::pipelined)) points at instruction issue,
//! which ptxas's register allocation decides. The tensor cores multiply TF32 (`f32`'s exponent,
//! 10 mantissa bits) several times faster than the FMA pipes multiply `f32`.
//!
//! The split ("3xTF32"): every operand `x` is `hi + lo` with `hi = tf32(x)` (round to nearest)
//! and `lo = tf32(x - hi)`, so `|x - hi - lo| <= 2^-22 |x|` and `|lo| <= 2^-11 |x|`; then
//! `a b = a_hi b_hi + a_hi b_lo + a_lo b_hi + a_lo b_lo`, and the last term (at most
//! `2^-22 |a b|`) is dropped. Each product is thus within about `3 * 2^-22 |a b|` before it is
//! summed in `f32`: a few units of `f32` rounding, where one TF32 product would lose `2^-11`.
//! The small terms are accumulated first, then `a_hi b_hi`.
//!
//! What the split cannot carry, the epilogue repairs: an infinite or NaN operand gives `hi = x`
//! and `lo` NaN (`inf - inf`), and `inf * 0` terms where `f32` would give `inf`; a finite value
//! beyond TF32's range rounds to infinity. Every one of those makes the accumulator non-finite,
//! and every output of an `f32` GEMM that involves such an operand is non-finite too, or
//! overflows. So an output whose accumulator is not finite is recomputed in `f32`, one FMA per
//! `k` in order: the IEEE result, at the cost of one row-times-column product per such output
//! (only inputs with infinities, NaN or values near `f32::MAX` take that path).
//!
//! Layout: 128 x 128 x 32 tiles, 4 warps of 64 x 64 (2 down, 2 across); a warp's tile is 4 x 8
//! `m16n8k8` products, 128 accumulators per lane. `A` is `[row][k]` and `B` `[k][col]` in shared
//! memory, both padded so the fragment loads hit 32 distinct banks (`A` rows 36 floats: lane
//! `(g, t)` reads bank `4g + t`; `B` rows 136: bank `8t + g`). Tiles arrive by `cp.async` in a
//! 3-stage pipeline with one barrier per 32-deep tile (as in [`pipelined`](crate::ladder::pipelined));
//! two blocks per SM. Every copy is 16 bytes: there is no 4-byte variant, the host pads
//! operands whose rows are not a multiple of 4 floats ([`pad`](crate::helpers::pad), `padding`).
//! `K` can be split across `blockIdx.z` as in [`split_k`](crate::production::split_k).
//!
//! `C` is written from the accumulators directly: a lane holds 2 adjacent columns of 2 rows
//! per product, so a warp's store writes 8 rows of 32 bytes each, whole sectors.

use crate::infra::launch::{KernelSpec, Module, Padding, Shapes};

/// Rows and columns of `C` per block, and the `K` depth of a tile.
const BM: u32 = 128;
const BN: u32 = 128;
const BK: u32 = 32;
/// Threads per block: 4 warps.
const THREADS: u32 = 128;
/// Tiles in flight or being computed.
const STAGES: u32 = 3;
/// Row stride of the `A` tile (`[BM][A_LD]`), in floats: lane `(g, t)` of a fragment load
/// reads row `g`, column `t`, which is bank `(36 g + t) mod 32 = 4 g + t`, all distinct.
const A_LD: u32 = BK + 4;
/// Row stride of the `B` tile (`[BK][B_LD]`): lane `(g, t)` reads row `t`, column `g`, bank
/// `(136 t + g) mod 32 = 8 t + g`, all distinct.
const B_LD: u32 = BN + 8;
/// Bytes of a stage's `A` tile, which its `B` tile follows.
const A_BYTES: u32 = BM * A_LD * 4;
/// Bytes of one stage.
const STAGE: u32 = A_BYTES + BK * B_LD * 4;
/// Rows and columns of `C` per warp.
const WARP_M: u32 = 64;
const WARP_N: u32 = 64;
/// 16-byte pieces of the `A` tile each thread copies.
const A_COPIES: u32 = BM * BK / 4 / THREADS;

/// Launch configuration of [`sgemm_tensor_core`](self).
pub const SPEC: KernelSpec = KernelSpec {
    name: "tensor_core",
    entry: "sgemm_tensor_core",
    vec4_entry: None,
    vec4_b: true,
    summary: "128x128x32 tile on mma.sync TF32 tensor cores, 3 TF32 products per f32 product",
    block: (THREADS, 1),
    tile: (BM, BN),
    smem_bytes: STAGES * STAGE,
    min_blocks_per_sm: 2,
    members_per_block: 1,
    k_slices: Some(BM),
    padding: Padding::Always,
    arch: None,
    module: Module::Ladder,
    shapes: Shapes::Any,
    reads_a_transposed: false,
    reads_b_transposed: false,
};

const _: () = assert!(
    (BM / WARP_M) * (BN / WARP_N) * 32 == THREADS
        && A_COPIES * THREADS * 4 == BM * BK
        && BN == THREADS
        && THREADS.is_multiple_of(BN / 4)
        && STAGES >= 2,
    "the warps cover the tile and the threads copy it in 16-byte pieces"
);

#[cfg(target_arch = "nvptx64")]
mod device_code {
    use super::{A_BYTES, A_COPIES, A_LD, B_LD, BK, BM, BN, STAGE, STAGES, THREADS, WARP_M, WARP_N};
    use crate::infra::device::*;
    use crate::infra::ptx::{
        SharedAddr, cp_async_cg_16, cp_async_commit_group, cp_async_wait_group, cvt_rna_tf32, ld_shared_f32,
        mma_m16n8k8_tf32,
    };

    /// The warp's `m16n8k8` products: row blocks of 16 and column blocks of 8.
    const M_TILES: usize = (WARP_M / 16) as usize;
    const N_TILES: usize = (WARP_N / 8) as usize;
    /// Column blocks whose `B` fragments are live at once.
    const N_GROUP: usize = 2;

    /// `T` fragments of `L` values split into their TF32 `(hi, lo)` parts.
    type Split<const L: usize, const T: usize> = ([[f32; L]; T], [[f32; L]; T]);
    /// A lane's accumulators: `[row block][column block][fragment element]`.
    type Acc = [[[f32; 4]; N_TILES]; M_TILES];

    /// Every fragment `x` as `(hi, lo)`, two TF32 values with `x - hi - lo` within `2^-22 |x|`
    /// (module docs).
    #[inline(always)]
    fn split_fragments<const T: usize, const N: usize>(x: [[f32; N]; T]) -> ([[f32; N]; T], [[f32; N]; T]) {
        let hi = x.map(|f| f.map(cvt_rna_tf32));
        let lo = core::array::from_fn(|i| core::array::from_fn(|e| cvt_rna_tf32(x[i][e] - hi[i][e])));
        (hi, lo)
    }

    /// `acc[i][j0 + j] += a_i b[j]` for one row block `i` and the column blocks
    /// `j0..j0 + N_GROUP` of one 8-deep `k` step. The three TF32 products of each (small terms
    /// first) sum into fresh registers, which are then added to the accumulators by `f32`
    /// additions: the tensor cores' own accumulation rounds toward zero, and on a running sum
    /// of thousands of terms that bias grew the error 15 times beyond `f32`'s (module docs).
    #[inline(always)]
    fn products(acc_i: &mut [[f32; 4]; N_TILES], a_i: [f32; 4], (b_hi, b_lo): &Split<2, N_GROUP>, j0: usize) {
        let ([a_hi], [a_lo]) = split_fragments([a_i]);
        let mut step = [[0.0f32; 4]; N_GROUP];
        let mut pass = #[inline(always)]
        |a: &[f32; 4], b: &[[f32; 2]; N_GROUP]| {
            for (d, b_j) in step.iter_mut().zip(b) {
                // SAFETY: every lane runs the main loop in step (no divergence).
                unsafe { mma_m16n8k8_tf32(d, a, b_j) };
            }
        };
        pass(&a_lo, b_hi);
        pass(&a_hi, b_lo);
        pass(&a_hi, b_hi);
        for (acc_ij, d) in acc_i[j0..j0 + N_GROUP].iter_mut().zip(&step) {
            for (x, y) in acc_ij.iter_mut().zip(d) {
                *x += y;
            }
        }
    }

    /// The GEMM of this block's batch member (a product, or a K slice of one: see
    /// [`split_k`](crate::production::split_k)).
    ///
    /// # Safety
    /// The GEMM contract (see [`gemm_entry!`](crate::infra::device)).
    #[inline(always)]
    unsafe fn gemm(args: GemmArgs) {
        let GemmArgs { m, n, k, a, lda, b, ldb, .. } = args;
        let tid = thread_x();
        let (row0, col0) = (block_y() * BM, block_x() * BN);
        let (warp, lane) = (tid / 32, tid % 32);
        let (g, t) = (lane / 4, lane % 4);
        let warp_row = warp / (BN / WARP_N) * WARP_M;
        let warp_col = warp % (BN / WARP_N) * WARP_N;

        // Copies. A: rows a_row and a_row + 64, 4-vectors a_kv + 2 v (v in 0..4), so the two
        // lanes of a row read 32 contiguous bytes (whole sectors) and a thread has just two
        // rows to guard (eight guards, one per row, cost 40 registers: the compiler hoists
        // them out of the loop). B: rows b_k + 4 i, columns b_col..b_col + 4.
        let (a_row, a_k) = (tid / 2, tid % 2 * 4);
        let (b_k, b_col) = (tid / (BN / 4), tid % (BN / 4) * 4);
        const A_HALF: u32 = BM / 2;
        const B_ROW_STEP: u32 = THREADS / (BN / 4);
        let a_row_ok = [row0 + a_row < m, row0 + a_row + A_HALF < m];
        let b_col_ok = col0 + b_col < n;
        let mut a_ptr = a.wrapping_add(offset(row0 + a_row, a_k, lda));
        let mut b_ptr = b.wrapping_add(offset(b_k, col0 + b_col, ldb));
        let (a_half, b_step) = (A_HALF as usize * lda as usize, B_ROW_STEP as usize * ldb as usize);

        let smem = dynamic_shared_f32();
        // SAFETY: the dynamic shared memory base; the launch sizes it (SPEC.smem_bytes).
        let base = unsafe { SharedAddr::of(smem) };
        let a_dst = base.offset_bytes((a_row * A_LD + a_k) * 4);
        let b_dst = base.offset_bytes(A_BYTES + (b_k * B_LD + b_col) * 4);

        // Starts the copies of tile `k0` into the stage at byte offset `stage`, as one group.
        let mut copy_tile = #[inline(always)]
        |stage: u32, k0: u32| {
            // SAFETY: the guards admit only 4-vectors inside A and B (the rest is zero-filled):
            // lda, ldb and k are multiples of 4, a and b 16-byte aligned, and B's rows readable
            // up to n rounded up to 4 (the host's padding, `SPEC.padding`); B's columns from n
            // on reach only C's columns from n on, which are not written. The stage is not
            // read until this group is waited for and a barrier passed.
            unsafe {
                for (h, &row_ok) in a_row_ok.iter().enumerate() {
                    for v in 0..A_COPIES / 2 {
                        let src = a_ptr.wrapping_add(h * a_half + 8 * v as usize);
                        let dst = a_dst.offset_bytes(stage + (h as u32 * A_HALF * A_LD + 8 * v) * 4);
                        cp_async_cg_16(dst, src, row_ok && k0 + a_k + 8 * v < k);
                    }
                }
                let mut src = b_ptr;
                for i in 0..BK / B_ROW_STEP {
                    let ok = k0 + b_k + B_ROW_STEP * i < k && b_col_ok;
                    let dst = b_dst.offset_bytes(stage + i * B_ROW_STEP * B_LD * 4);
                    cp_async_cg_16(dst, src, ok);
                    src = src.wrapping_add(b_step);
                }
                cp_async_commit_group();
            }
            a_ptr = a_ptr.wrapping_add(BK as usize);
            b_ptr = b_ptr.wrapping_add(BK as usize * ldb as usize);
        };

        // The lane's fragment addresses in stage 0; fragments of step `kk` are constant offsets.
        let a_frag_at = base.offset_bytes(((warp_row + g) * A_LD + t) * 4);
        let b_frag_at = base.offset_bytes(A_BYTES + (t * B_LD + warp_col + g) * 4);
        // The lane's A fragments of the 4 row blocks for step kk, as mma_m16n8k8_tf32 wants them.
        let a_fragments = |stage: u32, kk: u32| -> [[f32; 4]; M_TILES] {
            core::array::from_fn(|i| {
                let at = a_frag_at.offset_bytes(stage + (16 * i as u32 * A_LD + kk) * 4);
                let ld = |row: u32, col: u32| {
                    // SAFETY: inside the stage's A tile, written before the last barrier.
                    unsafe { ld_shared_f32(at.offset_bytes((row * A_LD + col) * 4)) }
                };
                [ld(0, 0), ld(8, 0), ld(0, 4), ld(8, 4)]
            })
        };
        // The lane's B fragments of column blocks `j0..j0 + N_GROUP` for step kk.
        let b_fragments = |stage: u32, kk: u32, j0: usize| -> [[f32; 2]; N_GROUP] {
            core::array::from_fn(|j| {
                let at = b_frag_at.offset_bytes(stage + (kk * B_LD + 8 * (j0 + j) as u32) * 4);
                // SAFETY: inside the stage's B tile, written before the last barrier.
                unsafe { [ld_shared_f32(at), ld_shared_f32(at.offset_bytes(4 * B_LD * 4))] }
            })
        };
        let next_stage = next_stage::<STAGES, STAGE>;

        // Prologue: tiles 0..STAGES - 1 in flight, then tile 0 waited for and published.
        let mut write_stage = start_pipeline::<STAGES, STAGE, BK>(&mut copy_tile);
        // SAFETY: waiting has no preconditions.
        unsafe { cp_async_wait_group::<{ STAGES - 2 }>() };
        sync_threads();

        let mut acc: Acc = [[[0.0f32; 4]; N_TILES]; M_TILES];
        let mut read_stage = 0;
        let mut k_next = (STAGES - 1) * BK;
        for _ in 0..k.div_ceil(BK) {
            // The stage of the previous tile: every warp passed the barrier after its last read.
            copy_tile(write_stage, k_next);
            write_stage = next_stage(write_stage);
            k_next += BK;

            for kk in (0..BK).step_by(8) {
                // B in groups of N_GROUP column blocks, so few fragments are live next to the
                // 128 accumulators.
                let a = a_fragments(read_stage, kk);
                let mut group = #[inline(always)]
                |j0: usize| {
                    let b = split_fragments(b_fragments(read_stage, kk, j0));
                    for (acc_i, &a_i) in acc.iter_mut().zip(&a) {
                        products(acc_i, a_i, &b, j0);
                    }
                };
                group(0);
                group(N_GROUP);
                group(2 * N_GROUP);
                group(3 * N_GROUP);
            }
            // Tile t + 1 complete (at most the STAGES - 2 newer groups pending); the barrier
            // publishes it and proves every warp is done with the stage copied next.
            // SAFETY: as above.
            unsafe { cp_async_wait_group::<{ STAGES - 2 }>() };
            sync_threads();
            read_stage = next_stage(read_stage);
        }
        // Drain the (zero-filled) copies still in flight.
        // SAFETY: as above.
        unsafe { cp_async_wait_group::<0>() };

        for (i, acc_i) in acc.iter().enumerate() {
            for (j, acc_ij) in acc_i.iter().enumerate() {
                for (e, &x) in acc_ij.iter().enumerate() {
                    let row = row0 + warp_row + 16 * i as u32 + g + 8 * (e as u32 / 2);
                    let col = col0 + warp_col + 8 * j as u32 + 2 * t + e as u32 % 2;
                    // SAFETY: the GEMM contract.
                    unsafe { store_exact(&args, row, col, x) };
                }
            }
        }
    }

    gemm_entry! { ladder:
        /// `C = alpha * A * B + beta * C` for one batch member (or K slice) per `blockIdx.z`,
        /// with 16-byte copies only: the host launches it with `a` and `b` 16-byte aligned,
        /// `lda`, `ldb` and `k` (the slice depth) multiples of 4, and `B` readable up to `n`
        /// rounded up to 4 columns (`SPEC.padding`: it pads operands that are not so).
        sgemm_tensor_core => gemm
    }
}
