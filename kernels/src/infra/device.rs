//! What every kernel needs on the device: the panic handler, thread coordinates, the dynamic
//! shared memory base and the `C` update.

use core::arch::nvptx;

use crate::infra::launch::KernelSpec;
pub(crate) use crate::infra::params::GemmParams;
use crate::infra::ptx::{
    F32x4, cp_async_wait_group, ld_global_nc_f32, ld_global_nc_v4_f32, ld_global_v2_f32, ld_global_v4_f32,
    st_global_v2_f32, st_global_v4_f32,
};

#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    // SAFETY: `trap` aborts the kernel; the host sees a launch failure.
    unsafe { nvptx::trap() }
}

/// `threadIdx.x`.
#[inline(always)]
pub fn thread_x() -> u32 {
    // SAFETY: reading a special register has no preconditions.
    unsafe { nvptx::_thread_idx_x() as u32 }
}

/// `threadIdx.y`.
#[inline(always)]
pub fn thread_y() -> u32 {
    // SAFETY: as above.
    unsafe { nvptx::_thread_idx_y() as u32 }
}

/// `blockIdx.x`.
#[inline(always)]
pub fn block_x() -> u32 {
    // SAFETY: as above.
    unsafe { nvptx::_block_idx_x() as u32 }
}

/// `blockIdx.y`.
#[inline(always)]
pub fn block_y() -> u32 {
    // SAFETY: as above.
    unsafe { nvptx::_block_idx_y() as u32 }
}

/// `gridDim.x`.
#[inline(always)]
pub fn grid_x() -> u32 {
    // SAFETY: as above.
    unsafe { nvptx::_grid_dim_x() as u32 }
}

/// `gridDim.y`.
#[inline(always)]
pub fn grid_y() -> u32 {
    // SAFETY: as above.
    unsafe { nvptx::_grid_dim_y() as u32 }
}

/// `blockIdx.z`.
#[inline(always)]
pub fn block_z() -> u32 {
    // SAFETY: as above.
    unsafe { nvptx::_block_idx_z() as u32 }
}

/// `gridDim.z`.
#[inline(always)]
pub fn grid_z() -> u32 {
    // SAFETY: as above.
    unsafe { nvptx::_grid_dim_z() as u32 }
}

/// `bar.sync 0`: waits for every thread of the block and orders their shared-memory accesses.
///
/// Every thread of the block must reach the same barrier (never call it under a condition
/// that differs between threads).
#[inline(always)]
pub fn sync_threads() {
    // SAFETY: the caller keeps the barrier uniform across the block (see above).
    unsafe { nvptx::_syncthreads() }
}

/// `barrier.sync 0`: [`sync_threads`] in its unaligned form, for a block whose warps wait at
/// different barrier instructions (warp-uniform branches that each wait once per phase of the
/// barrier); `bar.sync` is the aligned form, which requires every thread at the same one.
///
/// Every warp of the block must wait once per phase, at whichever of its barriers.
#[inline(always)]
pub fn sync_threads_unaligned() {
    // SAFETY: the caller has every warp wait once per phase (see above).
    unsafe { core::arch::asm!("barrier.sync 0;", options(nostack)) }
}

/// The base of the block's dynamic shared memory (sized by the launch), 16-byte aligned.
#[inline(always)]
pub fn dynamic_shared_f32() -> *mut f32 {
    core::intrinsics::gpu::gpu_launch_sized_workgroup_mem::<F32x4>().cast::<f32>()
}

/// The byte offset of the stage after `stage` in a ring of `STAGES` shared-memory stages of
/// `STAGE` bytes: the buffers a `cp.async` pipeline cycles through.
#[inline(always)]
pub fn next_stage<const STAGES: u32, const STAGE: u32>(stage: u32) -> u32 {
    if stage + STAGE == STAGES * STAGE { 0 } else { stage + STAGE }
}

