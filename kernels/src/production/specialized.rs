//! Step 15, warp specialization: [`warpgroup`]'s 3xTF32 tile loop with the work divided by
//! kind instead of shared by every thread, and `A` given to `wgmma` from registers.
//!
//! Why: in `warpgroup` all eight warps copy, split, multiply and add, with two block-wide
//! barriers per tile between those phases; and every operand crosses shared memory several
//! times per tile (copied in, read and written by the split, read by `wgmma` as split
//! halves), more traffic than the shared-memory pipe carries in the time of the tile's tensor
//! work. Here:
//! - two *producer* warpgroups copy raw tiles of `A` and `B` with `cp.async` and split the `B`
//!   tile into `B_hi` and `B_lo`;
//! - two *consumer* warpgroups (64 rows of the tile each) read their rows of the raw `A` tile
//!   straight into registers, split them there, and run `wgmma` with `A` from registers, so
//!   `A`'s split halves never touch shared memory;
//! - the roles hand tiles to each other through `mbarrier`s, so no thread waits at a
//!   block-wide barrier inside the loop, and `setmaxnreg` moves registers from the producers
//!   (which need few) to the consumers (which hold two sets of accumulators).
//!
//! The protocol: tile `t` is copied into raw stage `t % 4` and its `B` split into split set
//! `t % 2`. Two `mbarrier`s per split set `s`:
//! - `full[s]`: one arrival per producer thread, after its copies of the tile landed and it
//!   wrote and published (`fence.proxy.async`) its part of the split; consumers wait on it.
//! - `empty[s]`: one arrival per consumer thread, after its products of the set completed (so
//!   it is also done with the raw stage); the producers wait on it before they split into the
//!   set again and before they refill that tile's raw stage with the tile four later.
//!
//! Tile `t` is phase `t / 2` of its set's barriers: consumers wait on `full[t % 2]` with parity
//! `(t / 2) % 2`, producers on `empty[t % 2]` with the other parity (a fresh barrier passes it
//! at once, for the first two tiles). Producers copy two tiles ahead and meet only each other,
//! at a named barrier, once per tile.
//!
//! The order along `K` inside a 32-deep tile is permuted, for `A` and `B` alike, so every
//! product still pairs `A[i][k]` with `B[k][j]`: the values a thread gives to `wgmma` in its
//! four 8-deep steps are 8 consecutive columns of its rows of `A`, two 16-byte loads per row.
//! Logical position `kk` (0..8) of step `s` is physical column `8 (kk % 4) + 2 s + kk / 4` of
//! the tile.
//!
//! The exactness rules are `warpgroup`'s: every value split is checked against the
//! [window](crate::production::window) (`A` by the consumers, `B` by the producers). At the
//! end the producers report theirs through a word of shared memory and a named barrier they
//! only arrive at, and leave; the consumers vote among themselves, and when any value was
//! outside the window they multiply the tile again with `warpgroup`'s scaled loop (as a team
//! of their own, on a named barrier). The epilogue is `warpgroup`'s, given the shared memory
//! the loop no longer needs, through which it stages `C` where `C`'s rows do not start on
//! 32-byte sectors.
//!
//! Narrow tiles: where fewer than 128 columns of a tile lie inside `C` (the last tile of a row
//! whose `n` is not a multiple of 128, every tile of a `C` at most 64 wide), the consumers
//! multiply only the 64 or 32 columns that cover them (`wgmma` `m64n64k8` or `m64n32k8`,
//! [`multiplied_width`], one instantiation of their part each); a consumer warpgroup whose 64
//! rows all lie past `m` takes part in the handoffs without multiplying.
//!
//! Two entries: the producers copy 16 bytes at a time where the operands allow it (aligned,
//! rows a multiple of 4 floats long), else 4 bytes at a time
//! ([`RawCopy`](crate::production::warpgroup)); the rest is the same code. The host copies
//! operands into padded buffers for the 16-byte entry only where that costs less than the
//! 4-byte loop (`SPEC.padding`).
//!
//! Block: 512 threads, 128 x 128 of `C`; one block per SM.
//!
//! Measurements, profiles and the attempts that did not help: `docs/performance-notes.md`.

