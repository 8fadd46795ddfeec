//! Step 6, vectorized loads with `A` transposed into shared memory.
//!
//! The 2D kernel's fragment loads are 16 scalar `LDS` per `p`, and its `A` fragment reads 8
//! elements 8 floats apart. Here the `A` tile is stored transposed (`K`-major: `a_tile[p][row]`),
//! so a thread's 8 `A` values for one `p` are contiguous, like its 8 `B` values: each fragment
//! is two `ld.shared.v4` (`LDS.128`), 4 instructions instead of 16. Global loads become 16-byte
//! `ld.global.nc.v4` (one per thread per tile for each of `A` and `B`), and the `B` tile is
//! written with `st.shared.v4`.
//!
//! 16-byte loads need 16-byte aligned addresses: the host launches the `vec4` entry only when
//! `lda`, `ldb`, `k` and `n` are multiples of 4 (device buffers start 256-byte aligned, and no
//! vector straddles a row's end), and the scalar entry, with per-element guards, otherwise;
//! both are the same code (`device::load4_global`).
//!
//! Tile: 128x128 of `C`, `K` step 8, 256 threads (8x8 outputs each), 8 KiB of shared memory.

use crate::infra::launch::{KernelSpec, Module, Padding, Shapes};

/// Rows and columns of `C` per block.
const BM: u32 = 128;
const BN: u32 = 128;
/// Depth of one shared-memory tile along `K`.
const BK: u32 = 8;
/// Rows and columns of `C` per thread.
const TM: u32 = 8;
const TN: u32 = 8;

/// Launch configuration of [`sgemm_vectorized`](self).
pub const SPEC: KernelSpec = KernelSpec {
    name: "vectorized",
    entry: "sgemm_vectorized",
    vec4_entry: Some("sgemm_vectorized_vec4"),
    vec4_b: true,
    summary: "16-byte global and shared loads; A transposed in shared memory",
    block: (BM * BN / (TM * TN), 1),
    tile: (BM, BN),
    smem_bytes: (BK * BM + BK * BN) * 4,
    min_blocks_per_sm: 0,
    members_per_block: 1,
    k_slices: None,
    padding: Padding::Never,
    arch: None,
    module: Module::Ladder,
    shapes: Shapes::Any,
    reads_a_transposed: false,
    reads_b_transposed: false,
};

const _: () = assert!(
    BM * BK / 4 == SPEC.threads()
        && BK * BN / 4 == SPEC.threads()
        && TM.is_multiple_of(4)
        && TN.is_multiple_of(4),
    "each thread loads one 4-vector of each tile; fragments are whole 4-vectors"
);

#[cfg(target_arch = "nvptx64")]
mod device_code {
    use super::{BK, BM, BN, TM, TN};
    use crate::infra::device::*;
    use crate::infra::ptx::{SharedAddr, ld_shared_v4_f32, st_shared_v4_f32};

    #[inline(always)]
    unsafe fn gemm<const VEC4: bool>(GemmArgs { m, n, k, alpha, a, lda, b, ldb, beta, c, ldc }: GemmArgs) {
        let tid = thread_x();
        let (row0, col0) = (block_y() * BM, block_x() * BN);
        let (t_row, t_col) = (tid / (BN / TN), tid % (BN / TN));
        // The 4-vector of each tile this thread loads: A row a_row, columns a_col..+4 (of 8);
        // B row b_row, columns b_col..+4 (of 128).
        let (a_row, a_col) = (tid / (BK / 4), tid % (BK / 4) * 4);
        let (b_row, b_col) = (tid / (BN / 4), tid % (BN / 4) * 4);

        // Shared memory: A tile transposed (BK x BM), then the B tile (BK x BN).
        let a_tile = dynamic_shared_f32();
        let b_tile = a_tile.wrapping_add((BK * BM) as usize);
        // SAFETY: both pointers are in this block's shared memory.
        let (a_smem, b_smem) = unsafe { (SharedAddr::of(a_tile), SharedAddr::of(b_tile)) };
        let mut acc = [[0.0f32; TN as usize]; TM as usize];
        let mut k0 = 0;
        while k0 < k {
            // SAFETY: load4_global's guards keep the loads inside A and B (aligned when VEC4, by
            // the host's dispatch); each shared slot has one writer.
            unsafe {
                let (gr, gc) = (row0 + a_row, k0 + a_col);
                let v = load4_global::<VEC4>(a.wrapping_add(offset(gr, gc, lda)), gr < m, gc, k);
                for (i, x) in v.0.iter().enumerate() {
                    *a_tile.add(((a_col + i as u32) * BM + a_row) as usize) = *x;
                }
                let (gr, gc) = (k0 + b_row, col0 + b_col);
                let v = load4_global::<VEC4>(b.wrapping_add(offset(gr, gc, ldb)), gr < k, gc, n);
                st_shared_v4_f32(b_smem.offset_bytes((b_row * BN + b_col) * 4), v);
            }
            sync_threads();
            for p in 0..BK {
                let mut a_frag = [0.0f32; TM as usize];
                let mut b_frag = [0.0f32; TN as usize];
                // SAFETY: 16-byte aligned addresses inside the tiles, written before the barrier.
                unsafe {
                    for q in 0..(TM / 4) as usize {
                        let at = a_smem.offset_bytes((p * BM + t_row * TM + q as u32 * 4) * 4);
                        a_frag[q * 4..q * 4 + 4].copy_from_slice(&ld_shared_v4_f32(at).0);
                    }
                    for q in 0..(TN / 4) as usize {
                        let at = b_smem.offset_bytes((p * BN + t_col * TN + q as u32 * 4) * 4);
                        b_frag[q * 4..q * 4 + 4].copy_from_slice(&ld_shared_v4_f32(at).0);
                    }
                }
                outer_product(&mut acc, &a_frag, &b_frag);
            }
            sync_threads();
            k0 += BK;
        }
        let (row, col) = (row0 + t_row * TM, col0 + t_col * TN);
        // SAFETY: C is valid for m x n with ldc (the kernel's contract).
        unsafe { update_c_block(&acc, row, col, m, n, alpha, beta, c, ldc) };
    }

    gemm_entry! { ladder:
        /// `C = alpha * A * B + beta * C` with scalar global loads: any pointer, any `ld`.
        sgemm_vectorized => gemm::<false>
    }

    gemm_entry! { ladder:
        /// `C = alpha * A * B + beta * C` with 16-byte global loads of `A` and `B`; the host
        /// launches it only when `a`, `b` are 16-byte aligned and `lda`, `ldb`, `k`, `n`
        /// multiples of 4.
        sgemm_vectorized_vec4 => gemm::<true>
    }
}
