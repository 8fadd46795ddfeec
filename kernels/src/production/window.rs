//! The window: the elements that the 3xTF32 split multiplies exactly as they are, and the
//! running check that lets a kernel multiply without [`scaling`](crate::production::scaling)
//! first and fall back to it only where the data needs it.
//!
//! Scaling keeps [`warpgroup`](crate::production::warpgroup) accurate over the whole `f32`
//! range, but finding each tile's largest magnitudes costs a search per row and column of every
//! tile, and ordinary data never needs it. So the kernel first multiplies its tile without
//! scaling, and checks every element it splits on the way ([`WindowCheck`]): a few integer
//! instructions per element, and one block-wide vote at the end. Only a block that read an
//! element outside [`WINDOW`] multiplies its tile again, scaled. Its result is then the scaled
//! loop's, as it would have been without the check.
//!
//! The window is a property of single elements, so it holds whatever the GEMM's tiling, K
//! slices or batch: when every nonzero element of the `A` rows and `B` columns behind an output
//! has its exponent in `WINDOW`,
//! - every split part is normal or zero: the `lo` of `x` is a multiple of `x`'s last bit,
//!   `2^(e - 23)`, which is normal for `e >= -103`;
//! - every partial product `a_hi b_hi`, `a_hi b_lo`, `a_lo b_hi` is normal or zero:
//!   `2 * min - 23 >= -126`;
//! - a `K`-long sum of products stays finite for any `K < 2^31`: `2 * (max + 1) + 31 <= 127`,
//!   as in `scaling`.
//!
//! So the split loses no bit that `f32` arithmetic keeps, and the tensor cores see no subnormal
//! and no overflow. Infinities and NaN are outside: the scaled loop handles them.

/// The exponents a nonzero element may have for the GEMM to skip scaling: `[-51, 47]`, about
/// `4.4e-16` to `2.8e14` in magnitude.
pub const WINDOW: (i32, i32) = (-51, 47);

const _: () = assert!(
    WINDOW.0 - 23 >= -126 && 2 * WINDOW.0 - 23 >= -126 && 2 * (WINDOW.1 + 1) + 31 <= 127,
    "the window keeps every split part and partial product normal and every sum finite"
);

/// The bits of the smallest magnitude in the window, and of the least above it.
const LOW: u32 = ((WINDOW.0 + 127) as u32) << 23;
const END: u32 = ((WINDOW.1 + 128) as u32) << 23;

/// Whether the element with bit pattern `bits` (`f32::to_bits`) needs no scaling: zero (of
/// either sign), or finite with its exponent in [`WINDOW`].
#[inline(always)]
pub const fn in_window(bits: u32) -> bool {
    let magnitude = bits & 0x7fff_ffff;
    magnitude == 0 || magnitude.wrapping_sub(LOW) < END - LOW
}

/// A running check of elements against the window: [`holds`](Self::holds) is true exactly when
/// every element [`seen`](Self::see) is [`in_window`]. It keeps the largest and the smallest
/// nonzero magnitude, as bits shifted left by one (which drops the sign), so that each element
/// costs three integer instructions: a shift, a maximum, and a minimum of the shifted bits less
/// one (which takes zero to `u32::MAX`, out of the minimum's way).
#[derive(Clone, Copy, Debug)]
pub struct WindowCheck {
    largest: u32,
    smallest_less_one: u32,
}

impl WindowCheck {
    /// A check that has seen nothing yet (and holds).
    #[inline(always)]
    pub const fn new() -> Self {
        Self { largest: 0, smallest_less_one: u32::MAX }
    }

    /// Adds `x` to the elements checked.
    #[inline(always)]
    pub fn see(&mut self, x: f32) {
        let doubled = x.to_bits() << 1;
        self.largest = self.largest.max(doubled);
        self.smallest_less_one = self.smallest_less_one.min(doubled.wrapping_sub(1));
    }

    /// Whether every element seen is in the window.
    #[inline(always)]
    pub const fn holds(&self) -> bool {
        self.largest < END << 1 && self.smallest_less_one >= (LOW << 1) - 1
    }
}

impl Default for WindowCheck {
    fn default() -> Self {
        Self::new()
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
        for bits in samples() {
            let (biased, mantissa) = (bits >> 23 & 0xff, bits & 0x7f_ffff);
            let e = biased as i32 - 127;
            let expected = (biased == 0 && mantissa == 0)
                || (biased != 0 && biased != 255 && (WINDOW.0..=WINDOW.1).contains(&e));
            assert_eq!(in_window(bits), expected, "{:e} ({bits:#x})", f32::from_bits(bits));
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

    /// Bit patterns of every exponent, with the mantissas at the ends and the middle, of both signs.
    fn samples() -> impl Iterator<Item = u32> {
        (0..=255u32).flat_map(|biased| {
            [0, 1, 0x40_0000, 0x7f_ffff]
                .into_iter()
                .flat_map(move |mantissa| [0, 1u32 << 31].map(|sign| sign | biased << 23 | mantissa))
        })
    }

    #[test]
    fn the_check_holds_exactly_when_every_element_is_in_the_window() {
        assert!(WindowCheck::new().holds());
        for bits in samples() {
            let mut one = WindowCheck::new();
            one.see(f32::from_bits(bits));
            assert_eq!(one.holds(), in_window(bits), "{:e} ({bits:#x})", f32::from_bits(bits));
            // With zeros and a value of each end of the window beside it.
            let mut many = WindowCheck::new();
            for x in [0.0, -0.0, f32::from_bits(LOW), f32::from_bits(bits), -f32::from_bits(END - 1)] {
                many.see(x);
            }
            assert_eq!(many.holds(), in_window(bits), "{:e} among others", f32::from_bits(bits));
        }
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
