//! The blocking of the packed GEMM, derived from the caches of the CPU it runs on.
//!
//! Each microkernel call streams a `kc x NR` panel of `B` past an `MR x kc` panel of `A` held
//! in L1, and needs `NR` floats of `B` per `MR * NR / LANES` FMAs: 128 bytes per 16 FMAs for
//! the AVX-512 `8 x 32` kernel. Where that stream comes from decides the blocking:
//!
//! - **B in L2.** When half of one core's L2 holds a block of `256 x 1024` floats (1 MB: an L2
//!   of 2 MB or more, as on Intel's Sapphire Rapids and later Xeons), the block of `B` is
//!   `kc = 256` deep and as wide as half the L2 holds, so every panel of `B` is read from L2.
//!   Such cores issue two 512-bit FMAs a cycle, so they need 16 bytes of `B` a cycle, more than
//!   one core's share of a mesh L3 delivers; from L2 they run at their FMA peak.
//! - **B in L3.** Otherwise the microkernel's own blocking ([`Microkernel::kc`],
//!   [`Microkernel::nc`]: `1024 x 2048`, tuned on Zen 4): a block too large for L2, streamed
//!   from L3, with fewer passes over `C` and fewer repacks of `A`. A core that issues one
//!   512-bit FMA a cycle (Zen 4) needs half the bandwidth, which its L3 delivers. The block is
//!   narrowed to half the L3 when that is smaller (an 8 MB L3 of a Zen 1 core complex holds a
//!   `1024 x 1024` block, not `1024 x 2048`: the whole L3), so that the block read again for every
//!   panel of `A` stays in the L3 beside the rest of the working set; the team's threads share one
//!   block, and each L3 they run on keeps its copy of it.
//!
//! - **Few rows**, where `B` would stream from L3. A product of at most [`FEW_ROW_PANELS`]
//!   panels of `A` reads each packed value of `B` only that many times, so the pass that packs
//!   `B` (a read from memory, a write into the block) is a large share of its time, and what
//!   that pass costs depends on the block: writing a block of several MB that the L3 does not
//!   keep costs as much again as reading `B`, while a block of whole rows of `B`, a few MB,
//!   costs little more than the read. So the block spans the width of `C` (its rows of `B` one
//!   run in memory) and is `L2_KC` deep, at most half the L3. Each tile of `C` then receives
//!   sums of `L2_KC` steps instead of `kc`: `C` is small, and its extra passes cheap.
//!
//! The cache sizes come from Linux's `/sys/devices/system/cpu/cpu0/cache`, else from `cpuid`
//! (leaf 4 on Intel, 0x8000001D on AMD); an unknown L2 takes the second rule, an unknown L3 leaves
//! the block as wide as the microkernel's. Measurements: `docs/performance-notes.md`.

use std::sync::OnceLock;

use super::microkernel::Microkernel;

/// The depth of a block of `B` kept in L2.
const L2_KC: usize = 256;
/// The narrowest block of `B` worth keeping in L2: narrower ones repack `A` too often.
const L2_MIN_NC: usize = 1024;

/// The most panels of `A` in a product blocked for few rows.
const FEW_ROW_PANELS: usize = 16;

/// `(kc, nc)`: the depth and the target width of a packed block of `B` for `uk` on this CPU, in
/// a product with `m` rows and `n` columns of `C` (the depth depends on `m` alone).
pub(crate) fn block_shape(uk: &Microkernel, m: usize, n: usize) -> (usize, usize) {
    block_shape_for(uk, (m, n), l2_bytes(), l3_bytes())
}

/// The values of `B` a cache of `bytes` keeps beside `A` and `C`: half of it.
pub(crate) fn b_share(bytes: usize) -> usize {
    bytes / 2 / size_of::<f32>()
}