/// A `cp.async` pipeline's prologue: `copy_tile(stage, k0)` for its first `STAGES - 1` tiles of
/// `BK` along `K`, one stage each (past the end of `K` the copies' guards zero-fill and read no
/// memory). Returns the stage the next tile goes to.
#[inline(always)]
pub fn start_pipeline<const STAGES: u32, const STAGE: u32, const BK: u32>(
    mut copy_tile: impl FnMut(u32, u32),
) -> u32 {
    let mut stage = 0;
    for s in 0..STAGES - 1 {
        copy_tile(stage, s * BK);
        stage = next_stage::<STAGES, STAGE>(stage);
    }
    stage
}

/// A whole `cp.async` pipeline over `k` in tiles of `BK`, in a ring of `STAGES` stages of `STAGE`
/// bytes: the prologue ([`start_pipeline`]), then for each tile its copies waited for (at most
/// `PENDING = STAGES - 2` newer groups left in flight) and one barrier, which publishes the
/// tile and proves every thread done with the tile before it, whose stage the copies of the
/// tile `STAGES - 1` ahead then overwrite (`copy_tile(stage, k0)`, one commit group a call);
/// then `compute(stage)` on the tile's stage. At the end the copies still in flight (zero-filled,
/// past `K`) are drained; no barrier follows.
///
/// # Safety
/// Every thread of the block calls it together (it passes barriers); `copy_tile` commits
/// exactly one `cp.async` group per call and writes only the stage it is given.
#[inline(always)]
pub unsafe fn run_pipeline<const STAGES: u32, const STAGE: u32, const BK: u32, const PENDING: u32>(
    k: u32,
    mut copy_tile: impl FnMut(u32, u32),
    mut compute: impl FnMut(u32),
) {
    const {
        assert!(
            PENDING + 2 == STAGES,
            "a tile's group is complete when at most STAGES - 2 newer ones are pending"
        )
    };
    let mut write_stage = start_pipeline::<STAGES, STAGE, BK>(&mut copy_tile);
    let mut read_stage = 0;
    let mut k_next = (STAGES - 1) * BK;
    for _ in 0..k.div_ceil(BK) {
        // SAFETY: waiting has no preconditions; the barrier publishes the copies (the caller's
        // contract: the whole block is here).
        unsafe { cp_async_wait_group::<PENDING>() };
        sync_threads();
        copy_tile(write_stage, k_next);
        write_stage = next_stage::<STAGES, STAGE>(write_stage);
        k_next += BK;
        compute(read_stage);
        read_stage = next_stage::<STAGES, STAGE>(read_stage);
    }
    // SAFETY: as above.
    unsafe { cp_async_wait_group::<0>() };
}

/// `a * b + c` rounded once (`fma.rn.f32`).
#[inline(always)]
pub fn fma(a: f32, b: f32, c: f32) -> f32 {
    core::intrinsics::fmaf32(a, b, c)
}

/// Writes `alpha * acc + beta * C[i]` to `C[i]`; `C` is not read when `beta == 0`, so NaN or
/// Inf left in an output buffer never propagates.
///
/// # Safety
/// `c` must be a valid global address of an element of the output block.
#[inline(always)]
pub unsafe fn update_c(c: *mut f32, alpha: f32, acc: f32, beta: f32) {
    // The arithmetic of `write_c`, written out: through `read_c` and `write_c` the one-output
    // form made ptxas spill in sm_80's `tensor_core` (36 bytes), whose epilogue calls it.
    unsafe {
        *c = if beta == 0.0 { alpha * acc } else { fma(beta, *c, alpha * acc) };
    }
}

/// What an update of the `W` adjacent outputs from `ptr` reads: their values in `C`, or zeros
/// when `beta == 0` (`C` not read). `WIDE`: one `4 W`-byte load (`W` of 2 or 4), else `W`
/// 4-byte loads.
///
/// An epilogue that updates many outputs reads all of them with this before it writes any with
/// [`write_c`] ([`update_c_runs`]): a read of `C` that follows a write to `C` cannot be moved
/// above it (nothing tells the compiler the two elements differ), so updating outputs one after
/// another waits for memory once per output instead of once.
///
/// # Safety
/// The `W` outputs are inside `C`; with `WIDE`, `ptr` is `4 W`-byte aligned.
#[inline(always)]
pub unsafe fn read_c<const W: usize, const WIDE: bool>(ptr: *const f32, beta: f32) -> [f32; W] {
    const { assert!(!WIDE || W == 2 || W == 4, "wide accesses are of 8 or 16 bytes") };
    if beta == 0.0 {
        return [0.0; W];
    }
    // SAFETY: the contract.
    unsafe {
        match (WIDE, W) {
            (true, 4) => {
                let v = ld_global_v4_f32(ptr).0;
                core::array::from_fn(|i| v[i])
            }
            (true, 2) => {
                let v = ld_global_v2_f32(ptr);
                core::array::from_fn(|i| v[i])
            }
            _ => core::array::from_fn(|i| *ptr.add(i)),
        }
    }
}

