//! The range check: one pass over `A` and `B` that proves, before the GEMM, that the 3xTF32
//! split is exact on every element without [`scaling`](crate::production::scaling).
//!
//! Scaling keeps [`warpgroup`](crate::production::warpgroup) accurate over the whole `f32`
//! range, but finding each tile's largest magnitudes costs every block of the GEMM a search per
//! tile (the cost is measured in `docs/performance-notes.md`), repeated for each block that
//! reads the same tile. Ordinary data never needs it. This pass reads each element once, at
//! the speed of memory, and sets a flag, the *verdict*, when some element lies outside
//! [`WINDOW`]; the GEMM kernel reads the verdict once and runs its loop without the search when
//! it is clear.
//!
//! The window is a property of single elements, so it holds whatever the GEMM's tiling, K
//! slices or batch: when every nonzero element of `A` and `B` has its exponent in `WINDOW`,
//! - every split part is normal or zero: the `lo` of `x` is a multiple of `x`'s last bit,
//!   `2^(e - 23)`, which is normal for `e >= -103`;
//! - every partial product `a_hi b_hi`, `a_hi b_lo`, `a_lo b_hi` is normal or zero:
//!   `2 * min - 23 >= -126`;
//! - a `K`-long sum of products stays finite for any `K < 2^31`: `2 * (max + 1) + 31 <= 127`,
//!   as in `scaling`.
//!
//! So the split loses no bit that `f32` arithmetic keeps, and the tensor cores see no subnormal
//! and no overflow. Infinities and NaN fail the check: the scaled path handles them.

use crate::infra::launch::KernelSpec;

/// The exponents a nonzero element may have for the GEMM to skip scaling: `[-51, 47]`, about
/// `4.4e-16` to `2.8e14` in magnitude.
pub const WINDOW: (i32, i32) = (-51, 47);

const _: () = assert!(
    WINDOW.0 - 23 >= -126 && 2 * WINDOW.0 - 23 >= -126 && 2 * (WINDOW.1 + 1) + 31 <= 127,
    "the window keeps every split part and partial product normal and every sum finite"
);

/// Whether the element with bit pattern `bits` (`f32::to_bits`) needs no scaling: zero (of
/// either sign), or finite with its exponent in [`WINDOW`].
#[inline(always)]
pub const fn in_window(bits: u32) -> bool {
    const LOW: u32 = ((WINDOW.0 + 127) as u32) << 23;
    const END: u32 = ((WINDOW.1 + 128) as u32) << 23;
    let magnitude = bits & 0x7fff_ffff;
    magnitude == 0 || magnitude.wrapping_sub(LOW) < END - LOW
}

/// 16-byte pieces of a row each thread checks.
const ITEMS: u32 = 4;

/// Launch configuration of [`sgemm_range_check`](self): blocks of 32 x 8 threads over `8 x 512`
/// elements, each warp along a row, `ITEMS` 16-byte loads in flight per thread.
pub const SPEC: KernelSpec = KernelSpec {
    tile: (8, 32 * 4 * ITEMS),
    ..KernelSpec::elementwise(
        "range_check",
        "sgemm_range_check",
        "the verdict: whether any element of a matrix lies outside the window 3xTF32 needs no scaling in",
    )
};

crate::infra::params::kernel_params! { $ range_check_entry,
    /// [`sgemm_range_check`](self)'s parameters: in each member of the batch (see
    /// [Batches](crate::infra::params#batches)), `x` is row-major `rows x cols` with `ld`, read
    /// in 16-byte pieces as the kernels that split operands read them (`x` 16-byte aligned,
    /// `ld` and `step` multiples of 4, rows readable up to `cols` rounded up to 4); `verdict` is the device address of a `u32` that the kernel sets to 1 when an element is
    /// not [`in_window`], and otherwise leaves as it is.
    RangeParams<In> { rows: u32, cols: u32, x: In, ld: u32, step: u64, verdict: u64 }
}

#[cfg(all(target_arch = "nvptx64", not(feature = "ladder")))]
mod device_code {
    use super::{ITEMS, RangeParams, SPEC, in_window, range_check_entry};
    use crate::infra::device::*;
    use crate::infra::ptx::{bar_red_or, ld_global_nc_v4_f32};

