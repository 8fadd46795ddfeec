//! Batches of products in one call, `C_i = alpha * op(A_i) * op(B_i) + beta * C_i` for
//! `i < batch`, in the two forms BLAS libraries offer:
//! - *strided* ([`Strided`]): each operand is one buffer holding its members `stride` elements
//!   apart, all of one shape, layout and leading dimension (cuBLAS's `SgemmStridedBatched`,
//!   MKL's `sgemm_batch_strided`); a stride of 0 gives every product the same matrix;
//! - *a list of views* of equal shape (cuBLAS's pointer-array `SgemmBatched`): `&[MatRef]`,
//!   `&mut [MatMut]`, on the device `&[DeviceMatRef]`, `&mut [DeviceMatMut]`.
//!
//! Each product has the single product's semantics and checks (quick returns, `C` not read
//! when `beta == 0`, nothing outside each `C`'s block written). Beyond them, a batch is
//! checked here: every member of every operand inside its buffer, and no element of one
//! member of `C` shared with another (members of `A` and `B` may overlap freely).

use crate::matrix::{Layout, MatMut, MatRef, Operand, check_ld, check_shapes};
use crate::semantics::View;
use crate::{Error, Result};

/// A batch of matrices of one shape in one buffer: `matrix` is the first member, viewing the
/// buffer from the member's first element to its end, and member `i` is the same view
/// `i * stride` elements further on. `stride == 0` repeats one matrix (an operand broadcast to
/// every product; not allowed for `C`, whose members would overlap).
///
/// ```
/// use sgemm::{MatRef, Strided};
///
/// let data = vec![0.0f32; 3 * 4 * 5]; // three 4x5 matrices back to back
/// let a = Strided::new(MatRef::contiguous(&data, 4, 5), 20);
/// let a_t = a.t(); // the same three matrices, each transposed (5x4)
/// assert_eq!((a_t.matrix.rows, a_t.stride), (5, 20));
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Strided<M> {
    /// The first member, over the buffer from its first element on.
    pub matrix: M,
    /// Elements from one member's first element to the next one's.
    pub stride: usize,
}

impl<M> Strided<M> {
    /// `matrix` and the members that follow it every `stride` elements.
    pub fn new(matrix: M, stride: usize) -> Self {
        Self { matrix, stride }
    }
}

impl<'a> Strided<MatRef<'a>> {
    /// Every member transposed, as views (pass `a.t()` for `op(A_i) = A_i^T`).
    pub fn t(self) -> Self {
        Self { matrix: self.matrix.t(), ..self }
    }
}

impl<'a> Strided<MatMut<'a>> {
    /// Every member transposed, as views.
    pub fn t(self) -> Self {
        Self { matrix: self.matrix.t(), ..self }
    }
}

impl<M: View> View for Strided<M> {
    fn layout(&self) -> Layout {
        self.matrix.layout()
    }

    fn t(self) -> Self {
        Self { matrix: self.matrix.t(), ..self }
    }

    fn dims(&self) -> (usize, usize, usize) {
        self.matrix.dims()
    }

    fn described_as(self, layout: Layout, ld: usize) -> Self {
        Self { matrix: self.matrix.described_as(layout, ld), ..self }
    }
}

/// The shape of one operand's members, as the checks see it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Members {
    pub layout: Layout,
    pub rows: usize,
    pub cols: usize,
    pub ld: usize,
    /// The buffer's length from the first member on.
    pub len: usize,
    pub stride: usize,
}

impl Members {
    pub(crate) fn of(m: &MatRef, stride: usize) -> Self {
        Self { layout: m.layout, rows: m.rows, cols: m.cols, ld: m.ld, len: m.data.len(), stride }
    }

    /// Elements one member spans (0 when it is empty).
    fn span(&self) -> usize {
        crate::matrix::span(self.layout, self.rows, self.cols, self.ld)
    }