/// Writes `alpha * x + beta * old` (`alpha * x` when `beta == 0`) to the `W` adjacent outputs
/// from `ptr`, `old` from [`read_c`]; `WIDE` as there.
///
/// # Safety
/// As [`read_c`].
#[inline(always)]
pub unsafe fn write_c<const W: usize, const WIDE: bool>(
    ptr: *mut f32,
    alpha: f32,
    x: [f32; W],
    beta: f32,
    old: [f32; W],
) {
    const { assert!(!WIDE || W == 2 || W == 4, "wide accesses are of 8 or 16 bytes") };
    let y: [f32; W] =
        core::array::from_fn(|i| if beta == 0.0 { alpha * x[i] } else { fma(beta, old[i], alpha * x[i]) });
    // SAFETY: the contract.
    unsafe {
        match (WIDE, W) {
            (true, 4) => st_global_v4_f32(ptr, F32x4(core::array::from_fn(|i| y[i]))),
            (true, 2) => st_global_v2_f32(ptr, core::array::from_fn(|i| y[i])),
            _ => {
                for (i, &v) in y.iter().enumerate() {
                    *ptr.add(i) = v;
                }
            }
        }
    }
}

/// [`update_c`] for `N` runs of `W` adjacent outputs: run `i` from `at(i)` gets `alpha * x[i] +
/// beta * C`, and is skipped where `inside(i)` is false. Every read of `C` comes before the first
/// write ([`read_c`] says why), so the thread waits for memory once for all `N`.
///
/// # Safety
/// For every `i` with `inside(i)`: run `i` lies inside `C` and is no other run's; with `WIDE`,
/// `at(i)` is `4 W`-byte aligned.
#[inline(always)]
pub unsafe fn update_c_runs<const W: usize, const WIDE: bool, const N: usize>(
    at: impl Fn(usize) -> *mut f32,
    inside: impl Fn(usize) -> bool,
    alpha: f32,
    x: &[[f32; W]; N],
    beta: f32,
) {
    // SAFETY: the contract.
    unsafe {
        let old: [[f32; W]; N] =
            core::array::from_fn(|i| if inside(i) { read_c::<W, WIDE>(at(i), beta) } else { [0.0; W] });
        for (i, (&x, &old)) in x.iter().zip(&old).enumerate() {
            if inside(i) {
                write_c::<W, WIDE>(at(i), alpha, x, beta, old);
            }
        }
    }
}

/// Whether every pair of columns `(2 i, 2 i + 1)` in a row of `C` is one 8-byte aligned pair
/// (`c` 8-byte aligned and `ldc` even), so that pairs of outputs may be read and written 8 bytes
/// at a time ([`read_c`], [`write_c`]).
#[inline(always)]
pub fn c_pairs_aligned(args: &GemmArgs) -> bool {
    args.c as usize % 8 == 0 && args.ldc % 2 == 0
}

/// Whether every row of `C` starts on a 32-byte sector (`c` 32-byte aligned, `ldc` a multiple
/// of 8), so that 8 consecutive outputs from a multiple of 8 fill one sector.
#[inline(always)]
pub fn c_rows_on_sectors(args: &GemmArgs) -> bool {
    args.c as usize % 32 == 0 && args.ldc % 8 == 0
}

