//! One `#[inline(always)]` wrapper per PTX instruction the kernels need and the compiler does
//! not emit by itself (or does not emit reliably). `asm!` appears in this module only.
//!
//! Conventions:
//! - Global pointers are generic pointers to memory from `cuMemAlloc` (for which the generic
//!   and the global address coincide), passed as `*const f32`.
//! - Shared memory is addressed by a [`SharedAddr`], a 32-bit offset in the `.shared` window,
//!   made in one place ([`SharedAddr::of`]) by `cvta.to.shared`.
//! - Predicated loads take a `bool` guard: when it is false no memory is touched and the
//!   destination gets `0.0`, so an out-of-bounds element of an edge tile contributes nothing.
//!   The pointer may then be anything (compute it with `wrapping_add`).

use core::arch::asm;

/// Four `f32` in one 16-byte aligned value: the unit of `.v4` loads and stores.
#[derive(Clone, Copy, Debug, Default)]
#[repr(C, align(16))]
pub struct F32x4(pub [f32; 4]);

/// An address in the shared state space (`.shared`), as the 32-bit offset PTX expects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(transparent)]
pub struct SharedAddr(pub u32);

impl SharedAddr {
    /// `cvta.to.shared.u64` then `cvt.u32.u64`: the shared-window address of a generic pointer.
    ///
    /// # Safety
    /// `ptr` must point into this block's shared memory (for instance into the dynamic shared
    /// memory base); for any other pointer the result is meaningless.
    #[inline(always)]
    pub unsafe fn of<T>(ptr: *const T) -> Self {
        let addr: u32;
        unsafe {
            asm!(
                "{{",
                ".reg .u64 t;",
                "cvta.to.shared.u64 t, {p};",
                "cvt.u32.u64 {a}, t;",
                "}}",
                p = in(reg64) ptr,
                a = out(reg32) addr,
                options(pure, nomem, nostack),
            );
        }
        Self(addr)
    }

    /// The same address through a move the compiler neither sees through nor moves: derived
    /// from a value that is live anyway, it does not keep the value it was computed from live
    /// until its use.
    #[inline(always)]
    pub fn opaque(self) -> Self {
        let y: u32;
        // SAFETY: a register move; without `pure`, it stays where it is written.
        unsafe { asm!("mov.b32 {y}, {x};", y = out(reg32) y, x = in(reg32) self.0, options(nomem, nostack)) }
        Self(y)
    }

    /// The address `bytes` further on.
    #[inline(always)]
    pub const fn offset_bytes(self, bytes: u32) -> Self {
        Self(self.0.wrapping_add(bytes))
    }
}

/// `@p ld.global.nc.f32`: loads `*ptr` through the read-only (non-coherent) data path when
/// `guard` holds; returns `0.0` and touches no memory when it does not.
///
/// # Safety
/// When `guard` is true, `ptr` must be a valid, 4-byte aligned global address whose contents
/// no thread writes while the kernel runs (the `.nc` path does not see such writes).
#[inline(always)]
pub unsafe fn ld_global_nc_f32(ptr: *const f32, guard: bool) -> f32 {
    let value: f32;
    // SAFETY: the caller's contract.
    unsafe {
        asm!(
            "{{",
            ".reg .pred p;",
            "setp.ne.u32 p, {g}, 0;",
            "mov.b32 {v}, 0;",
            "@p ld.global.nc.f32 {v}, [{ptr}];",
            "}}",
            v = out(reg32) value,
            ptr = in(reg64) ptr,
            g = in(reg32) guard as u32,
            options(nostack, readonly),
        );
    }
    value
}

/// The body of a guarded 16-byte load: `instr` (a `ld.global...v4.f32`) of the four floats at
/// `ptr` under the predicate `guard`, zeros without touching memory when it does not hold.
macro_rules! guarded_v4_load {
    ($instr:literal, $ptr:expr, $guard:expr) => {{
        let (x, y, z, w): (f32, f32, f32, f32);
        // SAFETY: the caller's contract (the function this expands in).
        unsafe {
            asm!(
                "{{",
                ".reg .pred p;",
                "setp.ne.u32 p, {g}, 0;",
                "mov.b32 {x}, 0;",
                "mov.b32 {y}, 0;",
                "mov.b32 {z}, 0;",
                "mov.b32 {w}, 0;",
                concat!("@p ", $instr, " {{{x}, {y}, {z}, {w}}}, [{ptr}];"),
                "}}",
                x = out(reg32) x,
                y = out(reg32) y,
                z = out(reg32) z,
                w = out(reg32) w,
                ptr = in(reg64) $ptr,
                g = in(reg32) $guard as u32,
                options(nostack),
            );
        }
        F32x4([x, y, z, w])
    }};
}

/// `@p ld.global.nc.v4.f32`: loads four consecutive floats in one 16-byte transaction when
/// `guard` holds; returns zeros and touches no memory when it does not.
///
/// # Safety
/// When `guard` is true, `ptr` must be a valid global address, aligned to 16 bytes, of four
/// floats that no thread writes while the kernel runs.
#[inline(always)]
pub unsafe fn ld_global_nc_v4_f32(ptr: *const f32, guard: bool) -> F32x4 {
    guarded_v4_load!("ld.global.nc.v4.f32", ptr, guard)
}

/// `ld.global.cs.nc.f32`: loads `*ptr` as *streaming* data, read once: the line is allocated
/// in L1 and L2 with the evict-first policy, so a matrix streaming through the caches takes the
/// place of its own earlier lines rather than of what other work left there (dirty lines a
/// previous kernel wrote are then not written back to memory in the middle of this one).
///
/// # Safety
/// `ptr` must be a valid, 4-byte aligned global address whose contents no thread writes while
/// the kernel runs (the `.nc` path does not see such writes).
#[inline(always)]
pub unsafe fn ld_global_cs_f32(ptr: *const f32) -> f32 {
    let value: f32;
    unsafe {
        asm!(
            "ld.global.cs.nc.f32 {v}, [{ptr}];",
            v = out(reg32) value,
            ptr = in(reg64) ptr,
            options(nostack, readonly),
        );
    }
    value
}