/// [`block_shape`] for a core with `l2` bytes of L2 and `l3` bytes of L3 (`None`: unknown).
fn block_shape_for(
    uk: &Microkernel,
    (m, n): (usize, usize),
    l2: Option<usize>,
    l3: Option<usize>,
) -> (usize, usize) {
    if let Some(nc) = l2_block_width(uk, l2) {
        return (L2_KC, nc);
    }
    // B's share of the L3 at depth kc, in whole panels of B (at least one).
    let l3_nc = |kc: usize| l3.map_or(usize::MAX, |l3| (b_share(l3) / kc / uk.nr).max(1) * uk.nr);
    if m.div_ceil(uk.mr) <= FEW_ROW_PANELS {
        return (L2_KC, n.max(1).next_multiple_of(uk.nr).min(l3_nc(L2_KC)));
    }
    (uk.kc, uk.nc.min(l3_nc(uk.kc)))
}

/// The width of the block of `B` that [`block_shape`] keeps in an L2 of `l2` bytes (`L2_KC`
/// deep, as wide as half the L2 holds in whole panels), or `None` where that is narrower than
/// [`L2_MIN_NC`] (or the L2 unknown) and the block streams from L3.
fn l2_block_width(uk: &Microkernel, l2: Option<usize>) -> Option<usize> {
    let nc = l2.map_or(0, b_share) / L2_KC / uk.nr * uk.nr;
    (nc >= L2_MIN_NC).then_some(nc)
}

/// Whether the packed path keeps its block of `B` in this core's L2 ([`block_shape`]): each row
/// of register tiles then reads the packed block from L2, where otherwise it streams from L3.
pub(crate) fn keeps_b_in_l2(uk: &Microkernel) -> bool {
    l2_block_width(uk, l2_bytes()).is_some()
}

/// How many tiles ahead of the one computed the packed loops prefetch the lines of `C` for short
/// sums ([`Microkernel::prefetch_c`]): as many tiles of `uk` as a sixth of this core's L1 holds
/// (of 32 KB when the CPU does not say), at least one, so that the lines asked for early take a
/// small share of the L1 beside the panels of `A` and `B` the microkernel is reading.
///
/// None (0) except on AMD's cores: there the stores of a row of tiles, `MR` streams, each miss
/// one at a time, and asking for the lines ahead pays; Intel's cores handle those stores
/// without it, and the extra requests only cost them (`docs/performance-notes.md`).
pub(crate) fn c_ahead_tiles(uk: &Microkernel) -> usize {
    if amd() { c_ahead_tiles_for(uk, l1_bytes()) } else { 0 }
}

/// The fewest full rows of register tiles of `C` from which the unpacked kernels read a
/// row-major `B` whose rows do not start on cache lines through a copy whose rows do, or
/// `None` for never.
///
/// Every vector load of such a row straddles two lines. Each row of tiles reads all of `B`
/// again, while the copy is made once, so the copy pays for itself from some number of rows of
/// tiles: on Intel's cores, which pay for a load across two lines, from
/// [`REALIGN_ROWS_OF_TILES`]; AMD's cores pay too little for it to repay a copy, and other
/// vendors keep reading `B` where it lies (the measurements: `docs/performance-notes.md`).
pub(crate) fn realign_b_rows_of_tiles() -> Option<usize> {
    intel().then_some(REALIGN_ROWS_OF_TILES)
}

/// The rows of tiles from which an Intel core repays the copy of [`realign_b_rows_of_tiles`].
const REALIGN_ROWS_OF_TILES: usize = 16;

/// Whether this CPU is an Intel core: the `cpuid` vendor string.
fn intel() -> bool {
    static INTEL: OnceLock<bool> = OnceLock::new();
    *INTEL.get_or_init(|| &vendor() == b"GenuineIntel")
}

/// Whether this CPU is an AMD core (or a Hygon, which is one): the `cpuid` vendor string.
fn amd() -> bool {
    static AMD: OnceLock<bool> = OnceLock::new();
    *AMD.get_or_init(|| matches!(&vendor(), b"AuthenticAMD" | b"HygonGenuine"))
}

/// The `cpuid` vendor string (leaf 0: `ebx`, `edx`, `ecx`).
#[cfg(target_arch = "x86_64")]
// `cpuid` became a safe intrinsic after this crate's minimum Rust version.
#[allow(unused_unsafe)]
fn vendor() -> [u8; 12] {
    // SAFETY: cpuid exists on every x86-64 CPU, and leaf 0 on every one.
    let r = unsafe { std::arch::x86_64::__cpuid(0) };
    let mut name = [0; 12];
    for (chunk, word) in name.chunks_mut(4).zip([r.ebx, r.edx, r.ecx]) {
        chunk.copy_from_slice(&word.to_le_bytes());
    }
    name
}

