//! The tile kernels' cost model: [`Gpu::chosen_for`](super::Gpu::chosen_for) runs whichever
//! tile kernel of the policy it predicts to be fastest on the shape.
//!
//! A tile kernel launches `blocks = tiles x batch x slices` blocks (`slices`: the K slices
//! split-K cuts a single product into, see `Gpu::k_slices`), each computing one tile of `C`
//! over a depth `d = k / slices` of `K`. Its time is modeled, in microseconds, as
//!
//! ```text
//! launch + split [slices > 1]
//!   + waves x (per_wave + per_wave_depth x d / 32)        one block after another
//!   + ceil(blocks / SMs) x per_sm_depth x d / 32           the SM's throughput, shared
//!   + per_partial x slices m n [slices > 1] + per_output x m n
//!   + waves x (members - 1) x (next_member.fixed + next_member.depth x d / 32)
//!                                          x next_member.scalar [rows not of whole 4-vectors]
//! ```
//!
//! - `waves = ceil(blocks / slots)` rounds of resident blocks (`slots`: `SMs x blocks per SM`).
//!   Each round costs a block's fixed work (prologue, epilogue) and the latency of its chain of
//!   `K` tiles, whatever the number of blocks in it.
//! - The blocks an SM runs share its issue slots and pipes: beyond a block's own latency, an
//!   SM with more blocks takes proportionally longer (so a few deep blocks, one an SM, can beat
//!   fewer waves of larger tiles).
//! - Split-K writes and reads `slices` partials of `m x n` and launches a reduction; every
//!   product writes `C`.
//! - A kernel that computes several members of a batch per block in turn
//!   (`KernelSpec::members_per_block`, as many as `Gpu`'s launch gives each block, `members`)
//!   launches fewer blocks, so fewer waves; each further member of a block costs less than a
//!   wave, since its copies start while the member before it finishes. With rows that are not
//!   whole 4-vectors (below) each further member costs `next_member.scalar` times as much: its
//!   4-byte copies are most of a short member's work, and nothing overlaps them.
//! - Where `k` or `n` is not a multiple of 4 (rows of `A` or `B` that are not whole
//!   4-vectors), a kernel runs its 4-byte entry, whose copies of the tiles are slower, or (the
//!   tensor-core kernel on products large enough, [`KernelSpec::padding`]) pads copies of the
//!   operands for its 16-byte one; either way it spends `scalar_sm_depth` times the SM's depth
//!   term there. The copies share the SM's issue slots and memory pipes with the FMAs, so they
//!   weigh on throughput, not on one block's latency.
//! - A kernel that multiplies a tile narrower than its own at a width of its choosing
//!   (`specialized`, [`specialized::multiplied_width`]) spends on a `C` narrower than one tile
//!   `narrow.fixed + (1 - narrow.fixed) x width / tile width` of the depth terms: the copies
//!   and splits of `A` stay whole, the tensor work shrinks.
//!
//! The coefficients are non-negative and fitted to the four kernels' times on an H100,
//! `narrow.fixed` chosen on narrow and short products timed the same way, and the terms of
//! further members fitted to `specialized`'s batches of several members a block (the data and
//! the fits: `docs/performance-notes.md`, "the tile kernel by predicted time", "Narrow tiles on
//! the tensor cores", "Several members per block", "rows that are not whole 4-vectors in the cost
//! model", "`tiny_tile`'s copies and epilogue, its refit", "Deep products in `tiny_tile`'s
//! fit", which also fits `next_member.scalar`, and "The split-K reduction's loads", which refits
//! `split_k`'s `per_partial`). On other GPUs the wave and SM counts come from
//! the device and the coefficients stay the H100's: the choice needs only the kernels' ranking.

use sgemm_kernels::KernelSpec;
use sgemm_kernels::production::{small_tile, specialized, split_k, tiny_tile};

use super::{member_groups, most_slices, slices_fit, tiles};

/// One tile kernel's coefficients (microseconds; `per_partial` and `per_output` per million
/// elements).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Cost {
    launch: f64,
    split: f64,
    per_wave: f64,
    per_wave_depth: f64,
    per_sm_depth: f64,
    per_partial: f64,
    per_output: f64,
    /// The factor on `per_sm_depth` where the shape's rows are not whole 4-vectors.
    scalar_sm_depth: f64,
    next_member: Option<NextMember>,
    narrow: Option<Narrow>,
}