/// Whether every row of `C` starts 16-byte aligned (`c` 16-byte aligned, `ldc` a multiple of
/// 4), so that runs of 4 outputs from a multiple of 4 may use 16-byte accesses.
#[inline(always)]
pub fn c_rows_aligned(args: &GemmArgs) -> bool {
    args.c as usize % 16 == 0 && args.ldc % 4 == 0
}

/// Whether every value of `xs` is finite: `x * 0` is `±0` for a finite `x` and NaN for an
/// infinite or NaN one, so one test of their sum answers for all (four sums, for FMAs in
/// flight; IEEE arithmetic keeps the compiler from folding `x * 0`).
#[inline(always)]
pub fn all_finite(xs: &[f32]) -> bool {
    let mut sums = [0.0f32; 4];
    for (i, &x) in xs.iter().enumerate() {
        sums[i % 4] = fma(x, 0.0, sums[i % 4]);
    }
    ((sums[0] + sums[1]) + (sums[2] + sums[3])).is_finite()
}

/// Loads the four floats at `ptr`, which are columns `col..col + 4` of a row that exists iff
/// `row_ok`, of a matrix with `cols` columns; zeros outside. With `VEC4` the four are one
/// predicated 16-byte load (`LDG.E.128`), else four predicated scalar loads. Either way there
/// is no branch, so the main loops stay straight-line code.
///
/// # Safety
/// Every element the guards admit must be inside the matrix and read-only for the kernel's
/// duration. With `VEC4`, `col` and `cols` are multiples of 4 (so a vector is entirely inside
/// or entirely outside) and `ptr` is 16-byte aligned.
#[inline(always)]
pub unsafe fn load4_global<const VEC4: bool>(ptr: *const f32, row_ok: bool, col: u32, cols: u32) -> F32x4 {
    unsafe {
        if VEC4 {
            ld_global_nc_v4_f32(ptr, row_ok && col < cols)
        } else {
            let at = |i: u32| ld_global_nc_f32(ptr.wrapping_add(i as usize), row_ok && col + i < cols);
            F32x4([at(0), at(1), at(2), at(3)])
        }
    }
}

/// The `(row, col)` of the element this thread owns in a kernel with one thread per element,
/// `threadIdx.x` along a row: block `(x, y)` covers the `spec.tile` at tile row `y`, column `x`.
#[inline(always)]
pub fn element(spec: &KernelSpec) -> (u32, u32) {
    (block_y() * spec.tile.0 + thread_y(), block_x() * spec.tile.1 + thread_x())
}

/// Row `row` of `A` times column `col` of `B`, one `f32` FMA per `k` in order.
///
/// # Safety
/// `a` holds row `row` of a row-major `A` with `k` columns (`lda`), `b` column `col` of a
/// row-major `B` with `k` rows (`ldb`).
#[inline(always)]
pub unsafe fn dot(k: u32, a: *const f32, lda: u32, b: *const f32, ldb: u32, row: u32, col: u32) -> f32 {
    let mut sum = 0.0f32;
    for p in 0..k {
        // SAFETY: p < k: inside the row of A and the column of B.
        unsafe { sum = fma(*a.add(offset(row, p, lda)), *b.add(offset(p, col, ldb)), sum) };
    }
    sum
}

/// [`dot`] out of line, so that the tensor-core kernels' main loops do not carry its registers.
///
/// # Safety
/// [`dot`]'s contract.
#[inline(never)]
unsafe fn exact_dot(k: u32, a: *const f32, lda: u32, b: *const f32, ldb: u32, row: u32, col: u32) -> f32 {
    // SAFETY: the caller's contract is dot's.
    unsafe { dot(k, a, lda, b, ldb, row, col) }
}

