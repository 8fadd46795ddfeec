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
//! Several members per block: a block computes the same tile of `C` in one or more members of
//! a batch in turn (the host picks how many, at most `MOST_MEMBERS`; see
//! [`params`](crate::infra::params#batches)). The tiles `t` below count the block's `K` tiles
//! over all its members, so the pipeline runs on from one member into the next: the producers
//! copy and split the next member's first tiles while the consumers write the last one's `C`.
//! Batches of short products, a few `K` tiles each, would otherwise pay a pipeline's start
//! and an epilogue with the tensor cores idle for every tile.
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
//! [window](crate::production::window) (`A` by the consumers, `B` by the producers). The
//! producers report theirs through a word of shared memory: with a member's last tile
//! (published by that tile's `full`), or in a block of one member once they are done; the
//! consumers vote among themselves. A member with a value outside
//! the window is multiplied again with `warpgroup`'s scaled loop (the consumers as a team of
//! their own, on a named barrier), which needs all of shared memory: so those members wait
//! until the producers, done with every member, have left (a named barrier they only arrive
//! at). The epilogue is `warpgroup`'s: from registers while the producers still fill shared
//! memory, and once they have left (the block's last member, the scaled ones) through the
//! shared memory the loop no longer needs, staging `C` where its rows do not start on 32-byte
//! sectors.
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
/// Byte offset of the `mbarrier`s (`full[0..2]`, `empty[0..2]`, then two words for the
/// producers' window checks), after both this loop's shared memory and `warpgroup`'s (the scaled loop's,
/// which reuses the same bytes).
const BARRIERS: u32 = {
    let tile_loop = RAW + RAW_STAGES * STAGE;
    if tile_loop > SMEM_BYTES { tile_loop } else { SMEM_BYTES }
};
/// Bytes from [`BARRIERS`] on: four 8-byte `mbarrier`s and the producers' two report words.
const HANDOFF_BYTES: u32 = 5 * 8;

/// Launch configuration of [`sgemm_specialized`](self): `warpgroup`'s (tile, one block per SM,
/// K slices, sm_90a) with its own block and shared memory, and two entries: 4-byte copies
/// (any operand) and 16-byte copies.
pub const SPEC: KernelSpec = KernelSpec {
    name: "specialized",
    entry: "sgemm_specialized",
    vec4_entry: Some("sgemm_specialized_vec4"),
    // Where the padding copies' traffic and the 4-byte copies' slower loop cost the same, with
    // no launch term (the measurements behind both: docs/performance-notes.md, "Shapes nobody
    // listed" and "Padded copies for the strict tile").
    padding: Padding::Above { fixed: 0, per_copied: 450 },
    summary: "warpgroup's 3xTF32 tile, warp-specialized: producers copy and split B, consumers take A into registers",
    block: (PRODUCERS + CONSUMERS, 1),
    smem_bytes: BARRIERS + HANDOFF_BYTES,
    members_per_block: MOST_MEMBERS,
    ..warpgroup::SPEC
};