    /// Elements `batch` members span: `(batch - 1) * stride + span`, or `None` past `usize`.
    pub(crate) fn batch_span(&self, batch: usize) -> Option<usize> {
        match self.span() {
            0 => Some(0),
            span => (batch.checked_sub(1)?).checked_mul(self.stride)?.checked_add(span),
        }
    }
}

/// Checks a strided batch in the reference BLAS order (the shapes, then `lda`, `ldb`, `ldc`,
/// then that each buffer holds all its members), then that no two members of `C` share an
/// element. Nothing to check about the members when `batch == 0`.
pub(crate) fn check_strided(batch: usize, a: Members, b: Members, c: Members) -> Result<()> {
    use crate::matrix::{A, B, C};
    check_shapes((a.rows, a.cols), (b.rows, b.cols), (c.rows, c.cols))?;
    // Operand by operand, as in `check_gemm`.
    check_ld(A, a.layout, a.rows, a.cols, a.ld)?;
    check_ld(B, b.layout, b.rows, b.cols, b.ld)?;
    check_ld(C, c.layout, c.rows, c.cols, c.ld)?;
    if batch == 0 {
        return Ok(());
    }
    check_batch_len(A, &a, batch)?;
    check_batch_len(B, &b, batch)?;
    check_batch_len(C, &c, batch)?;
    if let Some((first, second)) = overlapping_members(&c, batch) {
        return Err(Error::OverlappingOutputs { stride: c.stride, first, second });
    }
    Ok(())
}

/// Checks that an operand's buffer holds all `batch` of its members.
fn check_batch_len(op: Operand, x: &Members, batch: usize) -> Result<()> {
    let needed = x.batch_span(batch).unwrap_or(usize::MAX);
    if x.len < needed {
        return Err(Error::SliceTooShort {
            position: op.array_position,
            matrix: op.matrix,
            needed,
            len: x.len,
        });
    }
    Ok(())
}

/// Two members (`first < second`) of a strided batch that share an element, if any.
///
/// Element `(line l, position p)` of member `z` (lines are rows when row-major, columns when
/// column-major; `p < inner`, `l < outer`) is at `z * stride + l * ld + p`. Members `z` and
/// `z + d` share one exactly when `d * stride = dl * ld + dp` for some `|dl| < outer` and
/// `|dp| < inner`; as `ld >= inner`, only `dl = floor(d * stride / ld)` and the line after it
/// can do. Members `span` or more elements apart cannot share one, so `d` runs from 1 until
/// `d * stride` reaches the span: at most `batch - 1` steps, and none when the members are
/// apart (`stride >= span`).
pub(crate) fn overlapping_members(x: &Members, batch: usize) -> Option<(usize, usize)> {
    let span = x.span();
    if span == 0 || batch < 2 {
        return None;
    }
    if x.stride == 0 {
        return Some((0, 1));
    }
    let (inner, outer) = x.layout.extents(x.rows, x.cols);
    for d in 1..batch {
        let Some(offset) = d.checked_mul(x.stride).filter(|&o| o < span) else { break };
        let (dl, dp) = (offset / x.ld, offset % x.ld);
        let same_line = dl < outer && dp < inner;
        let next_line = dl + 1 < outer && x.ld - dp < inner;
        if same_line || next_line {
            return Some((0, d));
        }
    }
    None
}

/// The common shape of a list's members, or [`Error::BatchMismatch`] naming the operand and
/// the first member that differs from the first one. `ld_too`: the leading dimensions must
/// match as well (the device gathers a list with one leading dimension).
pub(crate) fn common_shape<T>(
    name: &str,
    members: &[T],
    shape: impl Fn(&T) -> (Layout, usize, usize, usize),
    ld_too: bool,
) -> Result<()> {
    let Some(first) = members.first().map(&shape) else { return Ok(()) };
    for (i, m) in members.iter().enumerate().skip(1) {
        let s = shape(m);
        let same = (s.0, s.1, s.2) == (first.0, first.1, first.2) && (!ld_too || s.3 == first.3);
        if !same {
            let what = if ld_too { "shape, layout and leading dimension" } else { "shape and layout" };
            return Err(Error::BatchMismatch(format!(
                "{name}[{i}] is {}x{} {:?} with ld {}, {name}[0] {}x{} {:?} with ld {}: a batch's members \
                 share one {what}",
                s.1, s.2, s.0, s.3, first.1, first.2, first.0, first.3
            )));
        }
    }
    Ok(())
}

