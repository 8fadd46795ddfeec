//! CPU step 3, cache blocking (seed 002, "Kernel 2"): the loop-reordered kernel run on tiles.
//!
//! Loop reorder streams a whole row of `B` per multiply-add of `A`; once `B` outgrows the cache,
//! every pass over it comes from memory. Here `k` and `n` are cut into tiles of `TILE_K x
//! TILE_N` (64 KB of `B`, well inside L2): the `i, p, j` loops run over one
//! tile at a time, so a tile of `B` is reused by every row of `A` while it is cache-resident, and
//! the `TILE_N` slice of a `C` row it updates stays in L1 across its `TILE_K` updates. The inner
//! loop is the same vectorized row update as before; what changed is where its operands come
//! from. It is still bound by loads and stores of `C` (one load and one store per FMA), which the
//! register microkernel of the next step removes. (Where the short inner loop costs more than
//! the misses it saves, it is slower than loop reorder: `docs/performance-notes.md`.)

use super::CpuKernel;
use crate::matrix::{MatMut, MatRef};

/// Registry row.
pub const KERNEL: CpuKernel = CpuKernel {
    name: "cache_blocked",
    summary: "loop reorder on 128 x 128 tiles of B that stay in cache while every row of A passes",
    threaded: false,
    detected: || true,
    any_layout: false,
    run: |alpha, a, b, beta, c, _threads| {
        gemm(alpha, a, b, beta, c);
        Ok(())
    },
};

const TILE_K: usize = 128;
const TILE_N: usize = 128;

fn gemm(alpha: f32, a: &MatRef, b: &MatRef, beta: f32, c: &mut MatMut) {
    super::scale_c(beta, c);
    let (n, k) = (c.cols, a.cols);
    for p0 in (0..k).step_by(TILE_K) {
        let p1 = k.min(p0 + TILE_K);
        for j0 in (0..n).step_by(TILE_N) {
            let j1 = n.min(j0 + TILE_N);
            for i in 0..c.rows {
                let a_row = &a.row(i)[p0..p1];
                let c_row = &mut c.row_mut(i)[j0..j1];
                for (p, &a_ip) in (p0..p1).zip(a_row) {
                    let s = alpha * a_ip;
                    for (c_ij, &b_pj) in c_row.iter_mut().zip(&b.row(p)[j0..j1]) {
                        *c_ij += s * b_pj;
                    }
                }
            }
        }
    }
}