/// The epilogue of the tensor-core kernels ([`tensor_core`](crate::ladder::tensor_core),
/// [`warpgroup`](crate::production::warpgroup)) for one output: `C[row][col] = alpha * x + beta * C`,
/// where an accumulator `x` that is not finite is first recomputed as row `row` of `A` times
/// column `col` of `B`, one `f32` FMA per `k` in order: the IEEE result, which the TF32 split
/// cannot carry (`tensor_core`'s module docs). Outputs outside `m x n` are not written.
///
/// # Safety
/// The GEMM contract (see [`gemm_entry!`]) for `args`.
#[inline(always)]
pub unsafe fn store_exact(args: &GemmArgs, row: u32, col: u32, x: f32) {
    let GemmArgs { m, n, k, alpha, a, lda, b, ldb, beta, c, ldc } = *args;
    if row < m && col < n {
        // SAFETY: row < m, col < n: inside A's rows, B's columns and C.
        unsafe {
            let x = if x.is_finite() { x } else { exact_dot(k, a, lda, b, ldb, row, col) };
            update_c(c.add(offset(row, col, ldc)), alpha, x, beta);
        }
    }
}

/// Where this block's batch member (`blockIdx.z`) of a matrix starts, by the batch convention
/// of [`params`](crate::infra::params#batches): `step` elements per member after `base`.
#[inline(always)]
pub fn member<T>(base: *mut T, step: u64) -> *mut T {
    member_z(base, step, block_z())
}

/// Where member `z` of a matrix starts: `z * step` elements after `base`.
#[inline(always)]
pub fn member_z<T>(base: *mut T, step: u64, z: u32) -> *mut T {
    base.wrapping_add(z as usize * step as usize)
}

/// `row * ld + col` in 64 bits: matrices of more than 2^32 elements index correctly.
#[inline(always)]
pub fn offset(row: u32, col: u32, ld: u32) -> usize {
    row as usize * ld as usize + col as usize
}

/// `acc += a_frag ⊗ b_frag`: the register outer product at the heart of the 2D-tiled kernels,
/// `TM * TN` multiply-adds from `TM + TN` values.
#[inline(always)]
pub fn outer_product<const TM: usize, const TN: usize>(
    acc: &mut [[f32; TN]; TM],
    a_frag: &[f32; TM],
    b_frag: &[f32; TN],
) {
    for (acc_row, &a_val) in acc.iter_mut().zip(a_frag) {
        for (acc, &b_val) in acc_row.iter_mut().zip(b_frag) {
            *acc = fma(a_val, b_val, *acc);
        }
    }
}

/// Updates the `TM x TN` block of `C` at `(row, col)` from the accumulators, skipping the
/// elements outside the `m x n` matrix.
///
/// # Safety
/// `c` is a valid row-major `m x n` matrix with leading dimension `ldc`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn update_c_block<const TM: usize, const TN: usize>(
    acc: &[[f32; TN]; TM],
    row: u32,
    col: u32,
    m: u32,
    n: u32,
    alpha: f32,
    beta: f32,
    c: *mut f32,
    ldc: u32,
) {
    for (i, acc_row) in acc.iter().enumerate() {
        let r = row + i as u32;
        let x = acc_row.map(|v| [v]);
        // SAFETY: only (r, col + j) with r < m, col + j < n: inside C. Each row's reads of C
        // come before its writes (`read_c`).
        unsafe {
            let at = |j: usize| c.wrapping_add(offset(r, col + j as u32, ldc));
            update_c_runs::<1, false, TN>(at, |j| r < m && col + (j as u32) < n, alpha, &x, beta);
        }
    }
}

/// One product of a GEMM launch as a kernel body sees it: this block's batch member of the
/// [`GemmParams`], with raw pointers.
#[derive(Clone, Copy, Debug)]
#[allow(missing_docs)]
pub struct GemmArgs {
    pub m: u32,
    pub n: u32,
    pub k: u32,
    pub alpha: f32,
    pub a: *const f32,
    pub lda: u32,
    pub b: *const f32,
    pub ldb: u32,
    pub beta: f32,
    pub c: *mut f32,
    pub ldc: u32,
}

impl GemmParams<*const f32, *mut f32> {
    /// This block's member of the batch (`blockIdx.z`).
    #[inline(always)]
    pub fn member(self) -> GemmArgs {
        self.member_at(block_z())
    }