/// `@p ld.global.cs.nc.v4.f32`: [`ld_global_nc_v4_f32`] as streaming data, allocated
/// evict-first as [`ld_global_cs_f32`] says.
///
/// # Safety
/// As [`ld_global_nc_v4_f32`].
#[inline(always)]
pub unsafe fn ld_global_cs_v4_f32(ptr: *const f32, guard: bool) -> F32x4 {
    guarded_v4_load!("ld.global.cs.nc.v4.f32", ptr, guard)
}

/// `ld.global.v2.f32`: loads two consecutive floats in one 8-byte access (`LDG.E.64`),
/// through the coherent path (the kernel may have written them).
///
/// # Safety
/// `ptr` must be a valid global address of two floats, aligned to 8 bytes.
#[inline(always)]
pub unsafe fn ld_global_v2_f32(ptr: *const f32) -> [f32; 2] {
    let (x, y): (f32, f32);
    unsafe {
        asm!(
            "ld.global.v2.f32 {{{x}, {y}}}, [{ptr}];",
            x = out(reg32) x,
            y = out(reg32) y,
            ptr = in(reg64) ptr,
            options(nostack, readonly),
        );
    }
    [x, y]
}

/// `st.global.v2.f32`: stores two consecutive floats in one 8-byte access (`STG.E.64`).
///
/// # Safety
/// `ptr` must be a valid global address of two floats, aligned to 8 bytes, that no other
/// thread accesses while the kernel runs.
#[inline(always)]
pub unsafe fn st_global_v2_f32(ptr: *mut f32, v: [f32; 2]) {
    let [x, y] = v;
    unsafe {
        asm!(
            "st.global.v2.f32 [{ptr}], {{{x}, {y}}};",
            ptr = in(reg64) ptr,
            x = in(reg32) x,
            y = in(reg32) y,
            options(nostack),
        );
    }
}

/// `ld.global.v4.f32`: loads four consecutive floats in one 16-byte access (`LDG.E.128`),
/// through the coherent path (the kernel may have written them).
///
/// # Safety
/// `ptr` must be a valid global address of four floats, aligned to 16 bytes.
#[inline(always)]
pub unsafe fn ld_global_v4_f32(ptr: *const f32) -> F32x4 {
    let (x, y, z, w): (f32, f32, f32, f32);
    unsafe {
        asm!(
            "ld.global.v4.f32 {{{x}, {y}, {z}, {w}}}, [{ptr}];",
            x = out(reg32) x,
            y = out(reg32) y,
            z = out(reg32) z,
            w = out(reg32) w,
            ptr = in(reg64) ptr,
            options(nostack, readonly),
        );
    }
    F32x4([x, y, z, w])
}

/// `st.global.v4.f32`: stores four consecutive floats in one 16-byte access (`STG.E.128`).
///
/// # Safety
/// `ptr` must be a valid global address of four floats, aligned to 16 bytes, that no other
/// thread accesses while the kernel runs.
#[inline(always)]
pub unsafe fn st_global_v4_f32(ptr: *mut f32, v: F32x4) {
    let [x, y, z, w] = v.0;
    unsafe {
        asm!(
            "st.global.v4.f32 [{ptr}], {{{x}, {y}, {z}, {w}}};",
            ptr = in(reg64) ptr,
            x = in(reg32) x,
            y = in(reg32) y,
            z = in(reg32) z,
            w = in(reg32) w,
            options(nostack),
        );
    }
}

/// `st.shared.v4.f32`: stores four floats to shared memory in one instruction (`STS.128`).
///
/// # Safety
/// `addr` must be a 16-byte aligned address inside this block's shared memory allocation,
/// and no other thread may access those 16 bytes until the next barrier.
#[inline(always)]
pub unsafe fn st_shared_v4_f32(addr: SharedAddr, v: F32x4) {
    let [x, y, z, w] = v.0;
    unsafe {
        asm!(
            "st.shared.v4.f32 [{a}], {{{x}, {y}, {z}, {w}}};",
            a = in(reg32) addr.0,
            x = in(reg32) x,
            y = in(reg32) y,
            z = in(reg32) z,
            w = in(reg32) w,
            options(nostack),
        );
    }
}

/// `st.shared.v2.f32`: stores two floats to shared memory in one instruction (`STS.64`).
///
/// # Safety
/// `addr` must be an 8-byte aligned address inside this block's shared memory allocation,
/// and no other thread may access those 8 bytes until the next barrier.
#[inline(always)]
pub unsafe fn st_shared_v2_f32(addr: SharedAddr, v: [f32; 2]) {
    let [x, y] = v;
    unsafe {
        asm!(
            "st.shared.v2.f32 [{a}], {{{x}, {y}}};",
            a = in(reg32) addr.0,
            x = in(reg32) x,
            y = in(reg32) y,
            options(nostack),
        );
    }
}

/// `ld.shared.v4.f32`: loads four floats from shared memory in one instruction (`LDS.128`).
///
/// # Safety
/// `addr` must be a 16-byte aligned address inside this block's shared memory allocation,
/// written before a barrier that every thread of the block has passed since.
#[inline(always)]
pub unsafe fn ld_shared_v4_f32(addr: SharedAddr) -> F32x4 {
    let (x, y, z, w): (f32, f32, f32, f32);
    unsafe {
        asm!(
            "ld.shared.v4.f32 {{{x}, {y}, {z}, {w}}}, [{a}];",
            a = in(reg32) addr.0,
            x = out(reg32) x,
            y = out(reg32) y,
            z = out(reg32) z,
            w = out(reg32) w,
            options(nostack),
        );
    }
    F32x4([x, y, z, w])
}

