//! Packing: copying a block of `A` or `B` into the panel order the microkernel reads.
//!
//! The microkernel streams through its operands strictly in order, one `kc` step at a time, so
//! each block is rearranged once into contiguous panels: `A` into `MR`-row panels stored column
//! by column, `B` into `NR`-column panels stored row by row. Packing is where the caller's
//! layout ends: leading dimensions, row- or column-major storage and so transposes (a
//! transpose is a view with the other layout) are read here and nowhere else, panels are
//! padded with zeros to full `MR` or `NR`, and what the microkernel then reads is contiguous
//! and starts at a cache line ([`packed`](super::packed) aligns the buffers). Its cost,
//! `O(mk + kn)` per block, is spread over `O(mnk)` multiply-adds.
//!
//! That spreading is thinnest at small sizes, and there a copy has no arithmetic to hide its
//! misses behind: between two products the microkernel's stream of `B` pushes the sources out
//! to L3. So the microkernels of the current panel's last tiles prefetch the next panel's source
//! lines ([`source_lines`], used by [`packed`](super::packed)), and what is left of packing a
//! row-major `A` is the transpose itself, done 16 steps at a time in AVX-512 registers where the
//! CPU has them ([`avx512`]), else in 4 x 4 SSE blocks. The panels of `B` are written 64 bytes at
//! a time ([`rows_across`]) with a gap between them ([`B_PANEL_GAP`]), and rows of `B` read in
//! runs shorter than a page are asked for a few rows ahead ([`SHORT_RUN_BYTES`]). What each of these
//! measured, and the many variants that did not help, are in `docs/performance-notes.md`
//! ("Figures moved out of the CPU modules' doc comments").

use std::ops::Range;

#[cfg(target_arch = "x86_64")]
use super::simd::{Avx512, Simd};
use super::simd::{LINE_FLOATS, line_offsets, prefetch_l2};
use crate::matrix::{Layout, MatRef};

/// [`pack_a`] at one `MR`, as a [`Microkernel`](super::microkernel::Microkernel) holds it.
pub type PackA = fn(&MatRef, Range<usize>, Range<usize>, &mut [f32]);
/// [`pack_b`] at one `NR`.
pub type PackB = fn(&MatRef, Range<usize>, Range<usize>, usize, &mut [f32]);

/// Packs `A[rows, cols]` (at most `MR` rows, `kc` columns) into one panel of `MR x kc`: element
/// `(r, p)` at `panel[p*MR + r]`, rows past the block zero. `panel` holds `MR * kc` values. `MR`
/// is a constant (the microkernel's): the loops unroll, the indices are checked once per panel.
pub fn pack_a<const MR: usize>(a: &MatRef, rows: Range<usize>, cols: Range<usize>, panel: &mut [f32]) {
    let (first, height) = (rows.start, rows.len());
    if a.layout == Layout::ColMajor {
        // Columns of A are contiguous: each step p of the panel is one copy of `height`, of a
        // length known at compile time for a full panel (a few vector moves, not a call).
        let steps = cols.zip(panel.as_chunks_mut::<MR>().0);
        if height == MR {
            for (p, dst) in steps {
                dst.copy_from_slice(&a.col(p)[first..first + MR]);
            }
        } else {
            for (p, dst) in steps {
                dst[..height].copy_from_slice(&a.col(p)[rows.clone()]);
                dst[height..].fill(0.0);
            }
        }
    } else {
        lines_across::<MR>(height, |r| &a.row(first + r)[cols.clone()], panel);
    }
}

/// Appends to `lines` one address in each cache line that [`pack_a`]`(a, rows, cols, ..)`
/// reads, in the order it reads them: what the microkernel prefetches while it works on the
/// panel before ([`packed`](super::packed)). A row-major `A` gives `MR` runs of `kc` values,
/// `ld` apart; a column-major one `kc` runs of `MR` values.
pub fn source_lines(a: &MatRef, rows: Range<usize>, cols: Range<usize>, lines: &mut Vec<*const f32>) {
    // The run's first value, then the first value of each line after it: `run[LINE_FLOATS -
    // offset]` begins the second line. A plain loop: a column-major panel has a run a step.
    let mut add = |run: &[f32]| {
        let start = run.as_ptr();
        lines.push(start);
        let mut next = LINE_FLOATS - start.addr() / size_of::<f32>() % LINE_FLOATS;
        while next < run.len() {
            lines.push(start.wrapping_add(next));
            next += LINE_FLOATS;
        }
    };
    match a.layout {
        Layout::RowMajor => rows.for_each(|r| add(&a.row(r)[cols.clone()])),
        Layout::ColMajor => cols.for_each(|p| add(&a.col(p)[rows.clone()])),
    }
}

