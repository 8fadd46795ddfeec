//! Exact power-of-two scaling that keeps the 3xTF32 split accurate over the whole `f32` range.
//!
//! The split `x = hi + lo` ([`tensor_core`](crate::ladder::tensor_core)) is accurate when `lo` and the
//! partial products `a_hi b_lo`, `a_lo b_hi`, `a_hi b_hi` are normal numbers. At the edges of
//! the range they are not: the `lo` of a value below about `2^-115` is subnormal and loses its
//! bits when rounded to TF32, and two small operands (`1e-20` each) give products that leave the
//! normal range inside the tensor cores. `f32` FMAs keep their accuracy there, so the split must
//! not lose it either.
//!
//! The cure costs nothing in accuracy because multiplying by a power of two is exact: before the
//! split, every row of an `A` tile (its `BK` values along `K`) is multiplied by `2^sa[i]` and
//! every column of a `B` tile by `2^sb[j]`, with the shifts chosen from the row's (column's)
//! largest magnitude so that the scaled values sit in the middle of the range. The tile's
//! products then come out as `2^(sa[i] + sb[j])` times the true ones, and the step that adds
//! them to the accumulators multiplies by `2^-(sa[i] + sb[j])` first ([`unscale`]).
//!
//! Ordinary data needs no scaling: a row whose largest magnitude has its exponent inside
//! [`SAFE_EXPONENTS`] gets shift `0` (an exact multiplication by `1`), and when every row and
//! column of a tile has shift `0` the kernel adds the step as it is. The window is as wide as
//! it can be while keeping, for any pair of rows and columns inside it,
//! - every product of values within `2^-DEPTH` of their row's and column's largest (the values
//!   that decide the result's accuracy) and the partial products of their split parts normal:
//!   `2 * min - 2 * DEPTH - 11 >= -115`, and
//! - a `K`-long sum of products of the largest values finite for any `K < 2^31`:
//!   `2 * (max + 1) + 31 <= 127`.
//!
//! Rows and columns outside the window are scaled so that their largest magnitude lands in
//! `[1, 2)`; a row of zeros and subnormals alone is scaled by `2^126`. A row that holds an
//! infinity or NaN keeps shift `0`: its products are non-finite and the kernel's epilogue
//! recomputes those outputs with `f32` FMAs.
//!
//! What scaling cannot cure is a row whose values span more than about `2^(126 - DEPTH)`
//! together with a column whose matching values do too (the small values of the row meeting the
//! large values of the column): such inputs keep the split's accuracy relative to the largest
//! terms only.

/// The exponents (of the largest magnitude in a row or column of a tile) left unscaled:
/// `[-28, 47]`, about `3.7e-9` to `1.4e14`.
pub const SAFE_EXPONENTS: (i32, i32) = (-28, 47);

/// How far below its row's largest magnitude a value still has every bit of its split kept
/// (in binades): values smaller than that contribute less than one `f32` rounding of the
/// largest term.
pub const DEPTH: i32 = 24;

const _: () = assert!(
    2 * SAFE_EXPONENTS.0 - 2 * DEPTH - 11 >= -115 && 2 * (SAFE_EXPONENTS.1 + 1) + 31 <= 127,
    "the window keeps the split's products normal and the sums finite"
);

/// The shift `s` for a row (or column) whose largest magnitude has the bit pattern
/// `max_abs_bits` (`f32::to_bits` of a non-negative value, or of an infinity or NaN): the row
/// is multiplied by `2^s`. Always in `-126..=126`, so `2^s` and `2^-s` are normal `f32`.
#[inline(always)]
pub const fn shift(max_abs_bits: u32) -> i32 {
    let biased = (max_abs_bits >> 23) as i32 & 0xff;
    let exponent = biased - 127;
    if biased == 0xff || (SAFE_EXPONENTS.0 <= exponent && exponent <= SAFE_EXPONENTS.1) {
        0
    } else if biased == 0 {
        // Zeros and subnormals only (a zero row is unchanged by any shift).
        126
    } else if exponent > 126 {
        -126
    } else {
        -exponent
    }
}

/// `2^e` for `e` in `-126..=127`, as the `f32` with that exponent and a zero mantissa.
#[inline(always)]
pub const fn exp2(e: i32) -> f32 {
    f32::from_bits(((e + 127) as u32) << 23)
}

/// `step * 2^-(sa + sb) + acc`: a tile's step of products, computed on operands scaled by
/// `2^sa` (the row) and `2^sb` (the column), added to the accumulator at the true scale. The
/// factor is applied in two exact halves, so it needs no exponent outside `f32`'s range; the
/// result is rounded where the true value is subnormal, as any `f32` sum would be.
#[inline(always)]
pub fn unscale(step: f32, sa: i32, sb: i32, acc: f32) -> f32 {
    let e = -(sa + sb);
    let half = e >> 1;
    mul_add(step * exp2(half), exp2(e - half), acc)
}

/// `a * b + c` rounded once.
#[inline(always)]
fn mul_add(a: f32, b: f32, c: f32) -> f32 {
    #[cfg(target_arch = "nvptx64")]
    {
        core::intrinsics::fmaf32(a, b, c)
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        a.mul_add(b, c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordinary_data_is_not_scaled() {
        for x in [1.0f32, 0.5, 4.0e-9, 1.0e14, 65504.0, 1.0e-3] {
            assert_eq!(shift(x.to_bits()), 0, "{x}");
        }
        assert_eq!(shift(f32::INFINITY.to_bits()), 0);
        assert_eq!(shift(f32::NAN.to_bits()), 0);
    }

    #[test]
    fn scaled_rows_land_in_one_two_and_every_shift_is_exact() {
        // Every binade, subnormals included, at its bottom, middle and top.
        for bits in (0..255u32).flat_map(|e| [1, 0x40_0000, 0x7f_ffff].map(|m| e << 23 | m)) {
            let x = f32::from_bits(bits);
            let s = shift(bits);
            assert!((-126..=126).contains(&s));
            let scaled = x * exp2(s);
            let e = (scaled.to_bits() >> 23) as i32 - 127;
            assert!(
                (SAFE_EXPONENTS.0..=SAFE_EXPONENTS.1).contains(&e),
                "{x:e} scaled by 2^{s} is {scaled:e}"
            );
            // Exact: scaling back returns the value.
            assert_eq!(scaled * exp2(-s), x, "{x:e} with 2^{s}");
        }
        assert_eq!(shift(f32::MAX.to_bits()), -126);
        assert_eq!(shift(1.0e-40f32.to_bits()), 126);
    }

    #[test]
    fn unscale_is_exact_for_representable_results() {
        for (sa, sb) in [(0, 0), (126, 126), (-126, -126), (126, -126), (100, 27), (-3, 126)] {
            for step in [1.0f32, 1.5, -3.25, 1.0e-10, 7.0e6] {
                let truth = step as f64 * 2f64.powi(-(sa + sb));
                let got = unscale(step, sa, sb, 0.0);
                if truth.abs() >= f32::MIN_POSITIVE as f64 && truth.abs() <= f32::MAX as f64 {
                    assert_eq!(got as f64, truth, "step {step} sa {sa} sb {sb}");
                }
            }
        }
    }
}