/// `st.shared.f32`: stores one float to shared memory (`STS`).
///
/// # Safety
/// `addr` must be a 4-byte aligned address inside this block's shared memory allocation, and
/// no other thread may access those 4 bytes until the next barrier.
#[inline(always)]
pub unsafe fn st_shared_f32(addr: SharedAddr, x: f32) {
    unsafe {
        asm!(
            "st.shared.f32 [{a}], {x};",
            a = in(reg32) addr.0,
            x = in(reg32) x,
            options(nostack),
        );
    }
}

/// `ld.shared.f32`: loads one float from shared memory (`LDS`).
///
/// # Safety
/// `addr` must be a 4-byte aligned address inside this block's shared memory allocation,
/// written before a barrier (block or warp, as the writer was) that this thread has passed.
#[inline(always)]
pub unsafe fn ld_shared_f32(addr: SharedAddr) -> f32 {
    let x: f32;
    unsafe {
        asm!(
            "ld.shared.f32 {x}, [{a}];",
            a = in(reg32) addr.0,
            x = out(reg32) x,
            options(nostack),
        );
    }
    x
}

/// `bar.sync ID, THREADS`: named barrier `ID` (1..16; 0 is the block-wide one), which waits for
/// `THREADS` threads (a multiple of 32) and orders their shared-memory accesses as `bar.sync 0`
/// does the block's: a barrier for a team of warps inside a block.
///
/// # Safety
/// Exactly `THREADS` threads, whole warps, reach barrier `ID` each time, and no other team uses
/// `ID` meanwhile.
#[inline(always)]
pub unsafe fn bar_sync_named<const ID: u32, const THREADS: u32>() {
    unsafe { asm!("bar.sync {id}, {n};", id = const ID, n = const THREADS, options(nostack)) }
}

/// `bar.arrive ID, THREADS`: counts this thread's arrival at named barrier `ID` without
/// waiting; the threads that wait there ([`bar_sync_named`], with the same count) see this
/// thread's earlier shared-memory writes. The producer side of a handoff between warps.
///
/// # Safety
/// As [`bar_sync_named`]; the arrivals and the waits together are `THREADS` threads.
#[inline(always)]
pub unsafe fn bar_arrive_named<const ID: u32, const THREADS: u32>() {
    unsafe { asm!("bar.arrive {id}, {n};", id = const ID, n = const THREADS, options(nostack)) }
}

/// `bar.red.or.pred`: [`bar_sync_named`] that also returns whether `pred` is true in any of the
/// team's `THREADS` threads (CUDA's `__syncthreads_or`, for barrier 0 and the whole block).
///
/// # Safety
/// As [`bar_sync_named`].
#[inline(always)]
pub unsafe fn bar_red_or_named<const ID: u32, const THREADS: u32>(pred: bool) -> bool {
    let any: u32;
    unsafe {
        asm!(
            "{{",
            ".reg .pred p, q;",
            "setp.ne.u32 p, {x}, 0;",
            "bar.red.or.pred q, {id}, {n}, p;",
            "selp.u32 {r}, 1, 0, q;",
            "}}",
            x = in(reg32) u32::from(pred),
            r = out(reg32) any,
            id = const ID,
            n = const THREADS,
            options(nostack),
        );
    }
    any != 0
}

/// `barrier.sync ID, THREADS`: [`bar_sync_named`] in its unaligned form, which a warp may reach
/// with its threads not converged (after a loop whose exit they took apart).
///
/// # Safety
/// As [`bar_sync_named`].
#[inline(always)]
pub unsafe fn barrier_sync_unaligned<const ID: u32, const THREADS: u32>() {
    unsafe { asm!("barrier.sync {id}, {n};", id = const ID, n = const THREADS, options(nostack)) }
}

/// `red.shared.or.b32`: sets the bits of `bits` in the 32-bit word at `addr`, atomically with
/// respect to the other threads of the block.
///
/// # Safety
/// `addr` is a 4-byte aligned address in this block's shared memory.
#[inline(always)]
pub unsafe fn red_shared_or(addr: SharedAddr, bits: u32) {
    unsafe {
        asm!("red.shared.or.b32 [{a}], {b};", a = in(reg32) addr.0, b = in(reg32) bits, options(nostack))
    }
}

/// `mbarrier.init.shared::cta.b64`: makes the 8 bytes at `bar` a memory barrier whose phases
/// complete after `count` arrivals each (the first phase has parity 0).
///
/// # Safety
/// `bar` is 8-byte aligned in this block's shared memory and no thread uses it as a barrier
/// until a block-wide barrier after this; one thread initializes it.
#[inline(always)]
pub unsafe fn mbarrier_init(bar: SharedAddr, count: u32) {
    unsafe {
        asm!("mbarrier.init.shared::cta.b64 [{b}], {n};", b = in(reg32) bar.0, n = in(reg32) count, options(nostack))
    }
}

/// `mbarrier.arrive.shared::cta.b64`: counts this thread's arrival at the barrier's current
/// phase, with release semantics: its earlier memory accesses happen before the accesses of any
/// thread that then sees the phase complete ([`mbarrier_wait`]).
///
/// # Safety
/// `bar` was initialized by [`mbarrier_init`]; no more threads arrive per phase than its count.
#[inline(always)]
pub unsafe fn mbarrier_arrive(bar: SharedAddr) {
    unsafe {
        asm!(
            "{{",
            ".reg .b64 state;",
            "mbarrier.arrive.shared::cta.b64 state, [{b}];",
            "}}",
            b = in(reg32) bar.0,
            options(nostack),
        )
    }
}

