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
//!   512-bit FMA a cycle (Zen 4) needs half the bandwidth, which its L3 delivers.
//!
//! The L2 size comes from Linux's `/sys/devices/system/cpu/cpu0/cache`, else from `cpuid`
//! (leaf 4 on Intel, 0x8000001D on AMD); unknown, the second rule applies. Measurements:
//! `docs/performance-notes.md`.

use std::sync::OnceLock;

use super::microkernel::Microkernel;

/// The depth of a block of `B` kept in L2.
const L2_KC: usize = 256;
/// The narrowest block of `B` worth keeping in L2: narrower ones repack `A` too often.
const L2_MIN_NC: usize = 1024;

/// `(kc, nc)`: the depth and the target width of a packed block of `B` for `uk` on this CPU.
pub(crate) fn block_shape(uk: &Microkernel) -> (usize, usize) {
    block_shape_for(uk, l2_bytes())
}

/// The values of `B` a core with `l2` bytes of L2 keeps there beside `A` and `C`: half of it.
pub(crate) fn b_share(l2: usize) -> usize {
    l2 / 2 / size_of::<f32>()
}

/// [`block_shape`] for a core with `l2` bytes of L2 (`None`: unknown).
fn block_shape_for(uk: &Microkernel, l2: Option<usize>) -> (usize, usize) {
    let floats = l2.map_or(0, b_share);
    let nc = floats / L2_KC / uk.nr * uk.nr;
    if nc >= L2_MIN_NC { (L2_KC, nc) } else { (uk.kc, uk.nc) }
}

/// The L2 cache of one core, in bytes, if the CPU says.
pub(crate) fn l2_bytes() -> Option<usize> {
    static L2: OnceLock<Option<usize>> = OnceLock::new();
    *L2.get_or_init(|| from_sysfs().or_else(from_cpuid))
}

/// Linux's description of cpu0's caches: the level-2 data or unified cache's size.
fn from_sysfs() -> Option<usize> {
    let read = |path: std::path::PathBuf| std::fs::read_to_string(path).ok();
    for entry in std::fs::read_dir("/sys/devices/system/cpu/cpu0/cache").ok()?.flatten() {
        let dir = entry.path();
        let level = read(dir.join("level"));
        let kind = read(dir.join("type"));
        if level.as_deref().map(str::trim) == Some("2")
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

/// The L2 size from `cpuid`'s deterministic cache parameters: leaf 4 (Intel) or 0x8000001D
/// (AMD), which describe each cache as ways x partitions x line size x sets.
#[cfg(target_arch = "x86_64")]
// `cpuid` became a safe intrinsic after this crate's minimum Rust version.
#[allow(unused_unsafe)]
fn from_cpuid() -> Option<usize> {
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
            let (kind, level) = (r.eax & 0x1f, (r.eax >> 5) & 0x7);
            if kind == 0 {
                break;
            }
            if level == 2 && kind != 2 {
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
fn from_cpuid() -> Option<usize> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::microkernel::PORTABLE;

    #[test]
    fn sizes_parse_as_linux_writes_them() {
        assert_eq!(parse_size("2048K"), Some(2 << 20));
        assert_eq!(parse_size("1M"), Some(1 << 20));
        assert_eq!(parse_size("512"), Some(512));
        assert_eq!(parse_size("12 Q"), None);
    }

    #[test]
    fn a_large_l2_keeps_b_in_it_and_a_small_one_keeps_the_kernels_blocking() {
        assert_eq!(block_shape_for(&PORTABLE, Some(2 << 20)), (256, 1024));
        assert_eq!(block_shape_for(&PORTABLE, Some(4 << 20)), (256, 2048));
        for small in [None, Some(1 << 20), Some(1280 << 10)] {
            assert_eq!(block_shape_for(&PORTABLE, small), (PORTABLE.kc, PORTABLE.nc));
        }
    }

    #[test]
    fn what_this_cpu_reports_is_a_plausible_l2() {
        // A hypervisor may hide the caches from both sources; what is reported must be sane.
        match (from_sysfs(), from_cpuid()) {
            (None, None) => eprintln!("this CPU reports no L2 size: the L3 blocking applies"),
            (sysfs, cpuid) => {
                for bytes in [sysfs, cpuid].into_iter().flatten() {
                    assert!((128 << 10..=64 << 20).contains(&bytes), "L2 of {bytes} bytes");
                }
            }
        }
    }
}
