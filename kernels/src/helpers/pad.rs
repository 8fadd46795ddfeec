//! `B = A` padded with zeros, for each member of a batch: copies a row-major `rows x cols`
//! matrix into the top-left corner of a `rows_pad x cols_pad` block of a row-major `B` (leading
//! dimension `ldb`) and zeroes the rest of the block. The GPU backend uses it
//! - to give a kernel that only has 16-byte copies ([`tensor_core`](crate::ladder::tensor_core),
//!   [`warpgroup`](crate::production::warpgroup)) operands whose rows are a multiple of 4 floats
//!   long (the zero columns of `A` and rows of `B` add nothing to the product);
//! - with a `list` of member addresses (see [Batches](crate::infra::params#batches)), to gather a
//!   batch of matrices anywhere in memory into one strided buffer, and to scatter the results
//!   back (`rows_pad = rows`, `cols_pad = cols`: a plain copy).
//!
//! A warp along a row, each thread copying [`COLS`] elements 32 columns apart in each of [`ROWS`]
//! rows 8 apart: every load and store of a warp is 32 consecutive floats (coalesced, at any
//! alignment of the source), and a thread's `COLS x ROWS` loads are independent, so they are in
//! flight together: what bounds a copy is how many reads the SMs keep in flight.

use crate::infra::launch::KernelSpec;

/// Columns each thread copies in a row, 32 apart.
const COLS: u32 = 4;
/// Rows each thread copies, 8 apart (the block's height).
const ROWS: u32 = 2;

/// Launch configuration of [`sgemm_pad`](self): blocks of 32 x 8 threads over `8 ROWS` rows and
/// `32 COLS` columns of the destination block.
pub const SPEC: KernelSpec = KernelSpec {
    tile: (8 * ROWS, 32 * COLS),
    ..KernelSpec::elementwise(
        "pad",
        "sgemm_pad",
        "B = A zero-padded, per batch member (16-byte-only kernels; gathering a batch)",
    )
};

crate::infra::params::kernel_params! { $ pad_entry,
    /// [`sgemm_pad`](self)'s parameters: in each member, `a` is row-major `rows x cols` with
    /// `lda`, `b` row-major with `ldb`, its `rows_pad x cols_pad` block written. Member `z`'s
    /// `a` and `b` are `a + z a_step` and `b + z b_step`, or, with `list != 0`, row `z` of
    /// the table of `(a, b)` addresses at `list` (`a`, `b` and the steps then unread).
    PadParams<In, Out> {
        rows: u32, cols: u32, a: In, lda: u32, rows_pad: u32, cols_pad: u32, b: Out, ldb: u32,
        a_step: u64, b_step: u64, list: u64,
    }
}

#[cfg(all(target_arch = "nvptx64", not(feature = "ladder")))]
mod device_code {
    use super::{COLS, PadParams, ROWS, SPEC, pad_entry};
    use crate::infra::device::*;
    use crate::infra::ptx::ld_global_nc_f32;

    /// `b[r][c] = a[r][c]` for `r < rows`, `c < cols`, and `0` elsewhere in `b`'s
    /// `rows_pad x cols_pad` block, for this block's member of the batch.
    ///
    /// # Safety
    /// In every member, `a` is a row-major `rows x cols` matrix with `lda >= cols`, `b` a
    /// row-major matrix of at least `rows_pad x cols_pad` (`rows_pad >= rows`,
    /// `cols_pad >= cols`) with `ldb >= cols_pad`, apart from every other member's `b` and
    /// from every `a`; a nonzero `list` is the device address of `gridDim.z` pairs of such
    /// addresses; launched with [`SPEC`]'s block over a `rows_pad x cols_pad` grid, `gridDim.z`
    /// members.
    unsafe fn pad(
        PadParams { rows, cols, a, lda, rows_pad, cols_pad, b, ldb, a_step, b_step, list }: PadParams<
            *const f32,
            *mut f32,
        >,
    ) {
        // The host may launch the copy as a dependent of the one before it.
        wait_for_earlier_kernels();
        let (a, b) = if list == 0 {
            (member(a.cast_mut(), a_step).cast_const(), member(b, b_step))
        } else {
            // SAFETY: row blockIdx.z of the table exists (the contract).
            unsafe {
                let row = (list as *const u64).add(2 * block_z() as usize);
                (*row as *const f32, *row.add(1) as *mut f32)
            }
        };
        let (row0, col0) = element(&SPEC);
        let at = |i: u32, j: u32| (row0 + 8 * i, col0 + 32 * j);
        let xs: [[f32; COLS as usize]; ROWS as usize] = core::array::from_fn(|i| {
            core::array::from_fn(|j| {
                let (row, col) = at(i as u32, j as u32);
                // SAFETY: the load is guarded to A's rows x cols.
                unsafe { ld_global_nc_f32(a.wrapping_add(offset(row, col, lda)), row < rows && col < cols) }
            })
        });
        for (i, xs) in xs.iter().enumerate() {
            for (j, &x) in xs.iter().enumerate() {
                let (row, col) = at(i as u32, j as u32);
                if row < rows_pad && col < cols_pad {
                    // SAFETY: row < rows_pad, col < cols_pad is inside B's block.
                    unsafe { *b.add(offset(row, col, ldb)) = x };
                }
            }
        }
    }

    pad_entry! {
        /// [`pad`]'s entry point.
        sgemm_pad => pad
    }
}