/// Waits until the phase of the barrier with parity `parity` (0 or 1) has completed, with
/// acquire semantics (`mbarrier.try_wait.parity`, retried: each try suspends the thread for a
/// while in hardware). On a freshly initialized barrier, parity 1 names the phase before the
/// first, which counts as complete: a producer that waits on parity `1` first passes at once.
///
/// # Safety
/// `bar` was initialized by [`mbarrier_init`] and is not re-initialized meanwhile.
#[inline(always)]
pub unsafe fn mbarrier_wait(bar: SharedAddr, parity: u32) {
    loop {
        let done: u32;
        unsafe {
            asm!(
                "{{",
                ".reg .pred p;",
                "mbarrier.try_wait.parity.shared::cta.b64 p, [{b}], {parity};",
                "selp.u32 {r}, 1, 0, p;",
                "}}",
                b = in(reg32) bar.0,
                parity = in(reg32) parity,
                r = out(reg32) done,
                options(nostack),
            );
        }
        if done != 0 {
            return;
        }
    }
}

/// `setmaxnreg.dec.sync.aligned.u32 REGS`: the warpgroup gives registers back to the SM, keeping
/// `REGS` per thread (24 to 256, a multiple of 8), so that other warpgroups of the block can
/// take them ([`setmaxnreg_inc`]): how a warp-specialized kernel moves registers from the warps
/// that copy to the warps that accumulate. `ptxas` allocates the code after it within `REGS`.
///
/// # Safety
/// `.sync.aligned`: all four warps of a warpgroup execute it together, in a kernel launched
/// with a register limit (`.maxntid` and `.minnctapersm`), at most that limit before.
#[cfg(target_feature = "sm_90a")]
#[inline(always)]
pub unsafe fn setmaxnreg_dec<const REGS: u32>() {
    unsafe { asm!("setmaxnreg.dec.sync.aligned.u32 {n};", n = const REGS, options(nostack)) }
}

/// `setmaxnreg.inc.sync.aligned.u32 REGS`: the warpgroup waits until the SM has `REGS` registers
/// per thread for it (released by [`setmaxnreg_dec`] elsewhere in the block) and takes them.
///
/// # Safety
/// As [`setmaxnreg_dec`]; the block's warpgroups never ask for more registers in all than the
/// launch gave the block, or this waits forever.
#[cfg(target_feature = "sm_90a")]
#[inline(always)]
pub unsafe fn setmaxnreg_inc<const REGS: u32>() {
    unsafe { asm!("setmaxnreg.inc.sync.aligned.u32 {n};", n = const REGS, options(nostack)) }
}

/// `bar.warp.sync 0xffffffff`: waits for all 32 threads of the warp and orders their memory
/// accesses, so that shared memory one lane wrote is visible to the others (a barrier for a
/// warp-private region of shared memory, cheaper than a block-wide `bar.sync`).
///
/// # Safety
/// All 32 threads of the warp must execute it (the kernels call it with no divergence).
#[inline(always)]
pub unsafe fn sync_warp() {
    unsafe { asm!("bar.warp.sync -1;", options(nostack)) }
}

/// `vote.sync.all.pred`: whether `pred` is true in every thread of the warp.
///
/// # Safety
/// All 32 threads of the warp must execute it (the kernels call it with no divergence).
#[inline(always)]
pub unsafe fn vote_all(pred: bool) -> bool {
    let all: u32;
    unsafe {
        asm!(
            "{{",
            ".reg .pred p, q;",
            "setp.ne.u32 p, {x}, 0;",
            "vote.sync.all.pred q, p, -1;",
            "selp.u32 {r}, 1, 0, q;",
            "}}",
            x = in(reg32) u32::from(pred),
            r = out(reg32) all,
            options(nostack),
        );
    }
    all != 0
}

/// `shfl.sync.bfly.b32`: the value `x` of the lane whose index is this lane's XOR `mask`
/// (a butterfly exchange), for a reduction across lanes in registers.
///
/// # Safety
/// All 32 threads of the warp must execute it (the kernels call it with no divergence).
#[inline(always)]
pub unsafe fn shfl_bfly_f32(x: f32, mask: u32) -> f32 {
    let y: f32;
    unsafe {
        asm!(
            "shfl.sync.bfly.b32 {y}, {x}, {m}, 31, -1;",
            y = out(reg32) y,
            x = in(reg32) x,
            m = in(reg32) mask,
            options(nostack),
        );
    }
    y
}

/// `cp.async.cg.shared.global [dst], [src], 16, src_size`: starts an asynchronous copy of 16
/// bytes from global to shared memory, bypassing L1 and the register file. When `guard` is
/// false the source size is 0: nothing is read and the 16 destination bytes are zero-filled.
/// The copy completes only after [`cp_async_commit_group`] and a matching
/// [`cp_async_wait_group`].
///
/// # Safety
/// `dst` must be a 16-byte aligned address in this block's shared memory; when `guard` is
/// true, `src` must be a valid, 16-byte aligned global address. Neither may be touched by
/// ordinary loads or stores until the copy's group has been waited for and a barrier passed.
#[inline(always)]
pub unsafe fn cp_async_cg_16(dst: SharedAddr, src: *const f32, guard: bool) {
    let src_size: u32 = if guard { 16 } else { 0 };
    unsafe {
        asm!(
            "cp.async.cg.shared.global [{d}], [{s}], 16, {n};",
            d = in(reg32) dst.0,
            s = in(reg64) src,
            n = in(reg32) src_size,
            options(nostack),
        );
    }
}