/// Columns a block of [`columns_to_rows`] transposes at once: one 64-byte vector of each row.
const COLUMNS_AT_ONCE: usize = 16;

/// Writes the column-major `b` row-major into `out`, its rows `ld` apart (`ld >= b.cols`; the
/// values between one row's end and the next row's start are left as they were). Each block of
/// [`COLUMNS_AT_ONCE`] columns goes through [`transpose_rows`] (register transposes) straight
/// into its place in `out`; the columns left over one value at a time.
pub fn columns_to_rows(b: &MatRef, out: &mut [f32], ld: usize) {
    const W: usize = COLUMNS_AT_ONCE;
    let cols = b.cols;
    let whole = cols - cols % W;
    for j in (0..whole).step_by(W) {
        transpose_rows::<W>(&std::array::from_fn(|r| b.col(j + r)), &mut out[j..], ld);
    }
    for j in whole..cols {
        for (i, &x) in b.col(j).iter().enumerate() {
            out[i * ld + j] = x;
        }
    }
}

/// Writes `count <= L` lines, `line(i)` each `kc` long, across into `panel`: element `(i, p)`
/// at `panel[p*L + i]`, lines `count..L` zero (rows of A into an A panel, columns of B into a B
/// panel). A full panel goes through [`transpose_rows`].
fn lines_across<'a, const L: usize>(count: usize, line: impl Fn(usize) -> &'a [f32], panel: &mut [f32]) {
    if count == L {
        transpose_rows::<L>(&std::array::from_fn(&line), panel, L);
    } else {
        panel.fill(0.0);
        for i in 0..count {
            for (p, &x) in line(i).iter().enumerate() {
                panel[p * L + i] = x;
            }
        }
    }
}

/// Writes the `MR` lines `src` (each `kc` long) across into `panel`, its rows `stride` apart
/// (`stride >= MR`; the values between them are left as they were): element `(r, p)` at
/// `panel[p*stride + r]`. Register transposes move the bulk ([`avx512`] 16 steps at a time where
/// the CPU has it and its stores fit ([`avx512::fits`]), then [`sse`] 4 at a time); single values
/// the rest.
fn transpose_rows<const MR: usize>(src: &[&[f32]; MR], panel: &mut [f32], stride: usize) {
    let kc = src[0].len();
    let mut p = 0;
    #[cfg(target_arch = "x86_64")]
    {
        if avx512::fits(MR, stride) && Avx512::detected() {
            // SAFETY: the CPU has AVX-512F.
            p = unsafe { avx512::transpose_rows(src, panel, stride) };
        }
        p = sse::transpose_rows(src, panel, stride, p);
    }
    for p in p..kc {
        for r in 0..MR {
            panel[p * stride + r] = src[r][p];
        }
    }
}

/// Four rows at a time as 4 x 4 blocks: four 16-byte loads along the rows, a register
/// transpose, four 16-byte stores along the panel (about 3x faster here than gathering one
/// column at a time, which is one scalar load per element).
#[cfg(target_arch = "x86_64")]
mod sse {
    use std::arch::x86_64::*;

    /// [`transpose_rows`](super::transpose_rows) of steps `from..` in blocks of 4; returns the
    /// first step not written.
    pub fn transpose_rows<const MR: usize>(
        src: &[&[f32]; MR],
        panel: &mut [f32],
        stride: usize,
        from: usize,
    ) -> usize {
        let kc = src[0].len();
        let mut p = from;
        while p + 4 <= kc {
            for g in (0..MR - MR % 4).step_by(4) {
                let block: [&[f32]; 4] = std::array::from_fn(|i| &src[g + i][p..p + 4]);
                for (j, column) in transpose4(block).iter().enumerate() {
                    panel[(p + j) * stride + g..][..4].copy_from_slice(column);
                }
            }
            for r in MR - MR % 4..MR {
                for j in 0..4 {
                    panel[(p + j) * stride + r] = src[r][p + j];
                }
            }
            p += 4;
        }
        p
    }