/// The checks of a host list batch: equal lengths, one shape and layout per operand, each
/// member a valid single product.
pub(crate) fn check_list(a: &[MatRef], b: &[MatRef], c: &[MatMut]) -> Result<()> {
    check_counts(a.len(), b.len(), c.len())?;
    common_shape("A", a, |m| (m.layout, m.rows, m.cols, m.ld), false)?;
    common_shape("B", b, |m| (m.layout, m.rows, m.cols, m.ld), false)?;
    common_shape("C", c, |m| (m.layout, m.rows, m.cols, m.ld), false)?;
    for ((a, b), c) in a.iter().zip(b).zip(c) {
        crate::matrix::check_gemm(a, b, &c.as_ref())?;
    }
    Ok(())
}

/// Checks that the lists of a batch have one length each.
pub(crate) fn check_counts(a: usize, b: usize, c: usize) -> Result<()> {
    if a != b || a != c {
        return Err(Error::BatchMismatch(format!(
            "the lists hold {a} A, {b} B and {c} C matrices: one of each per product"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn members(layout: Layout, rows: usize, cols: usize, ld: usize, stride: usize) -> Members {
        Members { layout, rows, cols, ld, len: usize::MAX, stride }
    }

    /// The overlap test by brute force: the set of elements of each member.
    fn brute(x: Members, batch: usize) -> Option<(usize, usize)> {
        let (inner, outer) = x.layout.extents(x.rows, x.cols);
        let mut owner = std::collections::HashMap::new();
        for z in 0..batch {
            for l in 0..outer {
                for p in 0..inner {
                    if let Some(&first) = owner.get(&(z * x.stride + l * x.ld + p)) {
                        return Some((first, z));
                    }
                    owner.insert(z * x.stride + l * x.ld + p, z);
                }
            }
        }
        None
    }

    #[test]
    fn overlap_matches_brute_force() {
        for layout in [Layout::RowMajor, Layout::ColMajor] {
            for rows in 1..4 {
                for cols in 1..4 {
                    let inner = layout.extents(rows, cols).0;
                    for ld in inner..inner + 4 {
                        for stride in 0..16 {
                            for batch in 1..5 {
                                let x = members(layout, rows, cols, ld, stride);
                                let exact = overlapping_members(&x, batch).is_some();
                                assert_eq!(exact, brute(x, batch).is_some(), "{x:?} batch {batch}");
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn interleaved_members_are_apart() {
        // Four 8x16 heads side by side in an 8x64 row-major matrix.
        let x = members(Layout::RowMajor, 8, 16, 64, 16);
        assert_eq!(overlapping_members(&x, 4), None);
        assert_eq!(overlapping_members(&x, 5), Some((0, 4)));
        assert_eq!(overlapping_members(&members(Layout::RowMajor, 8, 16, 64, 0), 2), Some((0, 1)));
    }

    #[test]
    fn buffers_must_hold_every_member() {
        let x = Members { len: 2 * 20 + 19, ..members(Layout::RowMajor, 4, 5, 5, 20) };
        assert!(check_batch_len(crate::matrix::A, &x, 3).is_err());
        assert!(check_batch_len(crate::matrix::A, &Members { len: 60, ..x }, 3).is_ok());
        assert!(check_batch_len(crate::matrix::A, &Members { stride: 0, len: 20, ..x }, 1000).is_ok());
    }
}
