//! Step 8, the first flagship kernel (seed 000, section 5): 128 x 128 x 8 with double
//! buffering at both levels of the memory hierarchy, on the warp-tiled layout.
//!
//! What it adds over [`vectorized`](crate::ladder::vectorized):
//! - Warp tiling ([`warp_tile`](crate::ladder::warp_tile)): each warp owns a 32 x 64 region and each
//!   lane four 4 x 4 accumulator blocks, so fragment loads are conflict-free `ld.shared.v4`.
//! - Shared-memory double buffering: two stages of the `A` and `B` tiles. While the block
//!   computes on one stage, the next tile's global loads are in flight into registers; they
//!   are stored to the other stage after the last `k` of the current one, so one barrier per
//!   tile is enough (the stage being overwritten was last read before the previous barrier).
//!   A stage is the `A` tile followed by the `B` tile; the stage is switched by XOR-ing one
//!   offset (`0 <-> STAGE`), and every shared address is a base plus an immediate.
//! - Register double buffering: the fragments for `k + 1` are loaded from shared memory while
//!   the outer product of `k` runs.
//! - `A` is stored transposed with a leading dimension of 132 floats. Each thread loads 4
//!   consecutive `k` of one row (one 16-byte load in the `vec4` entry) and stores them as 4
//!   scalars down a column of the transposed tile; the 4 extra floats per row shift each `k`
//!   row by 4 banks, so the 16 rows x 2 `k` halves of a warp's store hit 32 different banks.
//!   (Seed 000 instead loads 4 rows of one `k` with 4 scalar loads and stores them with one
//!   `st.shared.v4`, which the same padding makes conflict-free; here that held 4 row pointers
//!   live across the loop and spilled at the 128-register cap.)
//! - `B` is loaded with one 16-byte load per thread (the `vec4` entry) or 4 guarded scalar
//!   loads, and stored with `st.shared.v4`.
//! - `C` goes back through shared memory, 128 contiguous bytes per warp store
//!   ([`WarpTile::store_c`](crate::ladder::warp_tile)).
//! - Two tiles per loop iteration (`vec4` entry), so both stage offsets are immediates and the
//!   fragments need no moves at the back edge.
//!
//! Tile: 128 x 128 of `C`, `K` step 8, 256 threads (8 x 8 outputs each), 128 registers (two
//! blocks per SM, `.minnctapersm 2`), no local memory.

use crate::infra::launch::{KernelSpec, Module, Padding, Shapes};
use crate::ladder::warp_tile::{BK, BM, BN, STAGE, THREADS, WARPS_N, smem_bytes};

/// Launch configuration of [`sgemm_double_buffered`](self).
pub const SPEC: KernelSpec = KernelSpec {
    name: "double_buffered",
    entry: "sgemm_double_buffered",
    vec4_entry: Some("sgemm_double_buffered_vec4"),
    vec4_b: true,
    summary: "flagship 128x128x8: warp tiles, double-buffered shared memory and registers",
    block: (THREADS, 1),
    tile: (BM, BN),
    smem_bytes: smem_bytes(2 * STAGE, WARPS_N as usize),
    min_blocks_per_sm: 2,
    members_per_block: 1,
    k_slices: None,
    padding: Padding::Never,
    arch: None,
    module: Module::Ladder,
    shapes: Shapes::Any,
    reads_a_transposed: false,
    reads_b_transposed: false,
};

const _: () = assert!(
    BM * BK / 4 == THREADS && BK * BN / 4 == THREADS,
    "each thread loads one 4-vector of each tile per stage"
);

#[cfg(target_arch = "nvptx64")]
pub(crate) mod device_code {
    use crate::infra::device::*;
    use crate::infra::ptx::{F32x4, SharedAddr, st_shared_f32, st_shared_v4_f32};
    use crate::ladder::warp_tile::{
        BK, WARPS_N, WarpTile, a_ld, a_tile, bm, bn, smem_bytes, stage, threads, warp_m,
    };

    /// One stage's worth of global data held in registers between its load and its store:
    /// `LA` 4-vectors of `A` (rows half a block's thread count apart) and one of `B`.
    struct Staged<const LA: usize> {
        a: [F32x4; LA],
        b: F32x4,
    }