    /// The 4 x 4 block whose rows are `rows` (4 values each), transposed: SSE unpacks, part of
    /// the x86-64 baseline.
    #[inline(always)]
    fn transpose4(rows: [&[f32]; 4]) -> [[f32; 4]; 4] {
        // SAFETY: each row slice holds 4 values (the loads are unaligned); SSE is in the
        // x86-64 baseline; the store writes the 64-byte local array.
        unsafe {
            let [r0, r1, r2, r3] = rows.map(|r| {
                assert!(r.len() == 4);
                _mm_loadu_ps(r.as_ptr())
            });
            let (t0, t1) = (_mm_unpacklo_ps(r0, r1), _mm_unpacklo_ps(r2, r3)); // a0 b0 a1 b1, c0 d0 c1 d1
            let (t2, t3) = (_mm_unpackhi_ps(r0, r1), _mm_unpackhi_ps(r2, r3)); // a2 b2 a3 b3, c2 d2 c3 d3
            let columns =
                [_mm_movelh_ps(t0, t1), _mm_movehl_ps(t1, t0), _mm_movelh_ps(t2, t3), _mm_movehl_ps(t3, t2)];
            let mut out = [[0.0f32; 4]; 4];
            for (o, c) in out.iter_mut().zip(columns) {
                _mm_storeu_ps(o.as_mut_ptr(), c);
            }
            out
        }
    }
}

/// The packing's AVX-512 code: [`rows_across`](avx512::rows_across) compiled for it, and the
/// transpose of `MR` rows by 16 steps at a time: `MR` 64-byte loads along the rows, `4 * MR`
/// shuffles in registers, `MR` 64-byte stores of the panel's `16 * MR` consecutive values. Per
/// value that is a quarter of [`sse`]'s loads and stores and half its shuffles (each a 64-byte
/// one).
///
/// A 64-byte register is four 16-byte lanes. The first stage transposes each group of 4 rows
/// within the lanes, as [`sse`] does in one: vector `v[G*j + g]` (`G = MR / 4` groups) holds in
/// lane `l` rows `4g .. 4g+4` at step `4l + j`. In the panel those 4-value pieces lie in the order
/// of `(l, j, g)`, so 16-byte piece `4s + t` of output vector `G*l + s` is lane `l` of `v[4s + t]`:
/// the second stage transposes the four vectors `v[4s .. 4s+4]` by lanes.
#[cfg(target_arch = "x86_64")]
mod avx512 {
    use std::arch::x86_64::*;

    use super::super::simd::{Avx512, Simd};

    /// Whether [`transpose_rows`] takes `mr` lines into rows `stride` apart: `mr` a multiple of
    /// 4, and each 16-value store within one row (rows of a multiple of 16, or packed back to
    /// back).
    pub const fn fits(mr: usize, stride: usize) -> bool {
        mr.is_multiple_of(4) && (mr.is_multiple_of(16) || stride == mr)
    }

