//! SGEMM kernels for NVIDIA GPUs, written in Rust and compiled to PTX.
//!
//! One module per step of the optimization ladder, each opening with what it adds over the
//! step before. Every kernel computes `C = alpha * A * B + beta * C` on row-major matrices
//! with leading dimensions, for any `M`, `N`, `K` (edges are guarded, never assumed away), and
//! reads `C` only when `beta != 0`.
//!
//! The crate compiles for two kinds of targets:
//! - for `nvptx64-nvidia-cuda` (by `cargo xtask build-ptx`, once per shipped module: sm_80 and
//!   sm_90a), where it is `#![no_std]` and the `extern "ptx-kernel"` functions and the [`ptx`]
//!   instruction wrappers exist; a kernel that needs one architecture's instructions is
//!   compiled into that module only ([`KernelSpec::arch`]: `warpgroup`'s `wgmma` is sm_90a's);
//! - for the host, where only the launch geometry ([`launch`]) and the kernel registry
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

pub mod launch;

#[cfg(target_arch = "nvptx64")]
mod device;
#[cfg(target_arch = "nvptx64")]
pub mod ptx;

pub mod async_copy;
pub mod blocktiling_1d;
pub mod blocktiling_2d;
pub mod coalesced;
pub mod double_buffering;
pub mod naive;
pub mod pad;
pub mod pipelined;
pub mod scale;
pub mod scaling;
pub mod smem_tiled;
pub mod split_k;
pub mod tensor_core;
pub mod transpose;
pub mod vectorized;
pub mod warp_tile;
pub mod warpgroup;
pub mod wide_tile;

pub use launch::KernelSpec;

/// Every GEMM kernel, in ladder order. The host's registry, the CLI, the tests and the
/// benchmarks iterate this list: a new kernel is one module plus one row here.
pub const GEMM_KERNELS: &[KernelSpec] = &[
    naive::SPEC,
    coalesced::SPEC,
    smem_tiled::SPEC,
    blocktiling_1d::SPEC,
    blocktiling_2d::SPEC,
    vectorized::SPEC,
    double_buffering::SPEC,
    async_copy::SPEC,
    split_k::SPEC,
    wide_tile::SPEC,
    pipelined::SPEC,
    tensor_core::SPEC,
    warpgroup::SPEC,
];