/// `cp.async.ca.shared.global [dst], [src], 4, src_size`: as [`cp_async_cg_16`] for a single
/// float (4-byte copies must go through L1, `.ca`), so a copy can scatter a row of global
/// memory into a column of shared memory (a transpose on the way in).
///
/// # Safety
/// `dst` must be a 4-byte aligned address in this block's shared memory; when `guard` is true,
/// `src` must be a valid, 4-byte aligned global address. Same visibility rules as
/// [`cp_async_cg_16`].
#[inline(always)]
pub unsafe fn cp_async_ca_4(dst: SharedAddr, src: *const f32, guard: bool) {
    let src_size: u32 = if guard { 4 } else { 0 };
    unsafe {
        asm!(
            "cp.async.ca.shared.global [{d}], [{s}], 4, {n};",
            d = in(reg32) dst.0,
            s = in(reg64) src,
            n = in(reg32) src_size,
            options(nostack),
        );
    }
}

/// `cp.async.commit_group`: closes the group of the `cp.async` copies this thread started
/// since the last commit.
///
/// # Safety
/// Always sound to execute; it is `unsafe` only to sit with the copies it commits.
#[inline(always)]
pub unsafe fn cp_async_commit_group() {
    unsafe { asm!("cp.async.commit_group;", options(nostack)) }
}

/// `cp.async.wait_group N`: waits until at most `N` of this thread's committed `cp.async`
/// groups are still in flight. The copied data is visible to other threads only after a
/// barrier that follows the wait.
///
/// # Safety
/// Always sound to execute; the obligation is on the reader of the copied data (a barrier).
#[inline(always)]
pub unsafe fn cp_async_wait_group<const N: u32>() {
    unsafe { asm!("cp.async.wait_group {n};", n = const N, options(nostack)) }
}

/// `mov.b32 0`: a zero the compiler cannot see through. Arithmetic on a value that is this zero
/// on one path into a join and a loaded value on another is not folded on the zero's path, and
/// so not moved into the branches (where it would wait for the loads of one branch before the
/// next branch issues its own).
#[inline(always)]
pub fn opaque_zero() -> f32 {
    let zero: f32;
    // SAFETY: a register move.
    unsafe { asm!("mov.b32 {z}, 0;", z = out(reg32) zero, options(pure, nomem, nostack)) }
    zero
}

/// `mov.b64`: `x`, through a move the compiler neither sees through nor moves out of a loop.
/// An address step that passes through it each iteration is not known to be the same in every
/// iteration, so the compiler does not turn each of an unrolled loop's addresses built from it
/// into an induction variable of its own (one register pair each, held across the loop).
#[inline(always)]
pub fn opaque_u64(x: u64) -> u64 {
    let y: u64;
    // SAFETY: a register move; without `pure`, it stays where it is written.
    unsafe { asm!("mov.b64 {y}, {x};", y = out(reg64) y, x = in(reg64) x, options(nomem, nostack)) }
    y
}

/// `cvt.rna.tf32.f32`: rounds `x` to TensorFloat-32 (the 8-bit exponent of `f32`, 10 mantissa
/// bits), to nearest with ties away from zero. The result is returned as an `f32` whose low 13
/// mantissa bits are zero, so `x - tf32(x)` is exact: the part of `x` a TF32 operand drops.
/// Infinities and NaN stay what they are; finite values above the largest TF32 value round to
/// infinity.
#[inline(always)]
pub fn cvt_rna_tf32(x: f32) -> f32 {
    let y: f32;
    // SAFETY: a register-to-register conversion; no memory, no preconditions.
    unsafe {
        asm!(
            "cvt.rna.tf32.f32 {y}, {x};",
            x = in(reg32) x,
            y = out(reg32) y,
            options(pure, nomem, nostack),
        );
    }
    y
}

/// `mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32`: the warp multiplies a 16 x 8 TF32
/// matrix `A` by an 8 x 8 TF32 matrix `B` on the tensor cores and adds the 16 x 8 product to the
/// `f32` accumulators `d` in place (`D = A B + D`). The products of TF32 values are exact; the
/// sums are `f32`.
///
/// Each lane holds a fixed piece of every matrix. With `g = lane / 4` and `t = lane % 4`:
/// - `a = [A[g][t], A[g + 8][t], A[g][t + 4], A[g + 8][t + 4]]`,
/// - `b = [B[t][g], B[t + 4][g]]`,
/// - `d = [D[g][2t], D[g][2t + 1], D[g + 8][2t], D[g + 8][2t + 1]]`.
///
/// The operands must already be TF32 values ([`cvt_rna_tf32`]); the instruction ignores the low
/// 13 mantissa bits of an `f32`.
///
/// # Safety
/// `.sync.aligned`: all 32 lanes of the warp execute the same instruction together (no
/// divergence around the call).
#[inline(always)]
pub unsafe fn mma_m16n8k8_tf32(d: &mut [f32; 4], a: &[f32; 4], b: &[f32; 2]) {
    unsafe {
        asm!(
            "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 \
             {{{d0}, {d1}, {d2}, {d3}}}, {{{a0}, {a1}, {a2}, {a3}}}, {{{b0}, {b1}}}, \
             {{{d0}, {d1}, {d2}, {d3}}};",
            d0 = inout(reg32) d[0],
            d1 = inout(reg32) d[1],
            d2 = inout(reg32) d[2],
            d3 = inout(reg32) d[3],
            a0 = in(reg32) a[0],
            a1 = in(reg32) a[1],
            a2 = in(reg32) a[2],
            a3 = in(reg32) a[3],
            b0 = in(reg32) b[0],
            b1 = in(reg32) b[1],
            options(pure, nomem, nostack),
        );
    }
}