use crate::infra::launch::{KernelSpec, Padding};
use crate::production::warpgroup::{self, BK, BM, BN, SMEM_BYTES, STAGE, STAGED_BYTES, THREADS};

/// Threads of the producer warpgroups (thread indices `0..PRODUCERS`): `warpgroup`'s team of
/// two, whose copies ([`RawCopy`](crate::production::warpgroup)) they run.
const PRODUCERS: u32 = THREADS;
/// Threads of the two consumer warpgroups (the rest).
const CONSUMERS: u32 = 256;
/// Raw stages (a `warpgroup` stage each: `A` rows padded to 36 floats, `B` rows to 136).
const RAW_STAGES: u32 = 4;
/// Bytes of one split half, `B_hi` or `B_lo` (32 x 128 values), and of a split set (both).
const B_HALF: u32 = BK * BN * 4;
const SET: u32 = 2 * B_HALF;
/// Byte offset of the raw stages, after two split sets.
const RAW: u32 = 2 * SET;
/// Byte offset of the `mbarrier`s (`full[0..2]`, `empty[0..2]`, then a word for the producers'
/// window check), after both this loop's shared memory and `warpgroup`'s (the scaled loop's,
/// which reuses the same bytes).
const BARRIERS: u32 = {
    let tile_loop = RAW + RAW_STAGES * STAGE;
    if tile_loop > SMEM_BYTES { tile_loop } else { SMEM_BYTES }
};
/// Bytes from [`BARRIERS`] on: four 8-byte `mbarrier`s and the producers' word.
const HANDOFF_BYTES: u32 = 5 * 8;

/// Launch configuration of [`sgemm_specialized`](self): `warpgroup`'s (tile, one block per SM,
/// K slices, sm_90a) with its own block and shared memory, and two entries: 4-byte copies
/// (any operand) and 16-byte copies.
pub const SPEC: KernelSpec = KernelSpec {
    name: "specialized",
    entry: "sgemm_specialized",
    vec4_entry: Some("sgemm_specialized_vec4"),
    // Where the padding copies' traffic and the 4-byte copies' slower loop cost the same (the
    // measurements behind it: docs/performance-notes.md, "Shapes nobody listed").
    padding: Padding::Above(450),
    summary: "warpgroup's 3xTF32 tile, warp-specialized: producers copy and split B, consumers take A into registers",
    block: (PRODUCERS + CONSUMERS, 1),
    smem_bytes: BARRIERS + HANDOFF_BYTES,
    ..warpgroup::SPEC
};

const _: () = assert!(
    BARRIERS.is_multiple_of(8)
        && CONSUMERS == THREADS
        && BK == 32
        && BM == 128
        && BN == 128
        && STAGED_BYTES <= BARRIERS,
    "8-byte aligned mbarriers; the consumers are warpgroup's team for the scaled loop and the epilogue's staging; the mappings below"
);

/// The columns of a tile that the consumers multiply (`wgmma` `n`) when `columns` of it lie
/// inside `C`: the fewest of 32, 64 and 128 that cover them. The last tile of a row whose `n`
/// is not a multiple of 128, and every tile of a `C` at most 64 wide, takes fewer tensor
/// instructions than a whole tile. (Outside the device code so that the host's cost model
/// follows the same rule.)
#[inline(always)]
pub const fn multiplied_width(columns: u32) -> u32 {
    match columns {
        ..=32 => 32,
        33..=64 => 64,
        _ => BN,
    }
}

#[cfg(all(target_arch = "nvptx64", target_feature = "sm_90a"))]
mod device_code {
    use super::{B_HALF, BARRIERS, CONSUMERS, PRODUCERS, RAW, RAW_STAGES, SET, multiplied_width};
    use crate::infra::device::*;
    use crate::infra::ptx::{
        F32x4, MatrixDescriptor, SharedAddr, bar_arrive_named, bar_red_or_named, bar_sync_named,
        barrier_sync_unaligned, cp_async_wait_group, fence_proxy_async_shared, ld_shared_f32,
        ld_shared_v4_f32, mbarrier_arrive, mbarrier_init, mbarrier_wait, red_shared_or, setmaxnreg_dec,
        setmaxnreg_inc, st_shared_f32, st_shared_v4_f32, vote_all, wgmma_commit_group, wgmma_fence,
        wgmma_m64k8_tf32_rs, wgmma_m64k8_tf32_rs_into, wgmma_wait_group,
    };
    use crate::production::warpgroup::device_code::{
        K_STRIDE, MN_STRIDE, RawCopy, core_offset, multiply, split4, store_tile, tile_origin,
    };
    use crate::production::warpgroup::{A_LD, A_RAW, B_LD, BK, BM, BN, STAGE};
    use crate::production::window::WindowCheck;