/// What each further member of a block costs a kernel that computes several in turn, per wave:
/// `fixed + depth x d / 32` microseconds, times `scalar` where the shape's rows are not whole
/// 4-vectors.
#[derive(Clone, Copy, Debug)]
struct NextMember {
    fixed: f64,
    depth: f64,
    scalar: f64,
}

/// How a kernel multiplies a `C` narrower than its tile: the columns it multiplies for a given
/// count inside `C`, and the fraction of its depth terms that does not shrink with them.
#[derive(Clone, Copy, Debug)]
struct Narrow {
    width: fn(u32) -> u32,
    fixed: f64,
}

/// The fitted coefficients of each tile kernel the automatic choice weighs.
const COSTS: [(&str, Cost); 4] = [
    (
        specialized::SPEC.name,
        Cost {
            launch: 5.954,
            split: 4.855,
            per_wave: 5.183,
            per_wave_depth: 0.685,
            per_sm_depth: 0.685,
            per_partial: 4.602,
            per_output: 0.235,
            scalar_sm_depth: 1.445,
            next_member: Some(NextMember { fixed: 1.3, depth: 1.08, scalar: 1.83 }),
            narrow: Some(Narrow { width: specialized::multiplied_width, fixed: 0.3 }),
        },
    ),
    (
        split_k::SPEC.name,
        Cost {
            launch: 3.333,
            split: 3.055,
            per_wave: 3.408,
            per_wave_depth: 1.481,
            per_sm_depth: 2.164,
            per_partial: 1.933,
            per_output: 0.844,
            scalar_sm_depth: 1.0,
            next_member: None,
            narrow: None,
        },
    ),
    (
        small_tile::SPEC.name,
        Cost {
            launch: 3.404,
            split: 2.864,
            per_wave: 2.145,
            per_wave_depth: 1.171,
            per_sm_depth: 0.553,
            per_partial: 3.16,
            per_output: 0.683,
            scalar_sm_depth: 1.0,
            next_member: None,
            narrow: None,
        },
    ),
    (
        tiny_tile::SPEC.name,
        Cost {
            launch: 4.624,
            split: 3.004,
            per_wave: 0.0,
            per_wave_depth: 0.396,
            per_sm_depth: 0.194,
            per_partial: 11.109,
            per_output: 1.640,
            scalar_sm_depth: 1.379,
            next_member: None,
            narrow: None,
        },
    ),
];

/// Microseconds per million elements of an operand that a call copies (reads and writes once,
/// `transpose`) before a tile kernel that cannot read it as it lies, fitted to what the copies
/// add to the tile kernels' batches (`docs/performance-notes.md`, "Transposed operands read as
/// they lie").
const COPY_PER_MILLION: f64 = 2.3;

/// The predicted time, in microseconds, of copying `elements` elements of operands.
pub(crate) fn copies(elements: usize) -> f64 {
    COPY_PER_MILLION * elements as f64 / 1e6
}

/// The coefficients of the kernel called `name`, if the model has them.
pub(crate) fn cost_of(name: &str) -> Option<&'static Cost> {
    COSTS.iter().find(|(n, _)| *n == name).map(|(_, cost)| cost)
}

impl Cost {
    /// The predicted time, in microseconds, of `spec` on a batch of `batch` row-major products
    /// `m x n x k` on a GPU of `sm_count` SMs holding `slots` of its blocks at once (a single
    /// product split into the K slices of [`slices`](Self::slices), as `Gpu::k_slices` splits
    /// it).
    pub(crate) fn predict(
        &self,
        spec: &KernelSpec,
        slots: usize,
        sm_count: usize,
        batch: usize,
        shape: (usize, usize, usize),
    ) -> f64 {
        let slices = if batch == 1 { self.slices(spec, slots, sm_count, shape) } else { 1 };
        self.time(spec, slots, sm_count, batch, shape, slices)
    }

    /// The K slices to cut a single `m x n x k` product into: of the counts split-K allows
    /// ([`most_slices`], [`slices_fit`]), the one with the least predicted time, the fewest on a
    /// tie.
    pub(crate) fn slices(
        &self,
        spec: &KernelSpec,
        slots: usize,
        sm_count: usize,
        (m, n, k): (usize, usize, usize),
    ) -> usize {
        (1..=most_slices(spec, slots, m, n, k))
            .filter(|&s| slices_fit(spec, k, s))
            .map(|s| (s, self.time(spec, slots, sm_count, 1, (m, n, k), s)))
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .map_or(1, |(s, _)| s)
    }