    /// Sets the verdict when an element of this block's `8 x 512` part of its member is not in
    /// the window.
    ///
    /// # Safety
    /// In every member, `x` is a 16-byte aligned row-major `rows x cols` matrix with
    /// `ld >= cols`, `ld` a multiple of 4, readable up to `cols` rounded up to 4 in every row;
    /// `verdict` is the address of a `u32` in device memory; launched with [`SPEC`]'s block over
    /// a `rows x cols` grid (`SPEC.grid`), `gridDim.z` members.
    unsafe fn range_check(RangeParams { rows, cols, x, ld, step, verdict }: RangeParams<*const f32>) {
        let x = member(x.cast_mut(), step).cast_const();
        let row = block_y() * SPEC.tile.0 + thread_y();
        let col0 = block_x() * SPEC.tile.1 + 4 * thread_x();
        let mut outside = false;
        for i in 0..ITEMS {
            let col = col0 + 128 * i;
            let ok = row < rows && col < cols;
            // SAFETY: guarded to the member's rows and its columns rounded up to 4 (the
            // contract); 16-byte aligned, as ld, step and col are multiples of 4.
            let v = unsafe { ld_global_nc_v4_f32(x.wrapping_add(offset(row, col, ld)), ok) };
            for (j, v) in v.0.iter().enumerate() {
                outside |= col + (j as u32) < cols && !in_window(v.to_bits());
            }
        }
        // SAFETY: every thread reaches it.
        if unsafe { bar_red_or(outside) } && thread_x() == 0 && thread_y() == 0 {
            // SAFETY: the verdict's address (the contract); every writer writes the same value.
            unsafe { core::ptr::write_volatile(verdict as *mut u32, 1) };
        }
    }

    range_check_entry! {
        /// [`range_check`]'s entry point.
        sgemm_range_check => range_check
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::production::warpgroup::round_tf32;

    /// The exponent of a normal `f32`.
    fn exponent(x: f32) -> i32 {
        ((x.to_bits() >> 23) & 0xff) as i32 - 127
    }

    #[test]
    fn the_window_is_its_exponents_and_zero() {
        for biased in 0..=255u32 {
            for mantissa in [0, 1, 0x40_0000, 0x7f_ffff] {
                for sign in [0, 1u32 << 31] {
                    let bits = sign | biased << 23 | mantissa;
                    let e = biased as i32 - 127;
                    let expected = (biased == 0 && mantissa == 0)
                        || (biased != 0 && biased != 255 && (WINDOW.0..=WINDOW.1).contains(&e));
                    assert_eq!(in_window(bits), expected, "{:e} ({bits:#x})", f32::from_bits(bits));
                }
            }
        }
        assert!(!in_window(f32::INFINITY.to_bits()) && !in_window(f32::NAN.to_bits()));
        assert!(!in_window(f32::MIN_POSITIVE.to_bits()) && !in_window(1.0e-40f32.to_bits()));
        assert!(
            in_window(1.0f32.to_bits()) && in_window(1.0e-15f32.to_bits()) && in_window(1.0e14f32.to_bits())
        );
    }

    /// The split of the `warpgroup` kernel.
    fn split(x: f32) -> (f32, f32) {
        let hi = round_tf32(x);
        (hi, round_tf32(x - hi))
    }

    #[test]
    fn split_parts_and_partial_products_of_window_values_are_normal_or_zero() {
        let smallest = f32::from_bits(((WINDOW.0 + 127) as u32) << 23);
        let largest = f32::from_bits(((WINDOW.1 + 128) as u32) << 23).next_down();
        // The smallest parts: values one last bit above a TF32 value, at the bottom.
        for x in [smallest, smallest.next_up(), smallest * 1.5f32.next_up(), largest] {
            for y in [smallest, smallest.next_up(), largest] {
                let ((xh, xl), (yh, yl)) = (split(x), split(y));
                for part in [xh, xl, yh, yl, xh * yh, xh * yl, xl * yh] {
                    assert!(part == 0.0 || part.is_normal(), "{x:e} x {y:e}: {part:e}");
                }
                assert!(exponent(xh * yh) <= 2 * WINDOW.1 + 2);
            }
        }
        // The largest sum of 2^31 - 1 products is finite.
        assert!((largest as f64).powi(2) * (i32::MAX as f64) < f32::MAX as f64);
    }
}