    /// [`transpose_rows`](super::transpose_rows) of steps `0..` in blocks of 16; returns the first
    /// step not written. [`fits`]`(MR, stride)`.
    ///
    /// # Safety
    /// The CPU has AVX-512F.
    #[target_feature(enable = "avx512f")]
    pub unsafe fn transpose_rows<const MR: usize>(
        src: &[&[f32]; MR],
        panel: &mut [f32],
        stride: usize,
    ) -> usize {
        let (kc, groups) = (src[0].len(), MR / 4);
        let load = |r: usize, p: usize| {
            let row = &src[r][p..p + 16];
            // SAFETY: `row` holds the 16 values read (unaligned load); AVX-512F is enabled.
            unsafe { Avx512::load(row.as_ptr()) }
        };
        let mut p = 0;
        while p + 16 <= kc {
            let mut v = [_mm512_setzero_ps(); MR];
            for g in 0..groups {
                let [a, b, c, d] = std::array::from_fn(|i| load(4 * g + i, p));
                let (ab_lo, ab_hi) = (_mm512_unpacklo_ps(a, b), _mm512_unpackhi_ps(a, b)); // a0 b0 a1 b1, a2 b2 a3 b3
                let (cd_lo, cd_hi) = (_mm512_unpacklo_ps(c, d), _mm512_unpackhi_ps(c, d)); // c0 d0 c1 d1, c2 d2 c3 d3
                v[g] = _mm512_shuffle_ps::<0x44>(ab_lo, cd_lo); // a0 b0 c0 d0
                v[groups + g] = _mm512_shuffle_ps::<0xEE>(ab_lo, cd_lo); // a1 b1 c1 d1
                v[2 * groups + g] = _mm512_shuffle_ps::<0x44>(ab_hi, cd_hi); // a2 b2 c2 d2
                v[3 * groups + g] = _mm512_shuffle_ps::<0xEE>(ab_hi, cd_hi); // a3 b3 c3 d3
            }
            for s in 0..groups {
                let [a, b, c, d] = [v[4 * s], v[4 * s + 1], v[4 * s + 2], v[4 * s + 3]];
                // Lanes (of the operands, in order): a0 a1 b0 b1, a2 a3 b2 b3, c0 c1 d0 d1, c2 c3 d2 d3.
                let (ab01, ab23) = (_mm512_shuffle_f32x4::<0x44>(a, b), _mm512_shuffle_f32x4::<0xEE>(a, b));
                let (cd01, cd23) = (_mm512_shuffle_f32x4::<0x44>(c, d), _mm512_shuffle_f32x4::<0xEE>(c, d));
                let lanes = [
                    _mm512_shuffle_f32x4::<0x88>(ab01, cd01), // a0 b0 c0 d0
                    _mm512_shuffle_f32x4::<0xDD>(ab01, cd01), // a1 b1 c1 d1
                    _mm512_shuffle_f32x4::<0x88>(ab23, cd23), // a2 b2 c2 d2
                    _mm512_shuffle_f32x4::<0xDD>(ab23, cd23), // a3 b3 c3 d3
                ];
                for (l, lane) in lanes.into_iter().enumerate() {
                    // The 16 values from value `16 (G l + s)` of the block's `16 x MR`.
                    let at = 16 * (groups * l + s);
                    let dst = &mut panel[(p + at / MR) * stride + at % MR..][..16];
                    // SAFETY: `dst` holds the 16 values written (unaligned store).
                    unsafe { Avx512::store(dst.as_mut_ptr(), lane) };
                }
            }
            p += 16;
        }
        p
    }

    /// [`rows_across`](super::rows_across), compiled for AVX-512.
    ///
    /// # Safety
    /// The CPU has AVX-512F.
    #[target_feature(enable = "avx512f")]
    pub unsafe fn rows_across<'a, const NR: usize>(
        row: impl Fn(usize) -> &'a [f32],
        kc: usize,
        ahead: usize,
        stride: usize,
        out: &mut [f32],
    ) {
        super::rows_across::<NR>(row, kc, ahead, stride, out)
    }
}

/// Values from the start of one packed panel of `B` to the start of the next: the panel's
/// `kc * nr`, then a gap of [`B_PANEL_GAP`].
pub fn b_panel_stride(kc: usize, nr: usize) -> usize {
    kc * nr + B_PANEL_GAP
}

/// The panels of `kc x nr` values in `packed`, as [`pack_b`] lays them out (every
/// [`b_panel_stride`] values; a trailing partial stride is not a panel).
pub fn b_panels(packed: &[f32], kc: usize, nr: usize) -> impl Iterator<Item = &[f32]> {
    packed.chunks_exact(b_panel_stride(kc, nr)).map(move |panel| &panel[..kc * nr])
}

/// Unused values after each packed panel of `B`: two cache lines. Without them the panels lie
/// `kc * NR * 4` bytes apart (64 KB at `kc = 512`), a multiple of 4 KB, so the `NR` values that
/// [`pack_b`] writes to each panel from one row of `B` all fall in the same sets of the 8-way L1,
/// one line per panel, and evict each other.
pub const B_PANEL_GAP: usize = 32;

