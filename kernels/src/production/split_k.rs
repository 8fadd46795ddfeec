//! Step 10, split-K: the [`double_buffered`](crate::ladder::double_buffering) kernel with `K` divided
//! among `gridDim.z` blocks per tile, for shapes whose tiles alone cannot fill the GPU.
//!
//! At `n = 1024` a 128 x 128 tiling is 64 blocks, and an H100 has room for 264 of them at
//! once (132 SMs, two blocks each): three quarters of the GPU idle for the whole call. With
//! `K` cut into `S` slices, the same tiles become `64 S` blocks; block `z` of a tile multiplies
//! the `z`-th slice of `A`'s columns by the same slice of `B`'s rows and writes its partial
//! product to a workspace (`S` matrices of `m x n`). A second kernel,
//! [`sgemm_split_k_reduce`](self), adds the `S` partials in a fixed order (so results do not
//! vary from run to run, unlike atomic additions) and applies `alpha` and `beta` to `C`.
//!
//! The slices are a batch (the batch convention of [`params`](crate::infra::params#batches)):
//! the host passes the slice depth as `k`, steps of that many columns of `A` and rows of `B`,
//! and the workspace as `C` with a step of `m x n`, so the kernel itself is `double_buffered`,
//! and any GEMM kernel splits `K` the same way
//! ([`tensor_core`](crate::ladder::tensor_core), [`warpgroup`](crate::production::warpgroup)).
//!
//! On sm_90 the host launches the reduction with programmatic dependent launch, so that its
//! blocks are set up while the slices still run; it waits for them (`griddepcontrol.wait`)
//! before it reads a partial.
//!
//! The host chooses `S` (`Gpu::k_slices`: by its cost model, on grids of fewer than two waves
//! of resident blocks); with one slice the kernel is `double_buffered` writing `C` itself. The slices are equal, and a multiple of 4 deep when
//! they load 16 bytes at a time (so that the loads stay aligned); the few columns left over are
//! multiplied by the reduction.

use crate::infra::launch::{KernelSpec, Module, Padding};

/// Launch configuration of the split-K GEMM: `double_buffered`'s, with `gridDim.z` slices.
pub const SPEC: KernelSpec = KernelSpec {
    name: "split_k",
    entry: "sgemm_split_k",
    vec4_entry: Some("sgemm_split_k_vec4"),
    summary: "double_buffered with K split across blockIdx.z for small grids, reduced in order",
    k_slices: Some(crate::ladder::warp_tile::BM),
    // Where the padding copies (a launch, and 8 bytes of traffic an element) and the 4-byte
    // loads' slower loop cost the same (the derivation: docs/performance-notes.md, "Padded
    // copies for the strict tile").
    padding: Padding::Above { fixed: 530_000_000, per_copied: 470 },
    module: Module::Production,
    ..crate::ladder::double_buffering::SPEC
};

/// [`SPEC`] on a column-major `A` ([`KernelSpec::reads_a_transposed`]), read as it lies (the
/// shared body's `A_COLUMNS`; the tiles in shared memory and the sums are the same).
pub const TN_SPEC: KernelSpec = SPEC.reading_columns(("split_k_tn", "sgemm_split_k_tn"), true, false);
/// [`SPEC`] on a column-major `B` ([`KernelSpec::reads_b_transposed`]).
pub const NT_SPEC: KernelSpec = SPEC.reading_columns(("split_k_nt", "sgemm_split_k_nt"), false, true);
/// [`SPEC`] on a column-major `A` and `B`.
pub const TT_SPEC: KernelSpec = SPEC.reading_columns(("split_k_tt", "sgemm_split_k_tt"), true, true);

/// Launch configuration of [`sgemm_split_k_reduce`](self).
pub const REDUCE: KernelSpec = KernelSpec::elementwise(
    "split_k_reduce",
    "sgemm_split_k_reduce",
    "C = alpha * (sum of the K slices' partial products) + beta * C",
);

crate::infra::params::kernel_params! { $ reduce_entry,
    /// [`sgemm_split_k_reduce`](self)'s parameters: `workspace` holds `slices` row-major
    /// `m x n` partials back to back; `a` (`m x tail`) and `b` (`tail x n`) are the columns of
    /// `A` and rows of `B` the slices left over, element `(i, p)` of `a` at `a[i * a_row_step +
    /// p * a_col_step]` (`(lda, 1)` row-major, `(1, lda)` column-major), likewise for `b`; `C` is
    /// `m x n` with `ldc`.
    ReduceParams<In, Out> {
        m: u32, n: u32, slices: u32, workspace: In, tail: u32,
        a: In, a_row_step: u32, a_col_step: u32, b: In, b_row_step: u32, b_col_step: u32,
        alpha: f32, beta: f32, c: Out, ldc: u32,
    }
}

#[cfg(target_arch = "nvptx64")]
pub(crate) mod device_code {
    use super::{REDUCE, ReduceParams, reduce_entry};
    use crate::infra::device::*;
    use crate::ladder::double_buffering::device_code::gemm;
    use crate::ladder::warp_tile::WARPS_N;

    /// `fold(.. fold(fold(0.0, load(0)), load(1)) .., load(count - 1))`: a running sum
    /// folded over `count` loaded terms in order, the terms loaded `G` at a time, each group's
    /// loads all issued before the first of its folds waits for one, so a thread waits for
    /// memory once a group instead of once a term.
    ///
    /// # Safety
    /// `load(i)` may be called for every `i < count`.
    #[inline(always)]
    unsafe fn fold_in_groups<const G: usize, T: Copy + Default>(
        count: u32,
        load: impl Fn(u32) -> T,
        fold: impl Fn(f32, T) -> f32,
    ) -> f32 {
        let mut sum = 0.0f32;
        let mut first = 0;
        while first < count {
            let in_group = |i: usize| first + (i as u32) < count;
            let terms: [T; G] =
                core::array::from_fn(|i| if in_group(i) { load(first + i as u32) } else { T::default() });
            for (i, &term) in terms.iter().enumerate() {
                if in_group(i) {
                    sum = fold(sum, term);
                }
            }
            first += G as u32;
        }
        sum
    }