/// A `wgmma` shared-memory matrix descriptor for the layout without swizzling: the matrix is
/// made of "core matrices" of 8 rows by 16 bytes (4 TF32 values along `K`), each 128
/// contiguous bytes; `k_stride` bytes separate core matrices adjacent along `K` (the
/// descriptor's "leading dimension byte offset") and `mn_stride` bytes those adjacent along `M`
/// or `N` ("stride dimension byte offset"). Bits: start address / 16 in 0..14, `k_stride` / 16
/// in 16..30, `mn_stride` / 16 in 32..46, swizzle mode 0 in 62..64.
#[cfg(target_feature = "sm_90a")]
#[derive(Clone, Copy)]
pub struct MatrixDescriptor(u64);

#[cfg(target_feature = "sm_90a")]
impl MatrixDescriptor {
    /// The descriptor of the matrix starting at `start` (16-byte aligned, below 256 KiB).
    #[inline(always)]
    pub fn new(start: SharedAddr, k_stride: u32, mn_stride: u32) -> Self {
        let field = |bytes: u32| u64::from((bytes >> 4) & 0x3fff);
        Self(field(start.0) | field(k_stride) << 16 | field(mn_stride) << 32)
    }

    /// The same layout starting `bytes` later (a multiple of 16 that keeps the start below
    /// 256 KiB, so the address field does not carry).
    #[inline(always)]
    pub fn offset_bytes(self, bytes: u32) -> Self {
        Self(self.0 + u64::from(bytes >> 4))
    }
}

/// `wgmma.fence.sync.aligned`: orders this warp's earlier register accesses before the
/// `wgmma` instructions that follow; needed before the first `wgmma` of a batch whose
/// accumulators other instructions have touched.
///
/// # Safety
/// `.sync.aligned`: every lane of the warp executes it together.
#[cfg(target_feature = "sm_90a")]
#[inline(always)]
pub unsafe fn wgmma_fence() {
    unsafe { asm!("wgmma.fence.sync.aligned;", options(nostack)) }
}

/// `griddepcontrol.wait`: waits until the grids this one depends on (the launches before it on
/// its stream) have completed and their memory operations are visible to it. A kernel launched
/// with programmatic stream serialization (programmatic dependent launch) may start while the
/// kernel before it still runs, and must wait here before it reads what that kernel writes;
/// launched without it, it returns at once.
#[cfg(target_feature = "sm_90a")]
#[inline(always)]
pub fn griddepcontrol_wait() {
    // SAFETY: waiting has no preconditions.
    unsafe { asm!("griddepcontrol.wait;", options(nostack)) }
}

/// `fence.proxy.async.shared::cta`: makes this thread's ordinary shared-memory writes visible to
/// the asynchronous proxy that `wgmma` reads its operands through (follow it with a barrier so
/// that every thread's writes are covered).
#[cfg(target_feature = "sm_90a")]
#[inline(always)]
pub fn fence_proxy_async_shared() {
    // SAFETY: a memory fence has no preconditions.
    unsafe { asm!("fence.proxy.async.shared::cta;", options(nostack)) }
}

/// The operands `d0..d15`, `d16..d31` and `d32..d63` of [`asm_with_accumulators!`] as template
/// fragments, from which [`accumulators!`] and [`untouched_accumulators!`] are made.
#[cfg(target_feature = "sm_90a")]
macro_rules! accumulator_names {
    (0) => {
        "{d0}, {d1}, {d2}, {d3}, {d4}, {d5}, {d6}, {d7}, {d8}, {d9}, {d10}, {d11}, {d12}, {d13}, {d14}, {d15}"
    };
    (16) => {
        "{d16}, {d17}, {d18}, {d19}, {d20}, {d21}, {d22}, {d23}, {d24}, {d25}, {d26}, {d27}, {d28}, {d29}, {d30}, {d31}"
    };
    (32) => {
        "{d32}, {d33}, {d34}, {d35}, {d36}, {d37}, {d38}, {d39}, {d40}, {d41}, {d42}, {d43}, {d44}, {d45}, {d46}, {d47}, {d48}, {d49}, {d50}, {d51}, {d52}, {d53}, {d54}, {d55}, {d56}, {d57}, {d58}, {d59}, {d60}, {d61}, {d62}, {d63}"
    };
}

/// The operands of [`asm_with_accumulators!`] that an `m64nN` `wgmma` (`N` = 128, 64 or 32)
/// writes, as a template fragment: `{d0}, ..., {d63}`, `{d0}, ..., {d31}` or `{d0}, ..., {d15}`.
#[cfg(target_feature = "sm_90a")]
macro_rules! accumulators {
    (32) => {
        accumulator_names!(0)
    };
    (64) => {
        concat!(accumulators!(32), ", ", accumulator_names!(16))
    };
    (128) => {
        concat!(accumulators!(64), ", ", accumulator_names!(32))
    };
}

/// The operands of [`asm_with_accumulators!`] that an `m64nN` `wgmma` does not use (the rest
/// of the 64), as a template fragment for a comment, so that they pass through unchanged.
#[cfg(target_feature = "sm_90a")]
macro_rules! untouched_accumulators {
    (128) => {
        ""
    };
    (64) => {
        accumulator_names!(32)
    };
    (32) => {
        concat!(accumulator_names!(16), ", ", accumulator_names!(32))
    };
}