    /// Registers per thread of the producers after they give the rest to the consumers, and of
    /// the consumers after they took them: 256 * 40 + 256 * 216 = 65536, the 128 per thread
    /// of 512 threads that the launch bound gives the block (the pool they trade in).
    const PRODUCER_REGS: u32 = 40;
    const CONSUMER_REGS: u32 = 216;
    const _: () = assert!(
        PRODUCERS * PRODUCER_REGS + CONSUMERS * CONSUMER_REGS
            <= (65536 / (PRODUCERS + CONSUMERS)) / 8 * 8 * (PRODUCERS + CONSUMERS),
        "setmaxnreg.inc would wait forever for registers the block does not have"
    );

    /// Producer warpgroups.
    const PRODUCER_GROUPS: u32 = PRODUCERS / 128;

    /// The named barrier of the producers.
    const PRODUCER_BAR: u32 = 1;
    /// The named barrier of the consumers' scaled loop (and their vote before it).
    const SCALED_BAR: u32 = 2;
    /// The named barrier where the producers report that they are done (`bar.arrive`) and the
    /// consumers wait for that (`bar.sync`).
    const DONE_BAR: u32 = 3;

    /// The handoff barriers of split set `s`.
    #[derive(Clone, Copy)]
    struct Handoff {
        base: SharedAddr,
    }

    impl Handoff {
        fn full(self, s: u32) -> SharedAddr {
            self.base.offset_bytes(8 * s)
        }
        fn empty(self, s: u32) -> SharedAddr {
            self.base.offset_bytes(16 + 8 * s)
        }
        /// A word that is not 0 when a producer saw a `B` value outside the window.
        fn outside(self) -> SharedAddr {
            self.base.offset_bytes(32)
        }
    }

    /// Byte offset of the raw stage of tile `t`.
    #[inline(always)]
    fn raw_stage(t: u32) -> u32 {
        RAW + t % RAW_STAGES * STAGE
    }

    /// The columns of this block's tile that the consumers multiply ([`multiplied_width`]).
    #[inline(always)]
    fn tile_width(args: &GemmArgs) -> u32 {
        multiplied_width(args.n - tile_origin().1)
    }

