//! SGEMM kernels for NVIDIA GPUs, written in Rust and compiled to PTX.
//!
//! Four groups of modules: [`infra`] (launch geometry, PTX wrappers, device helpers),
//! [`production`] (the kernels the host chooses), [`helpers`] (scale, transpose, pad) and the
//! [`ladder`] of optimization steps, one module per step. Every GEMM kernel computes
//! `C = alpha * A * B + beta * C` on row-major matrices with leading dimensions, for any `M`,
//! `N`, `K` (edges are guarded, never assumed away), and reads `C` only when `beta != 0`.
//!
//! The crate compiles for two kinds of targets:
//! - for `nvptx64-nvidia-cuda` (by `cargo xtask build-ptx`, once per module and architecture:
//!   production and ladder, sm_80 and sm_90a), where it is `#![no_std]` and the
//!   `extern "ptx-kernel"` functions and the `ptx` instruction wrappers exist; a kernel that
//!   needs one architecture's instructions is compiled into that architecture's modules only
//!   ([`KernelSpec::arch`]: `warpgroup`'s `wgmma` is sm_90a's);
//! - for the host, where only the launch geometry ([`infra::launch`]) and the kernel registry
//!   ([`GEMM_KERNELS`]) exist, so the host launches each kernel with the very constants the
//!   device code was compiled with.
#![cfg_attr(target_arch = "nvptx64", no_std)]
#![cfg_attr(
    target_arch = "nvptx64",
    feature(
        abi_ptx,
        asm_experimental_arch,
        stdarch_nvptx,
        core_intrinsics,
        gpu_intrinsics,
        gpu_launch_sized_workgroup_mem,
        stmt_expr_attributes
    )
)]
#![cfg_attr(target_arch = "nvptx64", allow(internal_features))]
#![cfg_attr(target_arch = "nvptx64", allow(dead_code, unused_imports))]
// (Each PTX module holds one group's entry points: the device code only the other group
// calls is compiled, found unused and dropped.)

/// What every kernel builds on: the launch geometry shared with the host, the PTX instruction
/// wrappers and the device-side helpers.
pub mod infra {
    #[cfg(target_arch = "nvptx64")]
    pub(crate) mod device;
    pub mod launch;
    pub mod params;
    #[cfg(target_arch = "nvptx64")]
    pub mod ptx;
}

/// The kernels the precision policies choose: `split_k` (f32 FMAs), `specialized` (3xTF32 on
/// Hopper's `wgmma`, warp-specialized, over the loops of `warpgroup`, which is selectable by
/// name; with the exact `scaling` that keeps it accurate over the whole f32 range, run only
/// where the `window` check finds data that needs it),
/// `small_tile` (64 x 64 tiles for products too small for the others' 128 x 128) and
/// `tiny_tile` (32 x 32, for batches of small members that leave SMs idle even so), `vector`
/// (matrix-vector products) and `few_rows` (at most 8 rows of `C`), all four f32 FMAs.
pub mod production {
    pub mod few_rows;
    pub mod rank_k;
    pub mod scaling;
    pub mod small_tile;
    pub mod specialized;
    pub mod split_k;
    pub mod tiny_tile;
    pub mod vector;
    pub mod warpgroup;
    pub mod window;
}

/// The non-GEMM kernels the host runs around a GEMM: `C = beta C` (`scale`), copies of
/// transposed operands (`transpose`) and of operands padded to 16-byte rows (`pad`).
pub mod helpers {
    pub mod pad;
    pub mod scale;
    pub mod transpose;
}

/// The optimization ladder, one module per step from the naive kernel up, each opening with
/// what it adds over the step before; the production kernels are its last steps. Loaded by
/// the host only when one of them is named. What each step measured is in
/// `docs/performance-notes.md`.
pub mod ladder {
    pub mod async_copy;
    pub mod blocktiling_1d;
    pub mod blocktiling_2d;
    pub mod coalesced;
    pub mod double_buffering;
    pub mod naive;
    pub mod pipelined;
    pub mod smem_tiled;
    pub mod tensor_core;
    pub mod vectorized;
    pub mod warp_tile;
    pub mod wide_tile;
}

pub use infra::launch::{KernelSpec, Module, Padding, Shapes};

/// Every GEMM kernel, in ladder order. The host's registry, the CLI, the tests and the
/// benchmarks iterate this list: a new kernel is one module plus one row here.
pub const GEMM_KERNELS: &[KernelSpec] = &[
    ladder::naive::SPEC,
    ladder::coalesced::SPEC,
    ladder::smem_tiled::SPEC,
    ladder::blocktiling_1d::SPEC,
    ladder::blocktiling_2d::SPEC,
    ladder::vectorized::SPEC,
    ladder::double_buffering::SPEC,
    ladder::async_copy::SPEC,
    production::split_k::SPEC,
    production::small_tile::SPEC,
    production::tiny_tile::SPEC,
    production::rank_k::SPEC,
    ladder::wide_tile::SPEC,
    ladder::pipelined::SPEC,
    ladder::tensor_core::SPEC,
    production::warpgroup::SPEC,
    production::specialized::SPEC,
];

/// The GEMM kernels the host chooses by shape and layout but that are not picked by name: the
/// matrix-vector kernel and its variants for columns, `few_rows` and its tall and
/// column-major-`B` variants, and the variants of `small_tile`, `tiny_tile` and `split_k` that
/// read column-major operands. They take [`GEMM_KERNELS`]' parameters and launch conventions.
pub const GEMM_VARIANTS: &[KernelSpec] = &[
    production::vector::SPEC,
    production::vector::COLUMN_SPEC,
    production::vector::NARROW_SPEC,
    production::vector::STAGED_SPEC,
    production::few_rows::SPEC,
    production::few_rows::TALL_SPEC,
    production::few_rows::NT_SPEC,
    production::few_rows::NT_TALL_SPEC,
    production::small_tile::TN_SPEC,
    production::small_tile::NT_SPEC,
    production::small_tile::TT_SPEC,
    production::tiny_tile::TN_SPEC,
    production::tiny_tile::NT_SPEC,
    production::tiny_tile::TT_SPEC,
    production::split_k::TN_SPEC,
    production::split_k::NT_SPEC,
    production::split_k::TT_SPEC,
];
