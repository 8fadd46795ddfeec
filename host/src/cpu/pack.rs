//! Packing: copying a block of `A` or `B` into the panel order the microkernel reads.
//!
//! The microkernel streams through its operands strictly in order, one `kc` step at a time, so
//! each block is rearranged once into contiguous panels: `A` into `MR`-row panels stored column
//! by column, `B` into `NR`-column panels stored row by row. Packing is where the caller's
//! layout ends: leading dimensions (and later transposes) are read here and nowhere else, panels
//! are padded with zeros to full `MR` or `NR`, and what the microkernel then reads is contiguous,
//! aligned to nothing in particular and free of TLB misses. Its cost, `O(mk + kn)` per block,
//! is spread over `O(mnk)` multiply-adds.

use std::ops::Range;

use crate::matrix::MatRef;

/// Packs `A[rows, cols]` (a block of `mc x kc`) into `ceil(mc / mr)` panels of `mr x kc`: panel
/// `q` holds rows `q*mr ..`, element `(r, p)` at `out[q*mr*kc + p*mr + r]`, rows past the block
/// zero. `out` must hold `ceil(mc / mr) * mr * kc` values.
pub fn pack_a(a: &MatRef, rows: Range<usize>, cols: Range<usize>, mr: usize, out: &mut [f32]) {
    match mr {
        12 => pack_a_panels::<12>(a, rows, cols, out),
        6 => pack_a_panels::<6>(a, rows, cols, out),
        4 => pack_a_panels::<4>(a, rows, cols, out),
        _ => unreachable!("no microkernel has MR = {mr}"),
    }
}

/// [`pack_a`] for one `MR`: a constant panel height lets the compiler unroll the gather of one
/// column (`MR` rows, `lda` apart) into one contiguous `MR`-value store, without bounds checks.
fn pack_a_panels<const MR: usize>(a: &MatRef, rows: Range<usize>, cols: Range<usize>, out: &mut [f32]) {
    let kc = cols.len();
    for (q, panel) in out.chunks_exact_mut(MR * kc).take(rows.len().div_ceil(MR)).enumerate() {
        let first = rows.start + q * MR;
        let height = MR.min(rows.end - first);
        if height == MR {
            // Every source row is exactly `kc` long, so `p < kc` needs no check per element.
            let src: [&[f32]; MR] = std::array::from_fn(|r| &a.row(first + r)[cols.clone()][..kc]);
            for (p, dst) in panel[..kc * MR].as_chunks_mut::<MR>().0.iter_mut().enumerate() {
                let column: [f32; MR] = std::array::from_fn(|r| src[r][p]);
                dst.copy_from_slice(&column);
            }
        } else {
            panel.fill(0.0);
            for r in 0..height {
                for (p, &x) in a.row(first + r)[cols.clone()].iter().enumerate() {
                    panel[p * MR + r] = x;
                }
            }
        }
    }
}

/// Packs panel `q` of `B[rows, cols]` (a block of `kc x nc`): columns `cols.start + q*nr ..`,
/// element `(p, j)` at `panel[p*nr + j]`, columns past the block zero. `panel` holds `kc * nr`.
pub fn pack_b_panel(
    b: &MatRef,
    rows: Range<usize>,
    cols: Range<usize>,
    nr: usize,
    q: usize,
    panel: &mut [f32],
) {
    let first = cols.start + q * nr;
    let width = nr.min(cols.end - first);
    for (p, dst) in rows.map(|p| b.row(p)).zip(panel.chunks_exact_mut(nr)) {
        dst[..width].copy_from_slice(&p[first..first + width]);
        dst[width..].fill(0.0);
    }
}