    /// The producers: copy the raw tiles of this block's `A` rows and `B` columns two ahead,
    /// split each `B` tile into split set `t % 2` once the consumers have released it, and
    /// hand it over. Returns whether any `B` value this thread split was outside the window.
    ///
    /// # Safety
    /// The GEMM contract; thread `ptid` of the producers, all of which call it.
    #[inline(always)]
    unsafe fn produce<const VEC4: bool>(
        args: &GemmArgs,
        base: SharedAddr,
        handoff: Handoff,
        ptid: u32,
    ) -> bool {
        let GemmArgs { n, k, .. } = *args;
        let col0 = tile_origin().1;
        let mut copies = RawCopy::<VEC4>::new(args, base, ptid);

        // The split of a raw B tile: thread ptid takes column r of the tile and the pieces c =
        // ptid / 128 + 2 j along K. Piece c of a column holds logical positions 4 (c % 2)..+4
        // of step c / 2, which are physical rows c + 8 i of the raw tile (see the module
        // docs). 32 consecutive lanes read 32 consecutive floats of a row, and 8 of them write
        // one core matrix's 128 contiguous bytes: no bank conflicts. Each value goes to the
        // window check, which counts only for a column inside C (columns past n may hold
        // anything).
        let r = ptid % BN;
        let mut b_window = WindowCheck::new();
        let b_live = col0 + r < n;
        let mut split = #[inline(always)]
        |stage: u32, set: u32| {
            let to = base.offset_bytes(set);
            for j in 0..BK / 4 / PRODUCER_GROUPS {
                let c = ptid / BN + PRODUCER_GROUPS * j;
                let at = core_offset(r, c);
                // SAFETY: the raw stage's copies completed before the producers' barrier; the
                // split set was released by the consumers (`empty`).
                unsafe {
                    let b_at = |i: u32| base.offset_bytes(stage + A_RAW + ((c + 8 * i) * B_LD + r) * 4);
                    let x = F32x4(core::array::from_fn(|i| ld_shared_f32(b_at(i as u32))));
                    for &v in &x.0 {
                        b_window.see(v);
                    }
                    let (hi, lo) = split4(x);
                    st_shared_v4_f32(to.offset_bytes(at), hi);
                    st_shared_v4_f32(to.offset_bytes(B_HALF + at), lo);
                }
            }
        };

        // SAFETY (every copy): a raw stage is refilled only after the consumers released its
        // tile (`empty`) and every producer split it (the producers' barrier since).
        unsafe {
            copies.tile(raw_stage(0), 0);
            copies.tile(raw_stage(1), BK);
        }
        for t in 0..k.div_ceil(BK) {
            let s = t % 2;
            // This thread's copies of tile t have landed (only tile t + 1's may be pending);
            // after the barrier, every producer's have.
            // SAFETY: waiting has no preconditions; the four producer warps reach the barrier
            // together.
            unsafe {
                cp_async_wait_group::<1>();
                barrier_sync_unaligned::<PRODUCER_BAR, PRODUCERS>();
            }
            // The consumers are done with tile t - 2: its split set and its raw stage, where
            // tile t + 2 goes (zero-filled past K).
            // SAFETY: initialized before the block-wide barrier that preceded the loop.
            unsafe { mbarrier_wait(handoff.empty(s), (t / 2 % 2) ^ 1) };
            unsafe { copies.tile(raw_stage(t + 2), (t + 2) * BK) };
            split(raw_stage(t), s * SET);
            fence_proxy_async_shared();
            // SAFETY: one arrival per producer thread per phase, the count it was made with.
            unsafe { mbarrier_arrive(handoff.full(s)) };
        }
        // Drain the (zero-filled) copies still in flight.
        // SAFETY: as above.
        unsafe { cp_async_wait_group::<0>() };
        !(b_window.holds() || !b_live)
    }

