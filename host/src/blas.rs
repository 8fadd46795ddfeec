//! The reference BLAS calling convention: `sgemm(transa, transb, m, n, k, alpha, a, lda, b,
//! ldb, beta, c, ldc)` on plain slices, with a layout in front as CBLAS has it.
//!
//! For code ported from C or Fortran: the arguments mean what they mean in BLAS, are checked in
//! BLAS's order, and a bad one is the error BLAS's `xerbla` would report, naming the argument
//! and its position (`transa` 1, `transb` 2, `m` 3, `n` 4, `k` 5, `lda` 8, `ldb` 10, `ldc`
//! 13), never a panic or an exit. Beyond BLAS, each slice is checked to hold its matrix
//! (`a` 7, `b` 9, `c` 12). New Rust code may prefer [`Engine::gemm`] with views, where a
//! transpose is `a.t()`.

use crate::matrix::{self, Layout, MatMut, MatRef, Operand, check_ld, check_len, stored_shape};
use crate::{Engine, Error, Result};

/// `op(X)` as BLAS spells it: `'N'` (or `'n'`) for `X`, `'T'`, `'t'`, `'C'` or `'c'` for `X^T`
/// (the conjugate transpose of a real matrix is its transpose).
fn parse_trans(c: u8, position: u8, name: &'static str) -> Result<bool> {
    match c {
        b'N' | b'n' => Ok(false),
        b'T' | b't' | b'C' | b'c' => Ok(true),
        _ => Err(Error::InvalidArgument {
            position,
            name,
            reason: format!("{:?} is not one of 'N', 'T', 'C'", c as char),
        }),
    }
}

/// A dimension, which BLAS declares signed: negative is argument `position`'s error.
fn dim(x: isize, position: u8, name: &'static str) -> Result<usize> {
    usize::try_from(x).map_err(|_| Error::InvalidArgument {
        position,
        name,
        reason: format!("{x} is negative"),
    })
}

/// A stored operand: its shape as stored (`rows x cols`, before `op`), checked leading
/// dimension.
fn stored_ld(op: Operand, layout: Layout, rows: usize, cols: usize, ld: isize) -> Result<usize> {
    let ld = dim(ld, op.ld_position, op.ld_name)?;
    check_ld(op, layout, rows, cols, ld)?;
    Ok(ld)
}

impl Engine {
    /// `C = alpha * op(A) * op(B) + beta * C` with BLAS's arguments: `op(A)` is `m x k`,
    /// `op(B)` is `k x n`, `C` is `m x n`, all stored in `layout` (the reference BLAS is
    /// [`Layout::ColMajor`]; CBLAS's `CblasRowMajor` is [`Layout::RowMajor`]) with leading
    /// dimensions `lda`, `ldb`, `ldc`. Runs on this engine's backend with its automatic kernel.
    ///
    /// ```
    /// use sgemm::{Backend, Engine, Layout};
    ///
    /// let engine = Engine::new(Backend::Cpu)?;
    /// // Column-major, as Fortran BLAS: C (2x2) = A^T (2x3) * B (3x2), A stored 3x2.
    /// let a = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]; // columns (1, 2, 3) and (4, 5, 6)
    /// let b = [1.0, 0.0, 0.0, 0.0, 1.0, 0.0];
    /// let mut c = [0.0; 4];
    /// engine.sgemm(Layout::ColMajor, b'T', b'N', 2, 2, 3, 1.0, &a, 3, &b, 3, 0.0, &mut c, 2)?;
    /// assert_eq!(c, [1.0, 4.0, 2.0, 5.0]);
    /// # Ok::<(), sgemm::Error>(())
    /// ```
    #[allow(clippy::too_many_arguments)]
    pub fn sgemm(
        &self,
        layout: Layout,
        transa: u8,
        transb: u8,
        m: isize,
        n: isize,
        k: isize,
        alpha: f32,
        a: &[f32],
        lda: isize,
        b: &[f32],
        ldb: isize,
        beta: f32,
        c: &mut [f32],
        ldc: isize,
    ) -> Result<()> {
        let trans_a = parse_trans(transa, 1, "transa")?;
        let trans_b = parse_trans(transb, 2, "transb")?;
        let (m, n, k) = (dim(m, 3, "m")?, dim(n, 4, "n")?, dim(k, 5, "k")?);
        let (ar, ac) = stored_shape(trans_a, m, k);
        let (br, bc) = stored_shape(trans_b, k, n);
        let lda = stored_ld(matrix::A, layout, ar, ac, lda)?;
        let ldb = stored_ld(matrix::B, layout, br, bc, ldb)?;
        let ldc = stored_ld(matrix::C, layout, m, n, ldc)?;
        check_len(matrix::A, a.len(), layout, ar, ac, lda)?;
        check_len(matrix::B, b.len(), layout, br, bc, ldb)?;
        check_len(matrix::C, c.len(), layout, m, n, ldc)?;
        let a = MatRef::op(a, layout, trans_a, m, k, lda);
        let b = MatRef::op(b, layout, trans_b, k, n, ldb);
        let mut c = MatMut { data: c, rows: m, cols: n, ld: ldc, layout };
        self.gemm(alpha, &a, &b, beta, &mut c)
    }
}