/// Packs panels `first_panel ..` of `B[rows, cols]` (a block of `kc x nc`) into `out`, as many
/// as it holds, [`b_panel_stride`] apart: panel `q` holds columns `cols.start + q*NR ..`, element
/// `(p, j)` at `panel[p*NR + j]`, columns past the block zero.
///
/// A row-major `B` is read row by row across all the panels at once, in address order. Packing
/// one panel at a time instead reads `NR` values (two cache lines) from every row, one row a
/// page apart at n >= 1024: the hardware prefetchers stop at page boundaries, so every line was
/// a demand miss, and that pass took 3-4% of a single-threaded n = 2048 product. Runs shorter
/// than [`SHORT_RUN_BYTES`] are asked for [`ROWS_AHEAD`] rows before they are copied.
pub fn pack_b<const NR: usize>(
    b: &MatRef,
    rows: Range<usize>,
    cols: Range<usize>,
    first_panel: usize,
    out: &mut [f32],
) {
    let (kc, first) = (rows.len(), cols.start + first_panel * NR);
    let stride = b_panel_stride(kc, NR);
    let cols = first..cols.end.min(first + out.len().div_ceil(stride) * NR);
    match b.layout {
        Layout::RowMajor => {
            let ahead = if cols.len() * size_of::<f32>() < SHORT_RUN_BYTES { ROWS_AHEAD } else { 0 };
            let row = |p: usize| &b.row(rows.start + p)[cols.clone()];
            #[cfg(target_arch = "x86_64")]
            if Avx512::detected() {
                // SAFETY: the CPU has AVX-512F.
                return unsafe { avx512::rows_across::<NR>(row, kc, ahead, stride, out) };
            }
            rows_across::<NR>(row, kc, ahead, stride, out);
        }
        // Columns of B are contiguous (B is a transposed row-major matrix): a full panel is NR
        // columns transposed into rows, as A's rows are transposed into its panels.
        Layout::ColMajor => {
            for (q, panel) in out.chunks_mut(stride).enumerate() {
                let first = cols.start + q * NR;
                let width = NR.min(cols.end - first);
                lines_across::<NR>(width, |j| &b.col(first + j)[rows.clone()], &mut panel[..kc * NR]);
            }
        }
    }
}

/// The length in bytes below which [`pack_b`] asks for a run of a row of `B` in a block
/// [`ROWS_AHEAD`] rows before it copies it, and from which it leaves the run to the hardware:
/// the 4 KB within which x86 stream prefetchers follow a run, after its first few lines. A
/// shorter run (a thread's strip or share of a block's columns on several threads) is mostly
/// demand misses, each row a new start; a longer one they follow.
const SHORT_RUN_BYTES: usize = 4096;

/// How many rows ahead of the one it copies [`pack_b`] asks for a short run of `B` (into L2).
const ROWS_AHEAD: usize = 2;