    /// The consumers: as the producers hand tiles over, read this thread's rows of the raw
    /// `A` tile, split them in registers, and multiply them by the first `COLS` columns
    /// ([`tile_width`]) of the split `B` tile into `acc` (the fragment of thread `ctid` of the
    /// consumer warpgroups, `warpgroup`'s layout, of which the first `COLS / 2` values
    /// change); release each tile once its products have completed. Returns whether any `A`
    /// value was outside the window. A warpgroup whose rows of the tile all lie past the last
    /// row of `C` has nothing to multiply (its rows of `A` are zero-filled): it only takes part
    /// in the handoffs.
    ///
    /// # Safety
    /// The GEMM contract; thread `ctid` of the 256 consumer threads, all of which call it.
    #[inline(always)]
    unsafe fn consume<const COLS: u32>(
        args: &GemmArgs,
        base: SharedAddr,
        handoff: Handoff,
        ctid: u32,
        acc: &mut [f32; 64],
    ) -> bool {
        // Warpgroup w multiplies rows 64 w..64 w + 64 of the tile; this thread's rows of A
        // are `row` and `row + 8`, its columns (physical) 8 t4..8 t4 + 8.
        let (group, warp, lane) = (ctid / 128, ctid / 32 % 4, ctid % 32);
        let (g, t4) = (lane / 4, lane % 4);
        let row = 64 * group + 16 * warp + g;
        let a_at = base.offset_bytes((row * A_LD + 8 * t4) * 4);
        let b_desc = MatrixDescriptor::new(base, K_STRIDE, MN_STRIDE);
        // Voted, so that the compiler sees a test uniform in the warp: on a test of the thread
        // index alone, ptxas treats the loop as divergent (YIELD and WARPSYNC in it).
        // SAFETY: the whole warp votes (the contract).
        let idle = unsafe { vote_all(tile_origin().0 + 64 * group >= args.m) };
        let mut a_window = WindowCheck::new();
        let mut step = [0.0f32; 64];
        for t in 0..args.k.div_ceil(BK) {
            let s = t % 2;
            // SAFETY: initialized before the loop; the phase completes after every producer's
            // copies of tile t landed and its part of the split was published (proxy fence,
            // then its release arrival).
            unsafe { mbarrier_wait(handoff.full(s), t / 2 % 2) };
            if idle {
                // SAFETY: one arrival per consumer thread per phase of `empty`, as below.
                unsafe { mbarrier_arrive(handoff.empty(s)) };
                continue;
            }
            // Rows row and row + 8, physical columns 8 t4..8 t4 + 8: two 16-byte loads each,
            // 8 lanes of a load phase in 8 distinct groups of 4 banks (rows 144 bytes apart).
            // SAFETY: inside the raw stage, published by `full`.
            let x: [[F32x4; 2]; 2] = core::array::from_fn(|h| {
                let at = a_at.offset_bytes(raw_stage(t) + h as u32 * 8 * A_LD * 4);
                unsafe { [ld_shared_v4_f32(at), ld_shared_v4_f32(at.offset_bytes(16))] }
            });
            // Plain loops: an iterator chain over `x` put the fragment in local memory.
            for row in &x {
                for v in row {
                    for &v in &v.0 {
                        a_window.see(v);
                    }
                }
            }
            // Step q's fragment, split: logical positions t4 and t4 + 4 are physical columns
            // 8 t4 + 2 q and 8 t4 + 2 q + 1.
            let fragment = #[inline(always)]
            |q: usize| -> ([f32; 4], [f32; 4]) {
                let (v, e) = (q / 2, 2 * (q % 2));
                let (hi, lo) =
                    split4(F32x4([x[0][v].0[e], x[1][v].0[e], x[0][v].0[e + 1], x[1][v].0[e + 1]]));
                (hi.0, lo.0)
            };
            let steps = [fragment(0), fragment(1), fragment(2), fragment(3)];
            // Starts step q's three products (pieces 2 q and 2 q + 1 along K, K_STRIDE apart).
            let products = #[inline(always)]
            |step: &mut [f32; 64], q: usize| {
                let at = |half: u32| b_desc.offset_bytes(s * SET + half + 2 * q as u32 * K_STRIDE);
                let (a_hi, a_lo) = &steps[q];
                // SAFETY: the whole warpgroup runs this together, after `wgmma_fence`; the split
                // set was published by `full`.
                unsafe {
                    if q == 0 {
                        wgmma_m64k8_tf32_rs_into::<COLS>(step, a_lo, at(0));
                    } else {
                        wgmma_m64k8_tf32_rs::<COLS>(step, a_lo, at(0));
                    }
                    wgmma_m64k8_tf32_rs::<COLS>(step, a_hi, at(B_HALF));
                    wgmma_m64k8_tf32_rs::<COLS>(step, a_hi, at(0));
                }
            };
            // SAFETY: the whole warpgroup multiplies and waits together; one arrival per
            // consumer thread per phase of `empty`, after its products of the set completed.
            unsafe {
                wgmma_fence();
                products(&mut step, 0);
                products(&mut step, 1);
                products(&mut step, 2);
                products(&mut step, 3);
                wgmma_commit_group();
                wgmma_wait_group::<0>(&mut step);
                mbarrier_arrive(handoff.empty(s));
            }
            // An index loop: `zip(..).take(..)` over the arrays put them in local memory.
            for i in 0..COLS as usize / 2 {
                acc[i] += step[i];
            }
        }
        !a_window.holds()
    }