#[cfg(not(target_arch = "x86_64"))]
fn vendor() -> [u8; 12] {
    [0; 12]
}

/// [`c_ahead_tiles`] for a core with `l1` bytes of L1 (`None`: unknown).
fn c_ahead_tiles_for(uk: &Microkernel, l1: Option<usize>) -> usize {
    (l1_or_default(l1) / 6 / (uk.mr * uk.nr * size_of::<f32>())).max(1)
}

/// The longest rows of `A` (in values) for which the unpacked kernels prefetch the rows of the
/// next row of tiles, `rows` of them at a time: as long as those lines take at most half of this
/// core's L1 (of 32 KB when the CPU does not say). On AMD's cores a prefetch into L2 fills the L1
/// as well, where more of them would push out the rows of `B` the tile is reading; and longer
/// rows are the ones the hardware's own prefetchers follow.
pub(crate) fn warm_row_values(rows: usize) -> usize {
    warm_row_values_for(rows, l1_bytes())
}

/// [`warm_row_values`] for a core with `l1` bytes of L1 (`None`: unknown).
fn warm_row_values_for(rows: usize, l1: Option<usize>) -> usize {
    l1_or_default(l1) / 2 / (rows.max(1) * size_of::<f32>())
}

/// An L1 of `l1` bytes, or of 32 KB when the CPU does not say.
fn l1_or_default(l1: Option<usize>) -> usize {
    l1.unwrap_or(32 << 10)
}

/// This core's L1 data cache in bytes, or 32 KB when the CPU does not say.
pub(crate) fn l1_bytes_or_default() -> usize {
    l1_or_default(l1_bytes())
}

/// The L1 data cache of one core, in bytes, if the CPU says.
fn l1_bytes() -> Option<usize> {
    static L1: OnceLock<Option<usize>> = OnceLock::new();
    *L1.get_or_init(|| from_sysfs(1).or_else(|| from_cpuid(1)))
}

/// This core's L2 cache in bytes, or 2 MB when the CPU does not say.
pub(crate) fn l2_bytes_or_default() -> usize {
    l2_bytes().unwrap_or(2 << 20)
}

/// The bytes of lines a thread may ask into L2 ahead of their use (the next batch member's
/// operands, the rows of a stripe of `B` to the right): a quarter of this core's L2
/// ([`l2_bytes_or_default`]), so that what it is computing keeps the rest.
pub(crate) fn ahead_bytes() -> usize {
    l2_bytes_or_default() / 4
}

/// The L2 cache of one core, in bytes, if the CPU says.
pub(crate) fn l2_bytes() -> Option<usize> {
    static L2: OnceLock<Option<usize>> = OnceLock::new();
    *L2.get_or_init(|| from_sysfs(2).or_else(|| from_cpuid(2)))
}

/// The L3 cache that cpu0 shares with its neighbours (one instance), in bytes, if the CPU says.
pub(crate) fn l3_bytes() -> Option<usize> {
    static L3: OnceLock<Option<usize>> = OnceLock::new();
    *L3.get_or_init(|| from_sysfs(3).or_else(|| from_cpuid(3)))
}

/// Linux's description of cpu0's caches: the size of the data or unified cache of `level`.
fn from_sysfs(level: u32) -> Option<usize> {
    let read = |path: std::path::PathBuf| std::fs::read_to_string(path).ok();
    let level_name = level.to_string();
    for entry in std::fs::read_dir("/sys/devices/system/cpu/cpu0/cache").ok()?.flatten() {
        let dir = entry.path();
        let this_level = read(dir.join("level"));
        let kind = read(dir.join("type"));
        if this_level.as_deref().map(str::trim) == Some(level_name.as_str())
            && kind.as_deref().map(str::trim) != Some("Instruction")
        {
            return parse_size(read(dir.join("size"))?.trim());
        }
    }
    None
}

