//! `B = A^T` for a row-major `rows x cols` matrix `A`: how the GPU backend turns a transposed
//! or column-major operand into the row-major one its GEMM kernels read (`O(mk)` traffic
//! beside the GEMM's `O(mnk)` work).
//!
//! A block moves one 32 x 32 tile through shared memory: its threads read rows of `A` (each
//! warp one row, 128 contiguous bytes) and write rows of `B`, which are columns of the tile,
//! so both global accesses are coalesced. The shared tile has 33 columns: a warp reading a
//! column of it then touches 32 different banks instead of one.

use crate::infra::launch::{KernelSpec, Module, Padding, Shapes};

/// Side of the square tile one block transposes.
const TILE: u32 = 32;
/// Rows the block's threads cover at once (`TILE / ROWS_PER_PASS` passes per tile).
const ROWS_PER_PASS: u32 = 8;
/// The shared tile's leading dimension: one padding column.
const SMEM_LD: u32 = TILE + 1;

/// Launch configuration of [`sgemm_transpose`](self); its `tile` is `A`'s.
pub const SPEC: KernelSpec = KernelSpec {
    name: "transpose",
    entry: "sgemm_transpose",
    vec4_entry: None,
    vec4_b: true,
    summary: "B = A^T through a padded 32 x 32 shared tile (transposed operands)",
    block: (TILE, ROWS_PER_PASS),
    tile: (TILE, TILE),
    smem_bytes: TILE * SMEM_LD * 4,
    min_blocks_per_sm: 0,
    members_per_block: 1,
    k_slices: None,
    padding: Padding::Never,
    arch: None,
    module: Module::Production,
    shapes: Shapes::Any,
    reads_a_transposed: false,
    reads_b_transposed: false,
};

crate::infra::params::kernel_params! { $ transpose_entry,
    /// [`sgemm_transpose`](self)'s parameters: in each member (see
    /// [Batches](crate::infra::params#batches)), `a` is row-major `rows x cols` with `lda`, `b`
    /// row-major `cols x rows` with `ldb`.
    TransposeParams<In, Out> {
        rows: u32, cols: u32, a: In, lda: u32, b: Out, ldb: u32, a_step: u64, b_step: u64,
    }
}

#[cfg(all(target_arch = "nvptx64", not(feature = "ladder")))]
mod device_code {
    use super::{ROWS_PER_PASS, SMEM_LD, SPEC, TILE, TransposeParams, transpose_entry};
    use crate::infra::device::*;
    use crate::infra::ptx::ld_global_nc_f32;

    /// `b = a^T` for this block's member of the batch: `a` is row-major `rows x cols` with
    /// `lda >= cols`, `b` row-major `cols x rows` with `ldb >= rows`.
    ///
    /// # Safety
    /// In every member, `a` and `b` are device pointers to those matrices, and no `b` overlaps
    /// another matrix; launched with [`SPEC`]'s block, shared memory and grid
    /// (`SPEC.grid(rows, cols)`, `gridDim.z` members).
    unsafe fn transpose(
        TransposeParams { rows, cols, a, lda, b, ldb, a_step, b_step }: TransposeParams<*const f32, *mut f32>,
    ) {
        // The host may launch the copy as a dependent of the one before it.
        wait_for_earlier_kernels();
        let (a, b) = (member(a.cast_mut(), a_step).cast_const(), member(b, b_step));
        let tile = dynamic_shared_f32();
        let (tx, ty) = (thread_x(), thread_y());
        let (row0, col0) = (block_y() * SPEC.tile.0, block_x() * SPEC.tile.1);
        for pass in (0..TILE).step_by(ROWS_PER_PASS as usize) {
            let (i, j) = (row0 + ty + pass, col0 + tx);
            // SAFETY: the guard admits only elements of A; the tile index is below
            // TILE * SMEM_LD, the shared memory the launch provides.
            unsafe {
                let x = ld_global_nc_f32(a.wrapping_add(offset(i, j, lda)), i < rows && j < cols);
                *tile.add(((ty + pass) * SMEM_LD + tx) as usize) = x;
            }
        }
        sync_threads();
        for pass in (0..TILE).step_by(ROWS_PER_PASS as usize) {
            // Thread (tx, ty) writes element (j, i) of B: row j = column j of A's tile.
            let (i, j) = (row0 + tx, col0 + ty + pass);
            if i < rows && j < cols {
                // SAFETY: j < cols and i < rows: inside B (cols x rows); the tile index is in
                // the shared tile.
                unsafe { *b.add(offset(j, i, ldb)) = *tile.add((tx * SMEM_LD + ty + pass) as usize) };
            }
        }
    }

    transpose_entry! {
        /// [`transpose`]'s entry point.
        sgemm_transpose => transpose
    }
}