    /// Member `z` of the batch: each matrix `z` steps after the one its parameter points to.
    #[inline(always)]
    pub fn member_at(self, z: u32) -> GemmArgs {
        let Self { m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, a_step, b_step, c_step, .. } = self;
        GemmArgs {
            m,
            n,
            k,
            alpha,
            a: member_z(a.cast_mut(), a_step, z).cast_const(),
            lda,
            b: member_z(b.cast_mut(), b_step, z).cast_const(),
            ldb,
            beta,
            c: member_z(c, c_step, z),
            ldc,
        }
    }

    /// How many members of the batch this block computes, in turn: `blockIdx.z`,
    /// `blockIdx.z + gridDim.z`, ... below `members` (see [Batches](crate::infra::params#batches)).
    #[inline(always)]
    pub fn members_of_block(&self) -> u32 {
        // (`max`: a divisor the compiler knows is not 0, so no panic path.)
        self.members.saturating_sub(block_z()).div_ceil(grid_z().max(1))
    }

    /// The `j`-th member this block computes ([`members_of_block`](Self::members_of_block)).
    #[inline(always)]
    pub fn member_of_block(self, j: u32) -> GemmArgs {
        self.member_at(block_z() + j * grid_z())
    }
}

/// The first step of every production GEMM entry, of the copies (`transpose`, `pad`) and of
/// the split-K reduction: on sm_90, waits until the kernels queued before this one on its stream have completed and their
/// writes are visible (`griddepcontrol.wait`), so that the host may launch the entry as a
/// programmatic dependent of the copies queued before it (`gpu::dependent_launch` on the host);
/// at once when it was launched as usual, and nothing on older architectures, which have no
/// such launch.
#[inline(always)]
pub fn wait_for_earlier_kernels() {
    #[cfg(target_feature = "sm_90a")]
    crate::infra::ptx::griddepcontrol_wait();
}

/// Declares a PTX entry point with the GEMM parameter list ([`GemmParams`]) that calls
/// `$body(GemmArgs)` with the block's batch member, or, in the `production members:` form,
/// `$body(GemmParams)` for a body that takes several members per block.
///
/// The entry's safety contract is its body's, for every member of the batch (`members` of
/// them): valid row-major `A` (`m x k`, `lda >= k`), `B` (`k x n`, `ldb >= n`) and `C`
/// (`m x n`, `ldc >= n`) in device memory, no `C` overlapping another member's `C` or any
/// `A` or `B`, launched with the kernel's `SPEC` (block, grid, dynamic shared memory).
macro_rules! gemm_entry {
    // The group decides which PTX module holds the entry (`KernelSpec::module`): the production
    // module is built without the crate feature `ladder`, the ladder's with it.
    // Production entries wait for the kernels queued before them first
    // (`wait_for_earlier_kernels`): the host may launch them as programmatic dependents.
    (production: $($entry:tt)*) => {
        $crate::infra::device::gemm_entry!(@cfg [not(feature = "ladder")] [.member()]
            [$crate::infra::device::wait_for_earlier_kernels();] $($entry)*);
    };
    (ladder: $($entry:tt)*) => {
        $crate::infra::device::gemm_entry!(@cfg [feature = "ladder"] [.member()] [] $($entry)*);
    };
    // A production kernel that computes several members per block: `$body` takes the
    // parameters themselves (`GemmParams::member_of_block`).
    (production members: $($entry:tt)*) => {
        $crate::infra::device::gemm_entry!(@cfg [not(feature = "ladder")] []
            [$crate::infra::device::wait_for_earlier_kernels();] $($entry)*);
    };
    (@cfg [$cfg:meta] [$($member:tt)*] [$($first:tt)*] $(#[$attr:meta])* $name:ident => $body:expr) => {
        $crate::infra::params::gemm_params_entry! {
            $(#[$attr])*
            ///
            /// # Safety
            /// See [`gemm_entry!`](crate::infra::device): valid `A`, `B`, `C` for the given shapes
            /// and leading dimensions in every member of the batch, each `C` apart from every
            /// other matrix, launched with this module's `SPEC`.
            #[cfg($cfg)]
            $name => (#[inline(always)] |params: $crate::infra::params::GemmParams<*const f32, *mut f32>| {
                $($first)*
                $body(params $($member)*)
            })
        }
    };
}
pub(crate) use gemm_entry;