/// `asm!` with the 64 accumulators `$d` of an `m64n128` `wgmma` tile as the operands `d0..d63`
/// (of which a narrower tile uses the first),
/// passed `inout` or `out` (`$dir`), after the template and before the other operands.
#[cfg(target_feature = "sm_90a")]
macro_rules! asm_with_accumulators {
    ($dir:ident $d:ident, $($template:expr),+; $($operands:tt)*) => {
        asm!(
            $($template),+,
            d0 = $dir(reg32) $d[0],
            d1 = $dir(reg32) $d[1],
            d2 = $dir(reg32) $d[2],
            d3 = $dir(reg32) $d[3],
            d4 = $dir(reg32) $d[4],
            d5 = $dir(reg32) $d[5],
            d6 = $dir(reg32) $d[6],
            d7 = $dir(reg32) $d[7],
            d8 = $dir(reg32) $d[8],
            d9 = $dir(reg32) $d[9],
            d10 = $dir(reg32) $d[10],
            d11 = $dir(reg32) $d[11],
            d12 = $dir(reg32) $d[12],
            d13 = $dir(reg32) $d[13],
            d14 = $dir(reg32) $d[14],
            d15 = $dir(reg32) $d[15],
            d16 = $dir(reg32) $d[16],
            d17 = $dir(reg32) $d[17],
            d18 = $dir(reg32) $d[18],
            d19 = $dir(reg32) $d[19],
            d20 = $dir(reg32) $d[20],
            d21 = $dir(reg32) $d[21],
            d22 = $dir(reg32) $d[22],
            d23 = $dir(reg32) $d[23],
            d24 = $dir(reg32) $d[24],
            d25 = $dir(reg32) $d[25],
            d26 = $dir(reg32) $d[26],
            d27 = $dir(reg32) $d[27],
            d28 = $dir(reg32) $d[28],
            d29 = $dir(reg32) $d[29],
            d30 = $dir(reg32) $d[30],
            d31 = $dir(reg32) $d[31],
            d32 = $dir(reg32) $d[32],
            d33 = $dir(reg32) $d[33],
            d34 = $dir(reg32) $d[34],
            d35 = $dir(reg32) $d[35],
            d36 = $dir(reg32) $d[36],
            d37 = $dir(reg32) $d[37],
            d38 = $dir(reg32) $d[38],
            d39 = $dir(reg32) $d[39],
            d40 = $dir(reg32) $d[40],
            d41 = $dir(reg32) $d[41],
            d42 = $dir(reg32) $d[42],
            d43 = $dir(reg32) $d[43],
            d44 = $dir(reg32) $d[44],
            d45 = $dir(reg32) $d[45],
            d46 = $dir(reg32) $d[46],
            d47 = $dir(reg32) $d[47],
            d48 = $dir(reg32) $d[48],
            d49 = $dir(reg32) $d[49],
            d50 = $dir(reg32) $d[50],
            d51 = $dir(reg32) $d[51],
            d52 = $dir(reg32) $d[52],
            d53 = $dir(reg32) $d[53],
            d54 = $dir(reg32) $d[54],
            d55 = $dir(reg32) $d[55],
            d56 = $dir(reg32) $d[56],
            d57 = $dir(reg32) $d[57],
            d58 = $dir(reg32) $d[58],
            d59 = $dir(reg32) $d[59],
            d60 = $dir(reg32) $d[60],
            d61 = $dir(reg32) $d[61],
            d62 = $dir(reg32) $d[62],
            d63 = $dir(reg32) $d[63],
            $($operands)*
        )
    };
}

/// `wgmma.mma_async.sync.aligned.m64n{$n}k8.f32.tf32.tf32` on the accumulators `$d` (`$dir`:
/// `inout` or `out`; those past the first `$n / 2` are only named in a comment), `A` as the
/// operand text `$a` (a descriptor `{a}`, or four registers `{{{a0}, {a1}, {a2}, {a3}}}`) bound
/// by `$a_operands`, and the descriptor `$b`, with scale-d `$scale_d` (`"1"`: `D = A B + D`,
/// `"0"`: `D = A B`) and both operands unnegated.
#[cfg(target_feature = "sm_90a")]
macro_rules! mma_async {
    ($dir:ident $d:ident, $n:tt, $scale_d:literal, $a:literal, $b:ident; $($a_operands:tt)*) => {
        asm_with_accumulators!($dir $d,
            concat!(
                "wgmma.mma_async.sync.aligned.m64n",
                $n,
                "k8.f32.tf32.tf32 {{",
                accumulators!($n),
                "}}, ",
                $a,
                ", {b}, ",
                $scale_d,
                ", 1, 1;"
            ),
            concat!("// ", untouched_accumulators!($n));
            $($a_operands)*
            b = in(reg64) $b.0,
            options(nostack),
        )
    };
}

/// `wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32`: the warpgroup (4 warps, 128
/// threads) multiplies the 64 x 8 TF32 matrix `A` by the 8 x 128 TF32 matrix `B`, both read
/// from shared memory through their descriptors (both "K-major": 4 consecutive `k` of a row of
/// `A` or of a column of `B` are one 16-byte core-matrix row), and adds the product to the
/// `f32` accumulators: `D = A B + D`. [`wgmma_m64n128k8_tf32_into`] overwrites them instead.
///
/// Warp `w` of the group holds rows `16 w..16 w + 16` of `D`; with `g = lane / 4`, `t = lane %
/// 4`, `d[4 j + e]` is `D[16 w + g + 8 (e / 2)][8 j + 2 t + e % 2]` (the `mma.m16n8` accumulator
/// layout, once per column block `j` of 8).
///
/// The instruction is asynchronous: it only starts here. Until [`wgmma_commit_group`] and a
/// [`wgmma_wait_group`] that covers it, `d` must not be read or written by anything else, and
/// the shared memory it reads must not change.
///
/// # Safety
/// All 128 threads of the warpgroup execute it together, after [`wgmma_fence`]; the
/// descriptors describe initialized shared memory of this block, published to the async proxy
/// ([`fence_proxy_async_shared`] and a barrier); the contract above on `d`.
#[cfg(target_feature = "sm_90a")]
#[inline(always)]
pub unsafe fn wgmma_m64n128k8_tf32(d: &mut [f32; 64], a: MatrixDescriptor, b: MatrixDescriptor) {
    unsafe { mma_async!(inout d, 128, "1", "{a}", b; a = in(reg64) a.0,) }
}