/// `"2048K"`, `"1M"`, `"512"` as bytes.
fn parse_size(text: &str) -> Option<usize> {
    let (digits, unit) = match text.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((i, _)) => text.split_at(i),
        None => (text, ""),
    };
    let scale = match unit.trim() {
        "" => 1,
        "K" | "KB" | "KiB" => 1 << 10,
        "M" | "MB" | "MiB" => 1 << 20,
        _ => return None,
    };
    digits.parse::<usize>().ok()?.checked_mul(scale)
}

/// The size of the data or unified cache of `level` from `cpuid`'s deterministic cache
/// parameters: leaf 4 (Intel) or 0x8000001D (AMD), which describe each cache as ways x
/// partitions x line size x sets.
#[cfg(target_arch = "x86_64")]
// `cpuid` became a safe intrinsic after this crate's minimum Rust version.
#[allow(unused_unsafe)]
fn from_cpuid(level: u32) -> Option<usize> {
    use std::arch::x86_64::{__cpuid, __cpuid_count};
    // SAFETY: cpuid exists on every x86-64 CPU; leaves are asked for only below the maximum.
    let max_basic = unsafe { __cpuid(0) }.eax;
    let max_extended = unsafe { __cpuid(0x8000_0000) }.eax;
    let leaves = [(4, max_basic >= 4), (0x8000_001D, max_extended >= 0x8000_001D)];
    for (leaf, present) in leaves {
        if !present {
            continue;
        }
        for sub in 0..16 {
            // SAFETY: as above.
            let r = unsafe { __cpuid_count(leaf, sub) };
            let (kind, this_level) = (r.eax & 0x1f, (r.eax >> 5) & 0x7);
            if kind == 0 {
                break;
            }
            if this_level == level && kind != 2 {
                let ways = (r.ebx >> 22) as usize + 1;
                let partitions = ((r.ebx >> 12) & 0x3ff) as usize + 1;
                let line = (r.ebx & 0xfff) as usize + 1;
                let sets = r.ecx as usize + 1;
                return Some(ways * partitions * line * sets);
            }
        }
    }
    None
}