    /// [`fold_in_groups`] with groups as large as `count` needs, up to 32 (`Gpu`'s most K
    /// slices): a thread waits for memory once where `count <= 32`, and issues few loads that
    /// its guards then drop.
    ///
    /// # Safety
    /// [`fold_in_groups`]'s.
    #[inline(always)]
    unsafe fn fold_grouped<T: Copy + Default>(
        count: u32,
        load: impl Fn(u32) -> T,
        fold: impl Fn(f32, T) -> f32,
    ) -> f32 {
        // SAFETY: the caller's contract.
        unsafe {
            match count {
                ..=4 => fold_in_groups::<4, T>(count, load, fold),
                5..=8 => fold_in_groups::<8, T>(count, load, fold),
                9..=16 => fold_in_groups::<16, T>(count, load, fold),
                _ => fold_in_groups::<32, T>(count, load, fold),
            }
        }
    }

    /// One K slice of a split-K launch (the batch member `blockIdx.z`): `double_buffered`
    /// into that slice's partial of the workspace, reading `A` column-major where `AT`, `B`
    /// where `BT`.
    ///
    /// # Safety
    /// The GEMM contract (see [`gemm_entry!`](crate::infra::device)) for the slice.
    #[inline(always)]
    unsafe fn slice<const VEC4: bool, const AT: bool, const BT: bool>(args: GemmArgs) {
        // SAFETY: the caller's contract.
        unsafe { gemm::<VEC4, 8, 1, { WARPS_N as usize }, 1, false, AT, BT>(args) }
    }

    gemm_entry! { production:
        /// Split-K GEMM of one K slice per `blockIdx.z`, scalar global loads.
        sgemm_split_k => slice::<false, false, false>
    }

    gemm_entry! { production:
        /// Split-K GEMM with 16-byte global loads (the `double_buffered_vec4` conditions, with
        /// the slice depth as `k`).
        sgemm_split_k_vec4 => slice::<true, false, false>
    }

    gemm_entry! { production:
        /// [`sgemm_split_k_vec4`] on a column-major `A` (`lda`, `m`, `ldb`, `n` multiples of 4).
        sgemm_split_k_tn => slice::<true, true, false>
    }

    gemm_entry! { production:
        /// [`sgemm_split_k_vec4`] on a column-major `B` (`lda`, `k`, `ldb` multiples of 4).
        sgemm_split_k_nt => slice::<true, false, true>
    }

    gemm_entry! { production:
        /// [`sgemm_split_k_vec4`] on a column-major `A` and `B` (`lda`, `m`, `ldb`, `k`
        /// multiples of 4).
        sgemm_split_k_tt => slice::<true, true, true>
    }

    /// `C = alpha * (sum_z partial_z + A[:, tail] B[tail, :]) + beta * C` over the `m x n`
    /// block: the partials added in the order `z = 0, 1, ...`, then the `tail` columns of `A`
    /// (from `a`) times the `tail` rows of `B` (from `b`) that the equal slices left over.
    /// `C` is not read when `beta == 0`.
    ///
    /// # Safety
    /// `workspace` holds `slices` row-major `m x n` matrices back to back; `a` is valid for
    /// `m x tail` with its steps, `b` for `tail x n` with its; `c` for `m x n` with `ldc`;
    /// launched with [`REDUCE`]'s block and grid.
    unsafe fn reduce(
        ReduceParams {
            m,
            n,
            slices,
            workspace,
            tail,
            a,
            a_row_step,
            a_col_step,
            b,
            b_row_step,
            b_col_step,
            alpha,
            beta,
            c,
            ldc,
        }: ReduceParams<*const f32, *mut f32>,
    ) {
        // Launched early on sm_90 (see the module docs): the partials are complete only now.
        wait_for_earlier_kernels();
        let (row, col) = element(&REDUCE);
        if row < m && col < n {
            let stride = m as usize * n as usize;
            let at = workspace.wrapping_add(offset(row, col, n));
            // SAFETY: row < m, col < n, z < slices, p < tail: inside every partial, A's tail
            // and B's tail.
            unsafe {
                let sum = fold_grouped(slices, |z| *at.add(z as usize * stride), |sum, x| sum + x);
                // The columns the slices left over, one FMA each in order, as `dot` does, in
                // groups of at most 8 (two values a term: larger groups would cost the
                // kernel's occupancy more registers than the rare long tail is worth).
                let element = |x: *const f32, (i, j): (u32, u32), (step_i, step_j): (u32, u32)| {
                    *x.add(i as usize * step_i as usize + j as usize * step_j as usize)
                };
                let load = |p| {
                    (
                        element(a, (row, p), (a_row_step, a_col_step)),
                        element(b, (p, col), (b_row_step, b_col_step)),
                    )
                };
                let fma_term = |sum, (x, y)| fma(x, y, sum);
                let rest = match tail {
                    ..=4 => fold_in_groups::<4, _>(tail, load, fma_term),
                    _ => fold_in_groups::<8, _>(tail, load, fma_term),
                };
                update_c(c.add(offset(row, col, ldc)), alpha, sum + rest, beta);
            }
        }
    }

    reduce_entry! {
        /// The split-K reduction: [`reduce`]'s entry point.
        #[cfg(not(feature = "ladder"))]
        sgemm_split_k_reduce => reduce
    }
}