    /// The GEMM of this block's tile: the producers' and the consumers' loops; when a value
    /// was outside the window, the consumers' scaled loop; then the consumers' epilogue. The
    /// tiles are copied 16 bytes at a time when `VEC4` ([`RawCopy`]), else 4.
    ///
    /// # Safety
    /// The GEMM contract (see [`gemm_entry!`](crate::infra::device)); with `VEC4`, `RawCopy`'s
    /// 16-byte conditions.
    #[inline(always)]
    unsafe fn gemm<const VEC4: bool>(args: GemmArgs) {
        let tid = thread_x();
        let smem = dynamic_shared_f32();
        // SAFETY: the dynamic shared memory base; the launch sizes it (SPEC.smem_bytes).
        let base = unsafe { SharedAddr::of(smem) };
        let handoff = Handoff { base: base.offset_bytes(BARRIERS) };
        if tid == 0 {
            // SAFETY: 8-byte aligned inside the allocation; used after the barrier below.
            unsafe {
                for s in 0..2 {
                    mbarrier_init(handoff.full(s), PRODUCERS);
                    mbarrier_init(handoff.empty(s), CONSUMERS);
                }
                st_shared_f32(handoff.outside(), 0.0);
            }
        }
        sync_threads();
        // Each role runs to its end in its own branch, since `ptxas` allocates each branch
        // within the registers its `setmaxnreg` gives it. The producers report their window
        // check through `outside` and a named barrier they only arrive at, and leave; the
        // consumers vote among themselves and read the producers' report, so the decision is
        // the same in every consumer.
        // SAFETY: the contract; each role's threads all run their part.
        unsafe {
            if tid < PRODUCERS {
                setmaxnreg_dec::<PRODUCER_REGS>();
                if produce::<VEC4>(&args, base, handoff, tid) {
                    red_shared_or(handoff.outside(), 1);
                }
                // The report and the drained copies happen before the consumers pass.
                bar_arrive_named::<DONE_BAR, { PRODUCERS + CONSUMERS }>();
            } else {
                setmaxnreg_inc::<CONSUMER_REGS>();
                let ctid = tid - PRODUCERS;
                match tile_width(&args) {
                    32 => consumers::<VEC4, 32>(&args, base, handoff, ctid),
                    64 => consumers::<VEC4, 64>(&args, base, handoff, ctid),
                    _ => consumers::<VEC4, BN>(&args, base, handoff, ctid),
                }
            }
        }
    }

    /// The consumers' part of [`gemm`] on a tile `COLS` wide ([`tile_width`]): [`consume`],
    /// the scaled loop when a value was outside the window, the epilogue.
    ///
    /// # Safety
    /// As [`consume`], after the consumers' `setmaxnreg`, with the producers running
    /// [`produce`].
    #[inline(always)]
    unsafe fn consumers<const VEC4: bool, const COLS: u32>(
        args: &GemmArgs,
        base: SharedAddr,
        handoff: Handoff,
        ctid: u32,
    ) {
        // SAFETY: the contract; the 256 consumers run every call and barrier below together.
        unsafe {
            let mut acc = [0.0f32; 64];
            let outside = consume::<COLS>(args, base, handoff, ctid, &mut acc);
            bar_sync_named::<DONE_BAR, { PRODUCERS + CONSUMERS }>();
            let outside = outside || ld_shared_f32(handoff.outside()).to_bits() != 0;
            if bar_red_or_named::<SCALED_BAR, CONSUMERS>(outside) {
                // The consumers are warpgroup's team of two warpgroups, on a barrier of their
                // own; the producers no longer touch shared memory. The scaled loop multiplies
                // all 128 columns.
                multiply::<true, SCALED_BAR, VEC4>(args, &mut acc, ctid);
                // Every consumer's last products have read shared memory.
                bar_sync_named::<SCALED_BAR, CONSUMERS>();
            }
            // Shared memory is free (the producers left after their copies landed, every
            // consumer's products completed), so the epilogue may stage C there. Its address is
            // derived from the barriers' (live through the loop anyway) so that `base` is not
            // held across the loop, where the consumers' registers peak.
            let staging = SharedAddr(handoff.base.opaque().0 - BARRIERS);
            store_tile::<COLS>(args, &acc, ctid, Some(staging));
        }
    }

    gemm_entry! { production:
        /// `C = alpha * A * B + beta * C` for one batch member (or K slice) per `blockIdx.z`,
        /// warp-specialized `wgmma`, the tiles copied 4 bytes at a time: any pointer, any `ld`.
        sgemm_specialized => gemm::<false>
    }

    gemm_entry! { production:
        /// As `sgemm_specialized` with 16-byte copies: the host launches it only when `a` and
        /// `b` are 16-byte aligned and `lda`, `ldb`, `k` (the slice depth) and `n` multiples
        /// of 4.
        sgemm_specialized_vec4 => gemm::<true>
    }
}
