//! Launch geometry shared by the device code and the host launcher.
//!
//! Convention for every GEMM kernel: one thread block computes one `tile_m x tile_n` tile of
//! `C`; `blockIdx.x` walks the tile columns (along `N`) and `blockIdx.y` the tile rows (along
//! `M`). Every kernel takes the same parameters, in BLAS order:
//! `(m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)` with `u32` sizes, `f32` scalars and
//! row-major `f32` matrices (`lda >= k`, `ldb >= n`, `ldc >= n`).

/// The largest `gridDim.y` CUDA allows (`gridDim.x` may reach `2^31 - 1`).
pub const MAX_GRID_Y: u32 = 65_535;

/// What the host needs to know to launch one kernel, defined next to its device code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelSpec {
    /// The name users pick it by (`gemm --kernel NAME`).
    pub name: &'static str,
    /// The PTX entry point; it loads with scalar instructions, so any pointer and leading
    /// dimension works.
    pub entry: &'static str,
    /// The entry point of the same kernel with 16-byte (`.v4`) global loads of `A`, and of `B`
    /// when [`vec4_b`](Self::vec4_b): valid only when the pointers are 16-byte aligned and
    /// `lda` and `k` (and `ldb` and `n` for `B`) are multiples of 4.
    pub vec4_entry: Option<&'static str>,
    /// Whether [`vec4_entry`](Self::vec4_entry) loads `B`'s rows 16 bytes at a time too (a
    /// kernel that reads `B` as a vector, 4 bytes at a time, does not).
    pub vec4_b: bool,
    /// One line: the technique this kernel adds.
    pub summary: &'static str,
    /// Threads per block, `(x, y)`.
    pub block: (u32, u32),
    /// Rows and columns of `C` computed by one block.
    pub tile: (u32, u32),
    /// Dynamic shared memory per block, in bytes.
    pub smem_bytes: u32,
    /// Blocks that must fit on one SM at once (0: no requirement). `cargo xtask build-ptx`
    /// writes it into the PTX as `.minnctapersm`, next to `.maxntid` from [`block`](Self::block),
    /// and `ptxas` then caps the registers per thread to make it so (CUDA's `__launch_bounds__`).
    pub min_blocks_per_sm: u32,
    /// The most members of a batch one block computes in turn (1: one member per block,
    /// `gridDim.z` = the members). A kernel that takes more carries its pipeline from one
    /// member's tile to the next, so one member's epilogue overlaps the next one's first
    /// copies; the host picks the blocks along `z` ([`params`](crate::infra::params#batches)).
    pub members_per_block: u32,
    /// Whether the host may split `K` across `blockIdx.z` for this kernel when its tiles do not
    /// fill the GPU ([`split_k`](crate::production::split_k)), and if so the shallowest slice it
    /// gives a block. The K slices are launched as a batch (slice depth as `k`), each writing
    /// its partial product to a workspace that `sgemm_split_k_reduce` then adds in order.
    pub k_slices: Option<u32>,
    /// When the host copies operands that the 16-byte entry cannot read as they are into
    /// zero-padded buffers that it can (rows a multiple of 4 floats long, `k` rounded up to a
    /// multiple of 4, the added columns of `A` and rows of `B` zero), instead of launching the
    /// 4-byte entry on them.
    pub padding: Padding,
    /// The one PTX module the kernel is in, when it uses instructions of that architecture
    /// only (`wgmma` is sm_90a's); `None`: every module.
    pub arch: Option<&'static str>,
    /// The PTX module the kernel's entries are compiled into.
    pub module: Module,
    /// The shapes of `C` (row-major, as the kernels see it) the kernel computes.
    pub shapes: Shapes,
    /// Whether the kernel reads `A` column-major (element `(i, p)` at `a[p * lda + i]`: `A^T`
    /// stored row-major) rather than row-major: the host passes it a column-major `A` as it
    /// lies, and never a row-major one. Its 16-byte entry then reads `A`'s columns 16 bytes at a
    /// time, so its conditions are on `m` (a column's length) where a row-major `A`'s are on `k`.
    pub reads_a_transposed: bool,
    /// Whether the kernel reads `B` column-major (element `(p, j)` at `b[j * ldb + p]`: `B^T`
    /// stored row-major) rather than row-major: the host passes it a column-major `B` as it
    /// lies, and never a row-major one. Its 16-byte entry's conditions on `B` are then on `k`
    /// (a column's length) where a row-major `B`'s are on `n`.
    pub reads_b_transposed: bool,
}

/// When the host pads operands for a kernel's 16-byte entry ([`KernelSpec::padding`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Padding {
    /// Never: the scalar entry takes any operand the 16-byte entry cannot.
    Never,
    /// Always: [`entry`](KernelSpec::entry) itself loads 16 bytes at a time (there is no
    /// 4-byte variant).
    Always,
    /// When the product has at least `fixed + per_copied x copied` multiply-adds (`m n k`),
    /// `copied` being the elements the padding would copy: from there on the copies (a launch,
    /// worth `fixed` multiply-adds of what the 4-byte entry loses, and 8 bytes of traffic an
    /// element, worth `per_copied`) cost less than the 4-byte entry's slower loop would over
    /// the whole product.
    Above { fixed: u64, per_copied: u32 },
    /// Never, and [`entry`](KernelSpec::entry) itself loads 16 bytes at a time (there is no
    /// 4-byte variant): the host launches the kernel only on operands whose lines it reads 16
    /// bytes at a time as they lie (16-byte aligned, leading dimensions and the lengths of the
    /// lines read multiples of 4), and gives others to a kernel that reads copies.
    AsTheyLie,
}