    /// The model's time for `slices` K slices of each product (1: not split).
    fn time(
        &self,
        spec: &KernelSpec,
        slots: usize,
        sm_count: usize,
        batch: usize,
        (m, n, k): (usize, usize, usize),
        slices: usize,
    ) -> f64 {
        let tiles = tiles(spec, m, n);
        let blocks = tiles.saturating_mul(batch).saturating_mul(slices);
        let per_sm = blocks.div_ceil(sm_count.max(1)) as f64;
        // The blocks launched, and the members each computes (the last ones fewer).
        let (launched, members) = if slices == 1 {
            let groups = member_groups(spec, batch, tiles, slots);
            (tiles.saturating_mul(groups), batch.div_ceil(groups.max(1)))
        } else {
            (blocks, 1)
        };
        let waves = launched.div_ceil(slots.max(1)) as f64;
        let tile_width = spec.tile.1 as usize;
        let narrowed = match self.narrow {
            Some(Narrow { width, fixed }) if n < tile_width => {
                fixed + (1.0 - fixed) * f64::from(width(n as u32)) / tile_width as f64
            }
            _ => 1.0,
        };
        let depth = k.div_ceil(slices) as f64 / 32.0 * narrowed;
        // Rows of A and B of whole 4-vectors: contiguous operands take the 16-byte entry as
        // they are.
        let whole_vectors = k.is_multiple_of(4) && n.is_multiple_of(4);
        let sm_depth = if whole_vectors { 1.0 } else { self.scalar_sm_depth };
        let outputs = (m * n) as f64 * batch as f64 / 1e6;
        let split = slices > 1;
        self.launch
            + if split { self.split + self.per_partial * outputs * slices as f64 } else { 0.0 }
            + waves * (self.per_wave + self.per_wave_depth * depth)
            + per_sm * self.per_sm_depth * sm_depth * depth
            + self.per_output * outputs
            + self.next_member.map_or(0.0, |next| {
                let scalar = if whole_vectors { 1.0 } else { next.scalar };
                waves * (members - 1) as f64 * (next.fixed + next.depth * depth) * scalar
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kernel the model picks among `candidates` on an H100 (132 SMs, each kernel's blocks
    /// per SM as the driver reports them there).
    fn pick(batch: usize, shape: (usize, usize, usize), candidates: &[&'static KernelSpec]) -> &'static str {
        pick_copying(batch, shape, candidates, |_| 0)
    }

    /// [`pick`] where a call would copy `copied(spec)` elements of each member before `spec`.
    fn pick_copying(
        batch: usize,
        shape: (usize, usize, usize),
        candidates: &[&'static KernelSpec],
        copied: impl Fn(&KernelSpec) -> usize,
    ) -> &'static str {
        let sms = 132;
        let per_sm = |spec: &KernelSpec| match spec.name {
            "specialized" => 1,
            "split_k" => 2,
            "small_tile" => 4,
            _ => 12,
        };
        let time = |spec: &KernelSpec| {
            cost_of(spec.name).unwrap().predict(spec, sms * per_sm(spec), sms, batch, shape)
                + copies(batch * copied(spec))
        };
        candidates.iter().min_by(|a, b| time(a).total_cmp(&time(b))).unwrap().name
    }

    #[test]
    fn the_model_picks_the_kernels_measured_fastest() {
        let all = [&specialized::SPEC, &split_k::SPEC, &small_tile::SPEC, &tiny_tile::SPEC];
        let ffma = [&split_k::SPEC, &small_tile::SPEC, &tiny_tile::SPEC];
        for (batch, shape, expected) in [
            // Large products: the tensor cores.
            (1, (4096, 4096, 4096), "specialized"),
            (1, (1024, 1024, 1024), "specialized"),
            (1, (1711, 982, 324), "specialized"),
            (1024, (512, 512, 64), "specialized"),
            (1024, (64, 64, 64), "small_tile"),
            // Small inner dimensions over grids the 128 x 128 tiles fill in two waves.
            (1, (534, 3664, 35), "small_tile"),
            // Rows not of whole 4-vectors over many 32 x 32 tiles an SM: tiny_tile's 4-byte
            // copies weigh on the SM's throughput, and the 64 x 64 tiles are faster.
            (1, (19783, 54, 125), "small_tile"),
            // Deep over 84 tiles: the tensor cores on 3 K slices.
            (1, (306, 3473, 1826), "specialized"),
            // One-wave batches of 128-class members: 32 x 32 tiles, four blocks an SM.
            (32, (128, 128, 128), "tiny_tile"),
            (32, (128, 128, 64), "tiny_tile"),
            // Rows not of whole 4-vectors on the tensor cores too (which pad copies of A and B
            // there): two waves of 128 x 128 tiles on f32 FMAs.
            (1, (4488, 860, 85), "split_k"),
            // Deep and narrow: a few blocks of 32 x 32, one an SM.
            (1, (27, 72, 19434), "tiny_tile"),
            (1, (76, 2, 18436), "tiny_tile"),
            // A C 64 wide, which the tensor-core kernel multiplies 64 wide.
            (32, (512, 64, 512), "specialized"),
            (1024, (512, 64, 512), "specialized"),
            // Batches whose blocks take several members in turn on the tensor cores.
            (32, (384, 384, 64), "specialized"),
            (256, (128, 128, 64), "specialized"),
            (256, (200, 300, 48), "specialized"),
            // ... but not short members whose rows are not whole 4-vectors: there the 4-byte
            // copies of each further member leave the tensor-core kernel behind the FFMA tiles.
            (256, (127, 129, 65), "small_tile"),
            (1024, (130, 70, 190), "tiny_tile"),
        ] {
            assert_eq!(pick(batch, shape, &all), expected, "{batch} x {shape:?}");
        }
        // Without the tensor-core kernel, a full grid of 128 x 128 tiles ...
        assert_eq!(pick(1, (4096, 4096, 4096), &ffma), "split_k");
        // ... and 64 of them on 4 K slices, whose partials the reduction reads in one wait.
        assert_eq!(pick(1, (1024, 1024, 1024), &ffma), "split_k");
    }

    #[test]
    fn copies_of_transposed_operands_count_against_the_kernels_that_read_them() {
        // `A` stored transposed: the tensor-core kernel and `tiny_tile` read a copy of it, the
        // 64 x 64 and 128 x 128 FFMA tiles read it as it lies.
        let all = [&specialized::SPEC, &split_k::SPEC, &small_tile::SPEC, &tiny_tile::SPEC];
        let copied_a = |m: usize, k: usize| {
            move |spec: &KernelSpec| {
                if [specialized::SPEC.name, tiny_tile::SPEC.name].contains(&spec.name) { m * k } else { 0 }
            }
        };
        for (batch, (m, n, k), expected) in [
            // 134M elements of A: the copy costs more than the tensor cores gain.
            (512, (512, 64, 512), "small_tile"),
            (1024, (512, 64, 512), "small_tile"),
            // Members whose copies are small beside the product still run on the tensor cores.
            (512, (512, 512, 64), "specialized"),
            (1, (4096, 4096, 4096), "specialized"),
        ] {
            assert_eq!(
                pick_copying(batch, (m, n, k), &all, copied_a(m, k)),
                expected,
                "{batch} x {m}x{n}x{k}"
            );
        }
    }

    #[test]
    fn the_slices_weigh_filled_sms_against_waves_and_partials() {
        let spec = &specialized::SPEC;
        let slices = |shape| cost_of(spec.name).unwrap().slices(spec, 132, 132, shape);
        // 64 tiles: two slices fill 128 of 132 SMs in one wave.
        assert_eq!(slices((1024, 1024, 1024)), 2);
        // 100 tiles 2202 deep: more slices would fill the SMs, but in waves of short blocks
        // and with partials of C; one wave of whole products is faster.
        assert_eq!(slices((12767, 45, 2202)), 1);
        // 78 tiles 6488 deep: a few slices.
        assert!((2..=8).contains(&slices((3309, 279, 6488))));
        // A full grid is not split.
        assert_eq!(slices((4096, 4096, 4096)), 1);
        // 176 tiles 3225 deep, a wave and a third: three slices make four full waves.
        assert_eq!(slices((11162, 175, 3225)), 3);
        // Beyond two waves the model is not asked: split_k's 576 tiles at 3072^3 on its 264
        // slots stay whole (split, they measured slower than the model predicted).
        let strict = &split_k::SPEC;
        assert_eq!(cost_of(strict.name).unwrap().slices(strict, 264, 132, (3072, 3072, 3072)), 1);
    }

    #[test]
    fn every_production_tile_kernel_has_coefficients() {
        for spec in [&specialized::SPEC, &split_k::SPEC, &small_tile::SPEC, &tiny_tile::SPEC] {
            assert!(cost_of(spec.name).is_some(), "{}", spec.name);
        }
    }
}