/// The most batch members a block computes in turn: the consumers keep one bit per member
/// for those that need the scaled loop at the end (a `u64`).
const MOST_MEMBERS: u32 = 64;

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
    use super::{
        B_HALF, BARRIERS, CONSUMERS, MOST_MEMBERS, PRODUCERS, RAW, RAW_STAGES, SET, multiplied_width,
    };
    use crate::infra::device::*;
    use crate::infra::params::GemmParams;
    use crate::infra::ptx::{
        F32x4, MatrixDescriptor, SharedAddr, bar_arrive_named, bar_red_or_named, bar_sync_named,
        barrier_sync_unaligned, cp_async_wait_group, fence_proxy_async_shared, ld_shared_f32,
        ld_shared_v4_f32, mbarrier_arrive, mbarrier_init, mbarrier_wait, opaque_u64, red_shared_or,
        setmaxnreg_dec, setmaxnreg_inc, st_shared_f32, st_shared_v4_f32, vote_all, wgmma_commit_group,
        wgmma_fence, wgmma_m64k8_tf32_rs, wgmma_m64k8_tf32_rs_into, wgmma_wait_group,
    };
    use crate::production::warpgroup::device_code::{
        K_STRIDE, MN_STRIDE, RawCopy, core_offset, multiply, split4, store_tile, tile_origin,
    };
    use crate::production::warpgroup::{A_LD, A_RAW, B_LD, BK, BM, BN, STAGE};
    use crate::production::window::WindowCheck;

    /// The kernel's parameters: the batch and the block's members in it.
    type Params = GemmParams<*const f32, *mut f32>;

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
        /// The start of shared memory, for an epilogue that stages `C` there once the loop no
        /// longer needs it. Derived from the barriers' address (live through the loop anyway)
        /// so that the base is not held across the loop, where the consumers' registers peak.
        fn staging(self) -> SharedAddr {
            SharedAddr(self.base.opaque().0 - BARRIERS)
        }
        /// The word where the producers report member `j` of the block (counting from 0): it
        /// holds `j + 1` when they saw a `B` value of it outside the window. Two words, used by
        /// members in turn, so a report never needs clearing.
        fn outside(self, j: u32) -> SharedAddr {
            self.base.offset_bytes(32 + 4 * (j % 2))
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
    /// through the block's members in turn (the copies run on into the next member's first
    /// tiles while the consumers finish one), split each `B` tile into split set `g % 2` (`g`
    /// counting the block's tiles over all its members) once the consumers have released it,
    /// and hand it over. They report whether any `B` value of a member was outside the window
    /// ([`Handoff::outside`]): with `SEVERAL`, with the member's last tile, else once all its
    /// tiles are split (the consumers of a block of one member read it after the producers
    /// have left).
    ///
    /// # Safety
    /// The GEMM contract for every member of the block; thread `ptid` of the producers, all of
    /// which call it.
    #[inline(always)]
    unsafe fn produce<const VEC4: bool, const SEVERAL: bool>(
        params: &Params,
        base: SharedAddr,
        handoff: Handoff,
        ptid: u32,
    ) {
        let members = if SEVERAL { params.members_of_block() } else { 1 };
        let GemmArgs { n, k, .. } = params.member_of_block(0);
        let tiles = k.div_ceil(BK);
        let col0 = tile_origin().1;
        let mut copies = RawCopy::<VEC4>::new(&params.member_of_block(0), base, ptid);
        // The next tile to copy: tile `next_tile` of the block's member `next_member` (tiles
        // past the last member's `K` are zero-filled, and nobody reads them).
        let (mut next_member, mut next_tile) = (0, 0);
        let member_steps = (params.a_step * u64::from(grid_z()), params.b_step * u64::from(grid_z()));
        // SAFETY (every call): a raw stage is refilled only after the consumers released its
        // tile (`empty`) and every producer split it (the producers' barrier since).
        let mut copy_next = #[inline(always)]
        |stage: u32| unsafe {
            copies.tile(stage, next_tile * BK);
            next_tile += 1;
            if next_tile == tiles && next_member + 1 < members {
                copies.next_member(tiles, member_steps.0 as usize, member_steps.1 as usize);
                (next_member, next_tile) = (next_member + 1, 0);
            }
        };

        // The split of a raw B tile: thread ptid takes column r of the tile and the pieces c =
        // ptid / 128 + 2 j along K. Piece c of a column holds logical positions 4 (c % 2)..+4
        // of step c / 2, which are physical rows c + 8 i of the raw tile (see the module
        // docs). 32 consecutive lanes read 32 consecutive floats of a row, and 8 of them write
        // one core matrix's 128 contiguous bytes: no bank conflicts. Each value goes to the
        // window check, which counts only for a column inside C (columns past n may hold
        // anything).
        let r = ptid % BN;
        let b_live = col0 + r < n;
        let split = #[inline(always)]
        |stage: u32, set: u32, b_window: &mut WindowCheck| {
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

        copy_next(raw_stage(0));
        copy_next(raw_stage(1));
        let mut g = 0u32;
        for j in 0..members {
            let mut b_window = WindowCheck::new();
            for t in 0..tiles {
                let s = g % 2;
                // This thread's copies of tile g have landed (only tile g + 1's may be
                // pending); after the barrier, every producer's have.
                // SAFETY: waiting has no preconditions; the four producer warps reach the
                // barrier together.
                unsafe {
                    cp_async_wait_group::<1>();
                    barrier_sync_unaligned::<PRODUCER_BAR, PRODUCERS>();
                }
                // The consumers are done with tile g - 2: its split set and its raw stage,
                // where tile g + 2 goes.
                // SAFETY: initialized before the block-wide barrier that preceded the loop.
                unsafe { mbarrier_wait(handoff.empty(s), (g / 2 % 2) ^ 1) };
                copy_next(raw_stage(g + 2));
                split(raw_stage(g), s * SET, &mut b_window);
                fence_proxy_async_shared();
                if SEVERAL && t + 1 == tiles && b_live && !b_window.holds() {
                    // SAFETY: inside the handoff words; read by the consumers only after the
                    // arrival below completes this phase.
                    unsafe { st_shared_f32(handoff.outside(j), f32::from_bits(j + 1)) };
                }
                // SAFETY: one arrival per producer thread per phase, the count it was made
                // with; it releases the split and the report above to the consumers.
                unsafe { mbarrier_arrive(handoff.full(s)) };
                g = g.wrapping_add(1);
            }
            if !SEVERAL && b_live && !b_window.holds() {
                // SAFETY: inside the handoff words; a block of one member reads them after the
                // producers have left (an atomic, like every producer's that reports).
                unsafe { red_shared_or(handoff.outside(0), 1) };
            }
        }
        // Drain the (zero-filled) copies still in flight.
        // SAFETY: as above.
        unsafe { cp_async_wait_group::<0>() };
    }

    /// The consumers' part of one member: as the producers hand its tiles over (tile `g` of
    /// the block's count, which this advances), read this thread's rows of the raw `A` tile,
    /// split them in registers, and multiply them by the first `COLS` columns
    /// ([`tile_width`]) of the split `B` tile into `acc` (the fragment of thread `ctid` of the
    /// consumer warpgroups, `warpgroup`'s layout, of which the first `COLS / 2` values are
    /// the product); release each tile once its products have completed. Returns whether any
    /// value of the member's `A` rows this thread split, or with `SEVERAL` of its `B` columns
    /// the producers split (their report for member `j` of the block), was outside the window.
    /// A warpgroup
    /// whose rows of the tile all lie past the last row of `C` has nothing to multiply (its
    /// rows of `A` are zero-filled): it only takes part in the handoffs.
    ///
    /// # Safety
    /// The GEMM contract; thread `ctid` of the 256 consumer threads, all of which call it, for
    /// the block's members in order.
    #[inline(always)]
    unsafe fn consume<const COLS: u32, const SEVERAL: bool>(
        args: &GemmArgs,
        base: SharedAddr,
        handoff: Handoff,
        ctid: u32,
        (j, g): (u32, &mut u32),
        acc: &mut [f32; 64],
    ) -> bool {
        // Warpgroup w multiplies rows 64 w..64 w + 64 of the tile; this thread's rows of A
        // are `row` and `row + 8`, its columns (physical) 8 t4..8 t4 + 8.
        let (group, warp, lane) = (ctid / 128, ctid / 32 % 4, ctid % 32);
        let (g4, t4) = (lane / 4, lane % 4);
        let row = 64 * group + 16 * warp + g4;
        let a_at = base.offset_bytes((row * A_LD + 8 * t4) * 4);
        let b_desc = MatrixDescriptor::new(base, K_STRIDE, MN_STRIDE);
        // Voted, so that the compiler sees a test uniform in the warp: on a test of the thread
        // index alone, ptxas treats the loop as divergent (YIELD and WARPSYNC in it).
        // SAFETY: the whole warp votes (the contract).
        let idle = unsafe { vote_all(tile_origin().0 + 64 * group >= args.m) };
        let mut a_window = WindowCheck::new();
        let mut b_outside = false;
        *acc = [0.0; 64];
        let mut step = [0.0f32; 64];
        let tiles = args.k.div_ceil(BK);
        for t in 0..tiles {
            let s = *g % 2;
            let stage = raw_stage(*g);
            *g = g.wrapping_add(1);
            // SAFETY: initialized before the loop; the phase completes after every producer's
            // copies of the tile landed and its part of the split (and, with the member's last
            // tile, its report) was published (proxy fence, then its release arrival).
            unsafe { mbarrier_wait(handoff.full(s), (*g - 1) / 2 % 2) };
            if SEVERAL && t + 1 == tiles {
                // Read before this thread releases the tile: the producers write the word of
                // member j + 2 only after every consumer has. (A block of one member reads it
                // after the loop.)
                // SAFETY: inside the handoff words, published by `full`.
                b_outside = unsafe { ld_shared_f32(handoff.outside(j)) }.to_bits() == j + 1;
            }
            if idle {
                // SAFETY: one arrival per consumer thread per phase of `empty`, as below.
                unsafe { mbarrier_arrive(handoff.empty(s)) };
                continue;
            }
            // Rows row and row + 8, physical columns 8 t4..8 t4 + 8: two 16-byte loads each,
            // 8 lanes of a load phase in 8 distinct groups of 4 banks (rows 144 bytes apart).
            // SAFETY: inside the raw stage, published by `full`.
            let x: [[F32x4; 2]; 2] = core::array::from_fn(|h| {
                let at = a_at.offset_bytes(stage + h as u32 * 8 * A_LD * 4);
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
        b_outside || !a_window.holds()
    }

    /// The GEMM of this block's tile in each of its members: the producers' and the consumers'
    /// loops, then the consumers' scaled loops for the members that need them. The tiles are
    /// copied 16 bytes at a time when `VEC4` ([`RawCopy`]), else 4.
    ///
    /// # Safety
    /// The GEMM contract (see [`gemm_entry!`](crate::infra::device)) for every member; at most
    /// [`MOST_MEMBERS`] members a block; with `VEC4`, `RawCopy`'s 16-byte conditions.
    #[inline(always)]
    unsafe fn gemm<const VEC4: bool>(params: Params) {
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
                    st_shared_f32(handoff.outside(s), 0.0);
                }
            }
        }
        sync_threads();
        // Each role runs to its end in its own branch, since `ptxas` allocates each branch
        // within the registers its `setmaxnreg` gives it. The producers report their window
        // checks through the handoff words, drain their copies and leave, arriving at a named
        // barrier where the consumers wait before they use shared memory for anything else.
        // SAFETY: the contract; each role's threads all run their part.
        unsafe {
            if tid < PRODUCERS {
                setmaxnreg_dec::<PRODUCER_REGS>();
                // A block of one member (every single product) without the steps that move
                // the copies on to the next member: the producers' loop is on the critical
                // path of each tile.
                if params.members_of_block() > 1 {
                    produce::<VEC4, true>(&params, base, handoff, tid);
                } else {
                    produce::<VEC4, false>(&params, base, handoff, tid);
                }
                bar_arrive_named::<DONE_BAR, { PRODUCERS + CONSUMERS }>();
            } else {
                setmaxnreg_inc::<CONSUMER_REGS>();
                let ctid = tid - PRODUCERS;
                match (tile_width(&params.member_of_block(0)), params.members_of_block() > 1) {
                    (32, false) => one_member::<VEC4, 32>(&params, base, handoff, ctid),
                    (64, false) => one_member::<VEC4, 64>(&params, base, handoff, ctid),
                    (_, false) => one_member::<VEC4, BN>(&params, base, handoff, ctid),
                    (32, true) => several_members::<VEC4, 32>(&params, base, handoff, ctid),
                    (64, true) => several_members::<VEC4, 64>(&params, base, handoff, ctid),
                    (_, true) => several_members::<VEC4, BN>(&params, base, handoff, ctid),
                }
            }
        }
    }

    /// The consumers' part of [`gemm`] for a block of one member (every single product), on a
    /// tile `COLS` wide ([`tile_width`]): [`consume`], the scaled loop when a value was outside
    /// the window, the epilogue. Only [`several_members`]'s loop over members and the reports
    /// read inside it are left out: this block's loop is the critical path of single products.
    ///
    /// # Safety
    /// As [`gemm`], after the consumers' `setmaxnreg`, with the producers running [`produce`].
    #[inline(always)]
    unsafe fn one_member<const VEC4: bool, const COLS: u32>(
        params: &Params,
        base: SharedAddr,
        handoff: Handoff,
        ctid: u32,
    ) {
        let args = params.member_of_block(0);
        let mut acc = [0.0f32; 64];
        // SAFETY: the contract; the 256 consumers run every call and barrier below together.
        unsafe {
            let outside = consume::<COLS, false>(&args, base, handoff, ctid, (0, &mut 0), &mut acc);
            bar_sync_named::<DONE_BAR, { PRODUCERS + CONSUMERS }>();
            let outside = outside || ld_shared_f32(handoff.outside(0)).to_bits() != 0;
            if bar_red_or_named::<SCALED_BAR, CONSUMERS>(outside) {
                // The consumers are warpgroup's team of two warpgroups, on a barrier of their
                // own; the producers no longer touch shared memory. The scaled loop multiplies
                // all 128 columns.
                multiply::<true, SCALED_BAR, VEC4>(&args, &mut acc, ctid);
                // Every consumer's last products have read shared memory.
                bar_sync_named::<SCALED_BAR, CONSUMERS>();
            }
            // Shared memory is free (the producers left after their copies landed, every
            // consumer's products completed), so the epilogue may stage C there.
            store_tile::<COLS, false>(&args, &acc, ctid, Some(handoff.staging()));
        }
    }

    /// The consumers' part of [`gemm`] for a block of several members, on a tile `COLS` wide
    /// ([`tile_width`]): [`consume`] for each member, and its epilogue, unless a value was
    /// outside the window. Such members are multiplied again at the end with the scaled loop,
    /// which needs all of shared memory, once the producers have left. Every epilogue but the
    /// last one's writes `C` from registers, since the producers are filling shared memory with
    /// the next member's tiles meanwhile; the last may stage `C` there.
    ///
    /// # Safety
    /// As [`gemm`], after the consumers' `setmaxnreg`, with the producers running [`produce`].
    #[inline(always)]
    unsafe fn several_members<const VEC4: bool, const COLS: u32>(
        params: &Params,
        base: SharedAddr,
        handoff: Handoff,
        ctid: u32,
    ) {
        let members = params.members_of_block();
        let mut acc = [0.0f32; 64];
        // Bit j: member j needs the scaled loop.
        let mut scaled = 0u64;
        let mut g = 0u32;
        // SAFETY: the contract; the 256 consumers run every call and barrier below together.
        unsafe {
            for j in 0..members {
                let args = params.member_of_block(j);
                let outside = consume::<COLS, true>(&args, base, handoff, ctid, (j, &mut g), &mut acc);
                if bar_red_or_named::<SCALED_BAR, CONSUMERS>(outside) {
                    scaled |= 1 << j;
                } else if j + 1 < members {
                    store_tile::<COLS, true>(&args, &acc, ctid, None);
                }
            }
            bar_sync_named::<DONE_BAR, { PRODUCERS + CONSUMERS }>();
            // Shared memory is free (the producers left after their copies landed, every
            // consumer's products completed), so the epilogues from here on may stage C there.
            let staging = handoff.staging();
            let last = members - 1;
            if scaled & (1 << last) == 0 {
                store_tile::<COLS, false>(&params.member_of_block(last), &acc, ctid, Some(staging));
            }
            // The members to multiply again, one at a time. Their list stays in shared memory
            // (the handoff words, free now), so that the loop around the scaled loop, which
            // is at the edge of the consumers' registers, carries nothing else.
            let list = [handoff.outside(0), handoff.outside(1)];
            if ctid == 0 {
                st_shared_f32(list[0], f32::from_bits(scaled as u32));
                st_shared_f32(list[1], f32::from_bits((scaled >> 32) as u32));
            }
            loop {
                // Every consumer is done with the last epilogue's staging, and sees the list.
                bar_sync_named::<SCALED_BAR, CONSUMERS>();
                let left = u64::from(ld_shared_f32(list[0]).to_bits())
                    | u64::from(ld_shared_f32(list[1]).to_bits()) << 32;
                if left == 0 {
                    break;
                }
                let j = left.trailing_zeros();
                // Every consumer has read the list.
                bar_sync_named::<SCALED_BAR, CONSUMERS>();
                if ctid == 0 {
                    let left = left & (left - 1);
                    st_shared_f32(list[0], f32::from_bits(left as u32));
                    st_shared_f32(list[1], f32::from_bits((left >> 32) as u32));
                }
                // Opaque, so that nothing derived from the thread index or the parameters is
                // computed once before the loop and held through it.
                let ctid = opaque_u64(u64::from(ctid)) as u32;
                let mut args = params.member_of_block(j);
                let o = |x: u32| opaque_u64(u64::from(x)) as u32;
                (args.m, args.n, args.k, args.lda, args.ldb, args.ldc) =
                    (o(args.m), o(args.n), o(args.k), o(args.lda), o(args.ldb), o(args.ldc));
                // The consumers are warpgroup's team of two warpgroups, on a barrier of their
                // own. The scaled loop multiplies all 128 columns.
                multiply::<true, SCALED_BAR, VEC4>(&args, &mut acc, ctid);
                // Every consumer's last products have read shared memory.
                bar_sync_named::<SCALED_BAR, CONSUMERS>();
                store_tile::<COLS, false>(&args, &acc, ctid, Some(staging));
            }
        }
    }

    gemm_entry! { production members:
        /// `C = alpha * A * B + beta * C` for the block's batch members (or K slices) in turn,
        /// warp-specialized `wgmma`, the tiles copied 4 bytes at a time: any pointer, any `ld`.
        sgemm_specialized => gemm::<false>
    }

    gemm_entry! { production members:
        /// As `sgemm_specialized` with 16-byte copies: the host launches it only when `a` and
        /// `b` are 16-byte aligned and `lda`, `ldb`, `k` (the slice depth) and `n` multiples
        /// of 4.
        sgemm_specialized_vec4 => gemm::<true>
    }
}