    /// The kernel's body on the `16 R x 64 WN` warp-tiled geometry with `128 WN` threads,
    /// each thread loading `LA = R / (4 WN)` 4-vectors of `A` and one of `B` per tile: `R = 8,
    /// WN = 2` here and in [`split_k`](crate::production::split_k), `R = 16, WN = 2` in
    /// [`wide_tile`](crate::ladder::wide_tile), `R = 4, WN = 1` in
    /// [`small_tile`](crate::production::small_tile).
    ///
    /// # Safety
    /// The GEMM contract (see [`gemm_entry!`](crate::infra::device)).
    #[inline(always)]
    ///
    /// `AHEAD` is how many tiles' global loads are in flight while a tile is computed: 1 (the
    /// next tile's), or 2 (the next two's, at the price of one more tile in registers), for
    /// short `K` loops whose few FMAs per tile cannot cover a load's latency.
    ///
    /// With `SKIP_IDLE`, a warp whose rows of the tile all lie at or past `m` (the bottom of a
    /// tile taller than what is left of `C`) only loads and stores its share of the tiles for
    /// the other warps: it reads no fragments and issues no FMAs, and writes nothing of `C`.
    ///
    /// `A_COLUMNS`: `A` is read column-major (element `(i, p)` at `a[p * lda + i]`), each thread
    /// loading runs of 4 rows of one `k` and storing them whole into the transposed tile, whose
    /// layout they already have; its 16-byte entry needs `m` and `lda` multiples of 4.
    /// `B_COLUMNS`: `B` is read column-major (element `(p, j)` at `b[j * ldb + p]`), each
    /// thread loading runs of 4 `k` of one column and storing them as 4 scalars down the tile's
    /// column, as a row-major `A` is; its 16-byte entry needs `k` and `ldb` multiples of 4.
    /// Either way the tiles in shared memory, and so the loop and the order of every sum, are
    /// the same as for row-major operands.
    pub(crate) unsafe fn gemm<
        const VEC4: bool,
        const R: usize,
        const LA: usize,
        const WN: usize,
        const AHEAD: u32,
        const SKIP_IDLE: bool,
        const A_COLUMNS: bool,
        const B_COLUMNS: bool,
    >(
        GemmArgs { m, n, k, alpha, a, lda, b, ldb, beta, c, ldc }: GemmArgs,
    ) {
        const { assert!(LA * 4 * WN == R, "128 WN threads load a 16 R x 8 tile of A as LA vectors each") };
        const { assert!(AHEAD == 1 || AHEAD == 2, "one or two tiles loaded ahead") };
        const {
            assert!(
                2 * (a_tile(R) + BK * (bn(WN) + 4) * 4) <= smem_bytes(2 * stage(R, WN), WN),
                "two stages with the B tile's rows padded fit the shared memory the epilogue takes"
            )
        };
        // The B tile's rows are 4 floats longer where B is read column-major: the two runs of a
        // column that a warp's lanes store fall 16 banks apart.
        let b_ld = if B_COLUMNS { bn(WN) + 4 } else { bn(WN) };
        let (bm, bn, a_ld, a_tile) = (bm(R), bn(WN), a_ld(R), a_tile(R));
        let stage = a_tile + BK * b_ld * 4;
        let tid = thread_x();
        let (row0, col0) = (block_y() * bm, block_x() * bn);
        let tile = WarpTile::<R, WN>::of(tid);

        // Global loads, each a run of 4 along the operand's lines. A row-major: rows a_row +
        // a_pass i, columns a_k..a_k + 4 (a tile row is 2 runs, so the block's threads cover
        // `threads / 2` rows a pass). A column-major: columns a_k + a_pass i, rows a_row..a_row
        // + 4 (a tile column is `bm / 4` runs, so a pass covers `threads / (bm / 4)` columns).
        // B row-major: row b_k, columns b_col..b_col + 4; B column-major: column b_col, rows
        // b_k..b_k + 4 (a tile column is 2 runs).
        let (a_row, a_k, a_pass) = if A_COLUMNS {
            (tid % (bm / 4) * 4, tid / (bm / 4), threads(WN) / (bm / 4))
        } else {
            (tid / (BK / 4), tid % (BK / 4) * 4, threads(WN) / 2)
        };
        let (b_k, b_col) =
            if B_COLUMNS { (tid % 2 * 4, tid / 2) } else { (tid / (bn / 4), tid % (bn / 4) * 4) };
        // Row-major A: whether each run's row exists (the same for every tile).
        let a_rows_ok: [bool; LA] = core::array::from_fn(|i| row0 + a_row + a_pass * (i as u32) < m);
        let at = |row: u32, col: u32, ld: u32, columns: bool| {
            if columns { offset(col, row, ld) } else { offset(row, col, ld) }
        };
        let mut a_ptr = a.wrapping_add(at(row0 + a_row, a_k, lda, A_COLUMNS));
        let a_next = a_pass as usize * lda as usize;
        let mut b_ptr = b.wrapping_add(at(b_k, col0 + b_col, ldb, B_COLUMNS));
        let (a_step, b_step) = (
            if A_COLUMNS { BK as usize * lda as usize } else { BK as usize },
            if B_COLUMNS { BK as usize } else { BK as usize * ldb as usize },
        );

        // Loads tile `k0` into registers (zeros outside A and B) and moves the pointers on.
        let mut load = |k0: u32| {
            // SAFETY: load4_global admits only elements inside A and B; VEC4's conditions are
            // the host's dispatch (16-byte aligned a and b, leading dimensions and the lengths
            // of the lines read, k or m for A and n or k for B, multiples of 4).
            let staged = unsafe {
                Staged {
                    a: core::array::from_fn(|i| {
                        let ptr = a_ptr.wrapping_add(i * a_next);
                        if A_COLUMNS {
                            let k_ok = k0 + a_k + a_pass * (i as u32) < k;
                            load4_global::<VEC4>(ptr, k_ok, row0 + a_row, m)
                        } else {
                            load4_global::<VEC4>(ptr, a_rows_ok[i], k0 + a_k, k)
                        }
                    }),
                    b: if B_COLUMNS {
                        load4_global::<VEC4>(b_ptr, col0 + b_col < n, k0 + b_k, k)
                    } else {
                        load4_global::<VEC4>(b_ptr, k0 + b_k < k, col0 + b_col, n)
                    },
                }
            };
            a_ptr = a_ptr.wrapping_add(a_step);
            b_ptr = b_ptr.wrapping_add(b_step);
            staged
        };

        let smem = dynamic_shared_f32();
        // SAFETY: the dynamic shared memory base; the launch sizes it (SPEC.smem_bytes).
        let base = unsafe { SharedAddr::of(smem) };
        let a_store = base.offset_bytes((a_k * a_ld + a_row) * 4);
        let b_store = base.offset_bytes(a_tile + (b_k * b_ld + b_col) * 4);
        let store = |stage: u32, s: &Staged<LA>| {
            // SAFETY: 16-byte aligned slots of the stage not being read (see the module doc);
            // each slot has one writer.
            unsafe {
                for (r, v) in s.a.iter().enumerate() {
                    if A_COLUMNS {
                        // A run along a column of A is along a row of the transposed tile.
                        let at = stage + a_pass * r as u32 * a_ld * 4;
                        st_shared_v4_f32(a_store.offset_bytes(at), *v);
                    } else {
                        for (i, &x) in v.0.iter().enumerate() {
                            let at = stage + (i as u32 * a_ld + a_pass * r as u32) * 4;
                            st_shared_f32(a_store.offset_bytes(at), x);
                        }
                    }
                }
                if B_COLUMNS {
                    // A run down a column of B goes down a column of the tile.
                    for (i, &x) in s.b.0.iter().enumerate() {
                        st_shared_f32(b_store.offset_bytes(stage + i as u32 * b_ld * 4), x);
                    }
                } else {
                    st_shared_v4_f32(b_store.offset_bytes(stage), s.b);
                }
            }
        };
        // The fragments of `k = p` of the stage at offset `stage`.
        // SAFETY: a stage written before the last barrier.
        let fragments = |stage: u32, p: u32| unsafe { tile.fragments(base.offset_bytes(stage), p, b_ld) };

        let mut acc = [[0.0f32; 8]; R];
        let staged = load(0);
        store(0, &staged);
        // With two tiles ahead, tile BK's loads start before the first barrier, and each step
        // takes the tile loaded one step earlier and starts the loads of the one after it.
        let mut pending =
            if AHEAD == 2 { load(BK) } else { Staged { a: [F32x4([0.0; 4]); LA], b: F32x4([0.0; 4]) } };
        sync_threads();
        let mut frag = fragments(0, 0);
        // The barrier after each tile's store. Idle warps wait at another instruction than the
        // busy ones, so with SKIP_IDLE it is the unaligned form.
        let tile_barrier = || if SKIP_IDLE { sync_threads_unaligned() } else { sync_threads() };
        // One tile: computes on the stage at `$read` while the global loads of the tile at `$k0`
        // fly (and, two ahead, of the one after; all zeros, and no memory touched, past the last
        // tile), then stores the tile at `$k0` to `$write`. A macro rather than a closure, so
        // that both copies inline with constant offsets. `$busy` (a literal) is false for an
        // idle warp: it keeps the loads, stores and barriers and drops the rest.
        macro_rules! tile_step {
            ($k0:expr, $read:expr, $write:expr, $busy:literal) => {
                let staged =
                    if AHEAD == 2 { core::mem::replace(&mut pending, load($k0 + BK)) } else { load($k0) };
                if $busy {
                    for p in 0..BK {
                        // Register double buffering: the fragments of p + 1 (of the next stage
                        // at p = 7, after the store and the barrier) load while the products of
                        // p run.
                        let next = if p + 1 < BK {
                            fragments($read, p + 1)
                        } else {
                            store($write, &staged);
                            tile_barrier();
                            fragments($write, 0)
                        };
                        outer_product(&mut acc, &frag.0, &frag.1);
                        frag = next;
                    }
                } else {
                    store($write, &staged);
                    tile_barrier();
                }
            };
        }
        // The K loop, for a warp with work ($busy) or an idle one.
        macro_rules! k_loop {
            ($busy:literal) => {
                let mut k0 = BK;
                if VEC4 || AHEAD == 2 {
                    // Two tiles per iteration, so that both stage offsets are constants in the
                    // code: no stage register, no moves of the fragments at the loop's back edge.
                    // With two tiles ahead the pending tile's registers alternate between the
                    // two steps too: a one-tile loop would have to move the tile just loaded
                    // into the pending one's registers at its back edge, and that move waits
                    // for the loads, which leaves them a single tile of work to hide behind.
                    loop {
                        tile_step!(k0, 0, stage, $busy);
                        if k0 >= k {
                            break;
                        }
                        tile_step!(k0 + BK, stage, 0, $busy);
                        if k0 + BK >= k {
                            break;
                        }
                        k0 += 2 * BK;
                    }
                } else {
                    // One tile per iteration, the stage switched by XOR: with a 128 x 128
                    // tile, the scalar loads' 8 guards leave no room for the two-tile loop
                    // within 128 registers (ptxas spills it).
                    let mut read = 0;
                    loop {
                        tile_step!(k0, read, read ^ stage, $busy);
                        if k0 >= k {
                            break;
                        }
                        read ^= stage;
                        k0 += BK;
                    }
                }
            };
        }
        // Uniform across the warp: its rows are `warp_m(R)` from its first.
        let idle = SKIP_IDLE && row0 + tile.row / warp_m(R) * warp_m(R) >= m;
        if idle {
            k_loop!(false);
        } else {
            k_loop!(true);
        }

        // Every warp is past its last fragment load: the tiles' memory becomes C's staging.
        sync_threads();
        // SAFETY: the staging area is this block's shared memory (SPEC.smem_bytes covers it)
        // and no longer read as tiles; C is valid for m x n with ldc.
        unsafe { tile.store_c(&acc, base, (row0, col0), (m, n), alpha, beta, c, ldc) };
    }

    gemm_entry! { ladder:
        /// `C = alpha * A * B + beta * C` with scalar global loads: any pointer, any `ld`.
        sgemm_double_buffered => gemm::<false, 8, 1, { WARPS_N as usize }, 1, false, false, false>
    }

    gemm_entry! { ladder:
        /// `C = alpha * A * B + beta * C` with 16-byte global loads; the host launches it only
        /// when `a` and `b` are 16-byte aligned and `lda`, `ldb`, `k`, `n` multiples of 4.
        sgemm_double_buffered_vec4 => gemm::<true, 8, 1, { WARPS_N as usize }, 1, false, false, false>
    }
}