#[cfg(not(target_arch = "x86_64"))]
fn from_cpuid(_level: u32) -> Option<usize> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::microkernel::PORTABLE;

    /// A product of many rows.
    const SQUARE: (usize, usize) = (4096, 4096);

    #[test]
    fn c_is_prefetched_a_sixth_of_the_l1_ahead() {
        // Tiles of 4 x 8 (128 bytes): 64 of them in a sixth of 48 KB, 42 of 32 KB (also when
        // the L1 is unknown), and at least one.
        assert_eq!(c_ahead_tiles_for(&PORTABLE, Some(48 << 10)), 64);
        assert_eq!(c_ahead_tiles_for(&PORTABLE, Some(32 << 10)), 42);
        assert_eq!(c_ahead_tiles_for(&PORTABLE, None), 42);
        assert_eq!(c_ahead_tiles_for(&PORTABLE, Some(256)), 1);
    }

    /// The vendor string reads as Linux reads it (`vendor_id` in `/proc/cpuinfo`), where there
    /// is one to compare with.
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    #[test]
    fn the_vendor_is_the_one_linux_names() {
        let Ok(info) = std::fs::read_to_string("/proc/cpuinfo") else { return };
        let Some(line) = info.lines().find(|l| l.starts_with("vendor_id")) else { return };
        let linux = line.split(':').nth(1).map(str::trim).unwrap_or_default();
        assert_eq!(std::str::from_utf8(&vendor()), Ok(linux));
        assert_eq!(amd(), linux == "AuthenticAMD" || linux == "HygonGenuine");
    }

    #[test]
    fn rows_of_a_are_prefetched_within_half_of_the_l1() {
        // 8 rows: 768 values in a 48 KB L1, 512 in 32 KB (also when it is unknown).
        assert_eq!(warm_row_values_for(8, Some(48 << 10)), 768);
        assert_eq!(warm_row_values_for(8, Some(32 << 10)), 512);
        assert_eq!(warm_row_values_for(8, None), 512);
        assert_eq!(warm_row_values_for(6, Some(48 << 10)), 1024);
    }

    #[test]
    fn sizes_parse_as_linux_writes_them() {
        assert_eq!(parse_size("2048K"), Some(2 << 20));
        assert_eq!(parse_size("1M"), Some(1 << 20));
        assert_eq!(parse_size("512"), Some(512));
        assert_eq!(parse_size("12 Q"), None);
    }

    #[test]
    fn a_large_l2_keeps_b_in_it_and_a_small_one_keeps_the_kernels_blocking() {
        assert_eq!(block_shape_for(&PORTABLE, SQUARE, Some(2 << 20), None), (256, 1024));
        assert_eq!(block_shape_for(&PORTABLE, SQUARE, Some(4 << 20), Some(32 << 20)), (256, 2048));
        for small in [None, Some(1 << 20), Some(1280 << 10)] {
            assert_eq!(block_shape_for(&PORTABLE, SQUARE, small, None), (PORTABLE.kc, PORTABLE.nc));
            assert_eq!(block_shape_for(&PORTABLE, SQUARE, small, Some(32 << 20)), (PORTABLE.kc, PORTABLE.nc));
        }
    }

    #[test]
    fn a_small_l3_narrows_the_block_of_b_to_half_of_it() {
        // kc = 256 for the portable kernel: half of 8 MB holds 4096 columns, of 1 MB 512.
        let (kc, nc) = (PORTABLE.kc, PORTABLE.nc);
        assert_eq!(block_shape_for(&PORTABLE, SQUARE, Some(512 << 10), Some(8 << 20)), (kc, nc.min(4096)));
        assert_eq!(block_shape_for(&PORTABLE, SQUARE, Some(512 << 10), Some(1 << 20)), (kc, 512));
        // Never narrower than one panel.
        assert_eq!(block_shape_for(&PORTABLE, SQUARE, None, Some(1 << 10)), (kc, PORTABLE.nr));
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn an_avx2_core_complex_of_8_mb_gets_a_block_of_half_of_it() {
        use crate::cpu::microkernel::AVX2;
        // Zen 1: 512 KB of L2 per core, 8 MB of L3 per core complex.
        assert_eq!(block_shape_for(&AVX2, SQUARE, Some(512 << 10), Some(8 << 20)), (1024, 1024));
        assert_eq!(block_shape_for(&AVX2, SQUARE, Some(512 << 10), Some(16 << 20)), (1024, 2048));
        // Few rows: sums of 256 steps instead of 1024, over whole rows of B.
        assert_eq!(block_shape_for(&AVX2, (8, 4096), Some(512 << 10), Some(16 << 20)), (256, 4096));
    }

    #[test]
    fn few_rows_take_a_shallow_block_of_whole_rows_where_b_streams_from_l3() {
        let few = FEW_ROW_PANELS * PORTABLE.mr;
        let (zen3_l2, l3) = (Some(512 << 10), Some(32 << 20));
        assert_eq!(block_shape_for(&PORTABLE, (8, 4096), zen3_l2, l3), (L2_KC, 4096));
        assert_eq!(block_shape_for(&PORTABLE, (few, 1001), zen3_l2, l3), (L2_KC, 1008));
        // Half of 32 MB holds 16384 columns 256 deep; one row of C still gets one panel.
        assert_eq!(block_shape_for(&PORTABLE, (1, 1 << 20), zen3_l2, l3), (L2_KC, 16384));
        assert_eq!(block_shape_for(&PORTABLE, (1, 0), zen3_l2, None), (L2_KC, PORTABLE.nr));
        // More rows, or a B kept in a large L2, keep the other rules.
        assert_eq!(block_shape_for(&PORTABLE, (few + 1, 4096), zen3_l2, l3), (PORTABLE.kc, PORTABLE.nc));
        assert_eq!(block_shape_for(&PORTABLE, (8, 4096), Some(2 << 20), l3), (256, 1024));
    }

    #[test]
    fn what_this_cpu_reports_is_a_plausible_cache() {
        // A hypervisor may hide the caches from both sources; what is reported must be sane.
        for (level, sizes) in [(2, 128 << 10..=64 << 20), (3, 128 << 10..=2 << 30)] {
            match (from_sysfs(level), from_cpuid(level)) {
                (None, None) => eprintln!("this CPU reports no L{level} size"),
                (sysfs, cpuid) => {
                    for bytes in [sysfs, cpuid].into_iter().flatten() {
                        assert!(sizes.contains(&bytes), "L{level} of {bytes} bytes");
                    }
                }
            }
        }
    }
}
