//! The reference BLAS's argument checks of `SGEMM`, in its order and with its numbering, and
//! the mapping of those numbers onto `cblas_sgemm`'s argument list.

/// A column-major GEMM whose arguments passed the reference checks: `C (m x n) = alpha *
/// op(A) * op(B) + beta * C`, `A` stored `lda`-strided with `op(A) = A^T` when `trans_a`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Checked {
    pub trans_a: bool,
    pub trans_b: bool,
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub lda: usize,
    pub ldb: usize,
    pub ldc: usize,
}

/// `op(X)` from BLAS's character: `Some(false)` for `N`, `Some(true)` for `T` or `C` (the
/// conjugate transpose of a real matrix), either case; `None` otherwise.
pub fn trans(c: u8) -> Option<bool> {
    match c {
        b'N' | b'n' => Some(false),
        b'T' | b't' | b'C' | b'c' => Some(true),
        _ => None,
    }
}

/// The reference `SGEMM`'s checks, in its order: `Err(info)` with the position of the first
/// bad argument in `SGEMM(TRANSA, TRANSB, M, N, K, ALPHA, A, LDA, B, LDB, BETA, C, LDC)`, as
/// the reference passes it to `XERBLA`.
#[allow(clippy::too_many_arguments)]
pub fn check(
    transa: u8,
    transb: u8,
    m: i64,
    n: i64,
    k: i64,
    lda: i64,
    ldb: i64,
    ldc: i64,
) -> Result<Checked, i32> {
    let trans_a = trans(transa).ok_or(1)?;
    let trans_b = trans(transb).ok_or(2)?;
    if m < 0 {
        return Err(3);
    }
    if n < 0 {
        return Err(4);
    }
    if k < 0 {
        return Err(5);
    }
    let rows_a = if trans_a { k } else { m };
    let rows_b = if trans_b { n } else { k };
    if lda < rows_a.max(1) {
        return Err(8);
    }
    if ldb < rows_b.max(1) {
        return Err(10);
    }
    if ldc < m.max(1) {
        return Err(13);
    }
    let size = |x: i64| usize::try_from(x).map_err(|_| 3);
    Ok(Checked {
        trans_a,
        trans_b,
        m: size(m)?,
        n: size(n)?,
        k: size(k)?,
        lda: size(lda)?,
        ldb: size(ldb)?,
        ldc: size(ldc)?,
    })
}

/// CBLAS's layouts and transposes (`cblas.h`).
pub const CBLAS_ROW_MAJOR: i32 = 101;
pub const CBLAS_COL_MAJOR: i32 = 102;
pub const CBLAS_NO_TRANS: i32 = 111;
pub const CBLAS_TRANS: i32 = 112;
pub const CBLAS_CONJ_TRANS: i32 = 113;

/// The `SGEMM` character of a CBLAS transpose, `None` for a value CBLAS does not define.
pub fn cblas_trans(t: i32) -> Option<u8> {
    match t {
        CBLAS_NO_TRANS => Some(b'N'),
        CBLAS_TRANS => Some(b'T'),
        CBLAS_CONJ_TRANS => Some(b'C'),
        _ => None,
    }
}

/// The position in `cblas_sgemm(layout, transa, transb, m, n, k, alpha, a, lda, b, ldb, beta,
/// c, ldc)` of the argument behind `SGEMM`'s `info`, as the caller passed it. A row-major call
/// runs as the column-major `C^T = op(B)^T op(A)^T`, so `SGEMM`'s `M`, `LDA` are CBLAS's `n`,
/// `ldb` and the other way round.
pub fn cblas_position(row_major: bool, info: i32) -> i32 {
    match (row_major, info) {
        (true, 3) => 5,  // SGEMM's M is CBLAS's n
        (true, 4) => 4,  // N is m
        (true, 8) => 11, // LDA is ldb
        (true, 10) => 9, // LDB is lda
        (_, info) => info + 1,
    }
}

/// The position the reference CBLAS reports to `cblas_xerbla` for a bad argument of a
/// row-major `cblas_sgemm` at `position` in the caller's list: its place in the column-major
/// call the reference makes (`m` and `n`, `lda` and `ldb` swapped; the others stay). The
/// reference's handler maps it back, told by the global `RowMajorStrg` that the call was
/// row-major. (The map is its own inverse.)
pub fn column_major_call_position(position: i32) -> i32 {
    match position {
        4 => 5,
        5 => 4,
        9 => 11,
        11 => 9,
        p => p,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checks_come_in_the_reference_order() {
        let ok = Checked { trans_a: false, trans_b: true, m: 2, n: 3, k: 4, lda: 2, ldb: 3, ldc: 2 };
        assert_eq!(check(b'n', b'T', 2, 3, 4, 2, 3, 2), Ok(ok));
        assert_eq!(check(b'X', b'Y', -1, -1, -1, 0, 0, 0), Err(1));
        assert_eq!(check(b'N', b'Y', -1, -1, -1, 0, 0, 0), Err(2));
        assert_eq!(check(b'N', b'N', -1, -1, -1, 0, 0, 0), Err(3));
        assert_eq!(check(b'N', b'N', 1, -1, -1, 0, 0, 0), Err(4));
        assert_eq!(check(b'N', b'N', 1, 1, -1, 0, 0, 0), Err(5));
        assert_eq!(check(b'N', b'N', 5, 1, 1, 4, 0, 0), Err(8));
        assert_eq!(check(b'T', b'N', 5, 1, 3, 2, 0, 0), Err(8)); // A is k x m: lda >= k
        assert_eq!(check(b'N', b'N', 5, 1, 3, 5, 2, 0), Err(10));
        assert_eq!(check(b'N', b'T', 5, 4, 3, 5, 3, 0), Err(10)); // B is n x k: ldb >= n
        assert_eq!(check(b'N', b'N', 5, 1, 3, 5, 3, 4), Err(13));
        // Empty matrices still need leading dimensions of at least 1.
        assert_eq!(check(b'N', b'N', 0, 0, 0, 0, 1, 1), Err(8));
        assert!(check(b'N', b'N', 0, 0, 0, 1, 1, 1).is_ok());
    }

    #[test]
    fn cblas_numbers_follow_the_reference_cblas() {
        // Column-major: one more than SGEMM's, for the layout argument in front.
        assert_eq!([3, 4, 5, 8, 10, 13].map(|i| cblas_position(false, i)), [4, 5, 6, 9, 11, 14]);
        // Row-major: the arguments named as the caller passed them.
        assert_eq!([3, 4, 5, 8, 10, 13].map(|i| cblas_position(true, i)), [5, 4, 6, 11, 9, 14]);
        // What the reference reports for a row-major call: SGEMM's info plus one.
        assert_eq!(
            [3, 4, 5, 8, 10, 13].map(|i| column_major_call_position(cblas_position(true, i))),
            [4, 5, 6, 9, 11, 14]
        );
    }
}