/// The shapes of `C` a kernel computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shapes {
    /// Any `m x n`.
    Any,
    /// One row or one column (`m == 1` or `n == 1`): matrix-vector products.
    Vector,
    /// At most this many rows.
    FewRows(usize),
}

impl Shapes {
    /// Whether an `m x n` `C` is one of these shapes.
    pub const fn fits(self, m: usize, n: usize) -> bool {
        match self {
            Shapes::Any => true,
            Shapes::Vector => m == 1 || n == 1,
            Shapes::FewRows(rows) => m <= rows,
        }
    }
}

/// The PTX modules of an architecture. The host loads the production module when it opens a
/// device (as SASS for sm_80 and sm_90a, so the driver has nothing to compile) and the ladder
/// only when one of its kernels is asked for by name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Module {
    /// The kernels the precision policies choose and the helpers every call may need
    /// (`scale_c`, `transpose`, `pad`, the split-K reduction).
    Production,
    /// The steps of the optimization ladder, kept for study and comparison.
    Ladder,
}

impl Module {
    /// Every module, in the order `cargo xtask build-ptx` writes them.
    pub const ALL: [Module; 2] = [Module::Production, Module::Ladder];

    /// The module's name in file names (`host/ptx/<name>-<arch>.ptx`).
    pub const fn name(self) -> &'static str {
        match self {
            Module::Production => "production",
            Module::Ladder => "ladder",
        }
    }
}

impl KernelSpec {
    /// The variant of this kernel named `name` that reads `A` column-major where `a_columns`,
    /// `B` where `b_columns` ([`reads_a_transposed`](Self::reads_a_transposed),
    /// [`reads_b_transposed`](Self::reads_b_transposed)), the same otherwise, with one entry,
    /// `entry`, of 16-byte loads, which the host launches only on operands it reads as they lie
    /// ([`Padding::AsTheyLie`]).
    pub const fn reading_columns(
        self,
        (name, entry): (&'static str, &'static str),
        a_columns: bool,
        b_columns: bool,
    ) -> Self {
        Self {
            name,
            entry,
            vec4_entry: None,
            padding: Padding::AsTheyLie,
            reads_a_transposed: a_columns,
            reads_b_transposed: b_columns,
            ..self
        }
    }

    /// The launch of a helper kernel with one thread per element of an `m x n` matrix: blocks
    /// of 32 x 8 threads over 8 x 32 tiles, so a warp runs along a row (coalesced), no shared
    /// memory, no launch bounds.
    pub const fn elementwise(name: &'static str, entry: &'static str, summary: &'static str) -> Self {
        Self {
            name,
            entry,
            vec4_entry: None,
            vec4_b: true,
            summary,
            block: (32, 8),
            tile: (8, 32),
            smem_bytes: 0,
            min_blocks_per_sm: 0,
            members_per_block: 1,
            k_slices: None,
            padding: Padding::Never,
            arch: None,
            module: Module::Production,
            shapes: Shapes::Any,
            reads_a_transposed: false,
            reads_b_transposed: false,
        }
    }

    /// Whether the PTX module for `arch` (`sm_80`, `sm_90a`) has this kernel ([`arch`](Self::arch)).
    pub fn in_module(&self, arch: &str) -> bool {
        self.arch.is_none_or(|only| only == arch)
    }

    /// Threads per block.
    pub const fn threads(&self) -> u32 {
        self.block.0 * self.block.1
    }

    /// The grid covering an `m x n` matrix `C`: `(tiles along n, tiles along m, 1)`.
    pub const fn grid(&self, m: u32, n: u32) -> (u32, u32, u32) {
        (n.div_ceil(self.tile.1), m.div_ceil(self.tile.0), 1)
    }

    /// The most rows of `C` one launch covers (`gridDim.y <= 65535` tiles); the host splits
    /// taller matrices into several launches.
    pub const fn max_rows_per_launch(&self) -> u32 {
        MAX_GRID_Y * self.tile.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::GEMM_KERNELS;

    #[test]
    fn grid_covers_every_element_with_at_most_one_partial_tile() {
        for spec in GEMM_KERNELS {
            for (m, n) in [(1, 1), (7, 5), (32, 32), (33, 31), (1000, 4097)] {
                let (gx, gy, gz) = spec.grid(m, n);
                assert_eq!(gz, 1);
                assert!(gx * spec.tile.1 >= n && (gx - 1) * spec.tile.1 < n, "{spec:?}");
                assert!(gy * spec.tile.0 >= m && (gy - 1) * spec.tile.0 < m, "{spec:?}");
            }
        }
    }

    #[test]
    fn registry_names_and_entries_are_unique() {
        for (i, a) in GEMM_KERNELS.iter().enumerate() {
            for b in &GEMM_KERNELS[i + 1..] {
                assert_ne!(a.name, b.name);
                assert_ne!(a.entry, b.entry);
                assert!(a.vec4_entry.is_none() || a.vec4_entry != b.vec4_entry);
            }
        }
    }

    #[test]
    fn one_launch_covers_at_most_the_grid_limit() {
        for spec in GEMM_KERNELS {
            let rows = spec.max_rows_per_launch();
            assert_eq!(spec.grid(rows, 1).1, MAX_GRID_Y);
            assert_eq!(spec.grid(rows + 1, 1).1, MAX_GRID_Y + 1);
        }
    }
}