/// [`wgmma_m64n128k8_tf32`] with `D = A B`: the accumulators' old values are not read, so the
/// compiler may use their registers for other values up to this point.
///
/// # Safety
/// As [`wgmma_m64n128k8_tf32`].
#[cfg(target_feature = "sm_90a")]
#[inline(always)]
pub unsafe fn wgmma_m64n128k8_tf32_into(d: &mut [f32; 64], a: MatrixDescriptor, b: MatrixDescriptor) {
    unsafe { mma_async!(out d, 128, "0", "{a}", b; a = in(reg64) a.0,) }
}

/// [`mma_async!`] with `A` from registers: `$a` is this thread's fragment, four TF32 values.
#[cfg(target_feature = "sm_90a")]
macro_rules! mma_async_registers {
    ($dir:ident $d:ident, $n:tt, $scale_d:literal, $a:ident, $b:ident) => {
        mma_async!($dir $d, $n, $scale_d, "{{{a0}, {a1}, {a2}, {a3}}}", $b;
            a0 = in(reg32) $a[0],
            a1 = in(reg32) $a[1],
            a2 = in(reg32) $a[2],
            a3 = in(reg32) $a[3],
        )
    };
}

/// [`mma_async_registers!`] at the width `$n` (a `const` generic: 128, 64 or 32; any other
/// value is 32).
#[cfg(target_feature = "sm_90a")]
macro_rules! mma_async_registers_at {
    ($dir:ident $d:ident, $n:ident, $scale_d:literal, $a:ident, $b:ident) => {
        match $n {
            128 => mma_async_registers!($dir $d, 128, $scale_d, $a, $b),
            64 => mma_async_registers!($dir $d, 64, $scale_d, $a, $b),
            _ => mma_async_registers!($dir $d, 32, $scale_d, $a, $b),
        }
    };
}

/// `wgmma.mma_async.sync.aligned.m64nNk8.f32.tf32.tf32` for `N` = 128, 64 or 32, with `A` from
/// registers: the warpgroup multiplies the 64 x 8 `A` by the 8 x `N` `B` (the first `N` columns
/// of the matrix `b` describes) into `d[..N / 2]`, `D = A B + D`; `d[N / 2..]` pass through
/// unchanged. The layouts are [`wgmma_m64n128k8_tf32`]'s (`d[4 j + e]` for column blocks `j <
/// N / 8`); warp `w` of the group holds rows `16 w..16 w + 16` of `A`: with `g = lane / 4`, `t
/// = lane % 4`, `a = [A[16 w + g][t], A[16 w + g + 8][t], A[16 w + g][t + 4], A[16 w + g +
/// 8][t + 4]]` (the `mma.m16n8k8` layout), as TF32 values.
///
/// # Safety
/// As [`wgmma_m64n128k8_tf32`]. The instruction reads `a`'s registers asynchronously, until
/// the [`wgmma_wait_group`] that covers it, and the compiler does not know that: it may give
/// those registers to a value computed before the wait. So the caller computes no new
/// fragment while one is in flight (compute the next one after the wait).
#[cfg(target_feature = "sm_90a")]
#[inline(always)]
pub unsafe fn wgmma_m64k8_tf32_rs<const N: u32>(d: &mut [f32; 64], a: &[f32; 4], b: MatrixDescriptor) {
    const { assert!(N == 128 || N == 64 || N == 32) };
    unsafe { mma_async_registers_at!(inout d, N, "1", a, b) }
}

/// [`wgmma_m64k8_tf32_rs`] with `D = A B`: the old values of `d[..N / 2]` are not read, and
/// `d[N / 2..]` are unspecified afterwards.
///
/// # Safety
/// As [`wgmma_m64k8_tf32_rs`].
#[cfg(target_feature = "sm_90a")]
#[inline(always)]
pub unsafe fn wgmma_m64k8_tf32_rs_into<const N: u32>(d: &mut [f32; 64], a: &[f32; 4], b: MatrixDescriptor) {
    const { assert!(N == 128 || N == 64 || N == 32) };
    unsafe { mma_async_registers_at!(out d, N, "0", a, b) }
}

/// `wgmma.commit_group.sync.aligned`: closes the group of the `wgmma` instructions this warp
/// started since the last commit.
///
/// # Safety
/// `.sync.aligned`: every lane of the warp executes it together.
#[cfg(target_feature = "sm_90a")]
#[inline(always)]
pub unsafe fn wgmma_commit_group() {
    unsafe { asm!("wgmma.commit_group.sync.aligned;", options(nostack)) }
}

/// `wgmma.wait_group.sync.aligned N`: waits until at most `N` of this warp's committed `wgmma`
/// groups are pending. The accumulators `d` pass through the instruction (as operands of the
/// `asm!`), so the compiler neither reads them before it nor moves them across it: after it,
/// `d` holds the results of every group but the `N` newest.
///
/// # Safety
/// `.sync.aligned`: every lane of the warp executes it together.
#[cfg(target_feature = "sm_90a")]
#[inline(always)]
pub unsafe fn wgmma_wait_group<const N: u32>(d: &mut [f32; 64]) {
    unsafe {
        asm_with_accumulators!(inout d,
            "wgmma.wait_group.sync.aligned {n};",
            concat!("// ", accumulators!(128));
            n = const N,
            options(nostack),
        );
    }
}