/// Copies the rows of a row-major block of `B` across its panels, [`pack_b`]'s row-major case:
/// `NR` values of each row `row(p)`, `p < kc`, to each panel, `stride` apart; with `ahead > 0`,
/// the lines of row `p + ahead` are asked for (into L2) before row `p` is copied. Compiled once
/// for the x86-64 baseline and once for AVX-512 ([`avx512::rows_across`]), where each
/// `NR`-value copy is `NR / 16` 64-byte loads and stores instead of `NR / 4` 16-byte ones.
#[inline(always)]
fn rows_across<'a, const NR: usize>(
    row: impl Fn(usize) -> &'a [f32],
    kc: usize,
    ahead: usize,
    stride: usize,
    out: &mut [f32],
) {
    for p in 0..kc {
        if ahead > 0 && p + ahead < kc {
            let next = row(p + ahead);
            for line in line_offsets(next.len()) {
                prefetch_l2(next.as_ptr().wrapping_add(line));
            }
        }
        let row = row(p);
        let (chunks, rest) = row.as_chunks::<NR>();
        for (q, chunk) in chunks.iter().enumerate() {
            out[q * stride + p * NR..][..NR].copy_from_slice(chunk);
        }
        if !rest.is_empty() {
            let dst = &mut out[chunks.len() * stride + p * NR..][..NR];
            dst[..rest.len()].copy_from_slice(rest);
            dst[rest.len()..].fill(0.0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::matrix::index;

    /// [`source_lines`] names every cache line of the panel's values, run by run, once, and only
    /// addresses of those values, whatever the alignment and layout.
    #[test]
    fn source_lines_name_each_line_of_the_panel_once() {
        let data = vec![0.0f32; 64 * 64];
        let (rows, cols) = (5..17, 3..40);
        for start in [0, 1, 7, 15] {
            for layout in [Layout::RowMajor, Layout::ColMajor] {
                let a = MatRef { data: &data[start..], rows: 45, cols: 45, ld: 47, layout };
                let address = |i: usize, j: usize| &a.data[index(layout, a.ld, i, j)] as *const f32;
                let runs: Vec<Vec<*const f32>> = match layout {
                    Layout::RowMajor => {
                        rows.clone().map(|i| cols.clone().map(|j| address(i, j)).collect()).collect()
                    }
                    Layout::ColMajor => {
                        cols.clone().map(|j| rows.clone().map(|i| address(i, j)).collect()).collect()
                    }
                };
                let line = |p: *const f32| p.addr() / 64;
                let mut want: Vec<usize> = vec![];
                for run in &runs {
                    let mut lines: Vec<usize> = run.iter().map(|&p| line(p)).collect();
                    lines.dedup();
                    want.extend(lines);
                }
                let mut got = vec![];
                source_lines(&a, rows.clone(), cols.clone(), &mut got);
                assert_eq!(got.iter().map(|&p| line(p)).collect::<Vec<_>>(), want, "{layout:?} from {start}");
                assert!(got.iter().all(|p| runs.iter().flatten().any(|q| q == p)), "{layout:?} from {start}");
            }
        }
    }

    /// Each register transpose writes what the one-value-at-a-time definition writes, at every
    /// `kc` up to past two of its blocks and at `MR` 4 to 32 (6: the SSE one's leftover rows).
    #[test]
    fn register_transposes_match_the_definition() {
        fn check<const MR: usize>() {
            for kc in 0..40 {
                let data: Vec<f32> = (0..MR * kc).map(|i| i as f32).collect();
                let src: [&[f32]; MR] = std::array::from_fn(|r| &data[r * kc..][..kc]);
                // Rows `stride` apart: the values between them stay NaN.
                for stride in [MR, MR + 3, MR + 16] {
                    let want: Vec<f32> = (0..kc * stride)
                        .map(|i| if i % stride < MR { src[i % stride][i / stride] } else { f32::NAN })
                        .collect();
                    let same =
                        |got: &[f32], want: &[f32]| got.iter().zip(want).all(|(g, w)| g.total_cmp(w).is_eq());
                    let mut got = vec![f32::NAN; kc * stride];
                    transpose_rows(&src, &mut got, stride);
                    assert!(same(&got, &want), "MR {MR} kc {kc} stride {stride}");
                    #[cfg(target_arch = "x86_64")]
                    {
                        let mut got = vec![f32::NAN; kc * stride];
                        let done = sse::transpose_rows(&src, &mut got, stride, 0);
                        assert_eq!(done, kc - kc % 4);
                        assert!(same(&got[..done * stride], &want[..done * stride]), "SSE, MR {MR} kc {kc}");
                        if avx512::fits(MR, stride) && Avx512::detected() {
                            let mut got = vec![f32::NAN; kc * stride];
                            // SAFETY: the CPU has AVX-512F.
                            let done = unsafe { avx512::transpose_rows(&src, &mut got, stride) };
                            assert_eq!(done, kc - kc % 16);
                            let (got, want) = (&got[..done * stride], &want[..done * stride]);
                            assert!(same(got, want), "AVX-512, MR {MR} kc {kc} stride {stride}");
                        }
                    }
                }
            }
        }
        check::<4>();
        check::<6>();
        check::<8>();
        check::<12>();
        check::<16>();
        check::<32>();
    }

    /// [`columns_to_rows`] writes each value of a column-major matrix at its row-major place
    /// and nothing between the rows, for widths and heights on both sides of its blocks.
    #[test]
    fn columns_to_rows_writes_the_row_major_matrix() {
        for (rows, cols, ld_a, ld) in
            [(1, 1, 1, 1), (5, 17, 7, 19), (300, 33, 301, 40), (16, 16, 16, 16), (513, 48, 520, 50)]
        {
            let data: Vec<f32> = (0..ld_a * cols).map(|i| i as f32).collect();
            let b = MatRef { data: &data, rows, cols, ld: ld_a, layout: Layout::ColMajor };
            let mut out = vec![f32::NAN; (rows - 1) * ld + cols];
            columns_to_rows(&b, &mut out, ld);
            for i in 0..rows {
                for j in 0..ld.min(out.len() - i * ld) {
                    let got = out[i * ld + j];
                    if j < cols {
                        assert_eq!(got, data[j * ld_a + i], "{rows}x{cols} at ({i}, {j})");
                    } else {
                        assert!(got.is_nan(), "{rows}x{cols}: written between rows at ({i}, {j})");
                    }
                }
            }
        }
    }
}
