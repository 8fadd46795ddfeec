//! Each kernel's parameter list, declared once for the device and the host.
//!
//! [`kernel_params!`] turns one declaration into
//! - a struct generic over how the matrices travel (`In` for the ones a kernel reads, `Out`
//!   for the one it writes): raw pointers on the device, cudarc views on the host;
//! - [`push`](GemmParams::push), which hands the fields to a [`ParamSink`] in the declared
//!   order (the host builds its launch with it);
//! - on the device, a macro that declares a PTX entry point with exactly that parameter list
//!   and passes the parameters on as the struct.
//!
//! So the order and the types of a kernel's parameters are written once, and the host cannot
//! push them in another order than the entry point takes them.
//!
//! # Batches
//!
//! The GEMM kernels and the helpers the host runs around them compute a whole batch in one
//! launch, one member per `blockIdx.z`, so a single product is the batch of one. Their
//! parameter lists end with a *step* per matrix (`a_step`, ...): member `z`'s matrix starts
//! `z * step` elements after the one the matrix parameter points to (a strided batch; a step
//! of 0 gives every member the same matrix). The last parameter, `members`, counts the batch's
//! members: a kernel whose launch configuration allows a block several members in turn
//! ([`KernelSpec::members_per_block`](crate::infra::launch::KernelSpec::members_per_block)) is
//! launched with fewer blocks along `z` than members, and the block at `blockIdx.z = z` computes
//! members `z`, `z + gridDim.z`, ... below `members`; every other kernel is launched with
//! `gridDim.z = members`. [`pad`](crate::helpers::pad) also takes a `list`
//! instead: the device address of a table of member addresses, with which the host gathers a
//! batch of matrices anywhere in memory into a strided one and scatters results back (the
//! GEMM kernels themselves take steps only; `docs/performance-notes.md`, Batches, says why).
//!
//! Split-K uses the same convention: its K slices are the members of a batch whose steps
//! move along `K` ([`split_k`](crate::production::split_k)).

/// Receives a kernel's parameters in order: what a launch needs from them.
pub trait ParamSink<'p> {
    /// How a matrix the kernel reads is passed.
    type In;
    /// How the matrix the kernel writes is passed.
    type Out;
    /// A `u32` parameter.
    fn u32(&mut self, value: &'p u32);
    /// A `u64` parameter (a batch step, a device address).
    fn u64(&mut self, value: &'p u64);
    /// An `f32` parameter.
    fn f32(&mut self, value: &'p f32);
    /// A matrix the kernel reads.
    fn input(&mut self, value: &'p Self::In);
    /// The matrix the kernel writes.
    fn output(&mut self, value: &'p mut Self::Out);
}

/// A kernel's parameters, which hand themselves to a [`ParamSink`] in the entry point's order.
pub trait PushParams<'p, S: ParamSink<'p>> {
    /// Hands every parameter to `sink`, in the entry point's order.
    fn push(&'p mut self, sink: &mut S);
}

/// Declares a kernel's parameter list (see the [module docs](self)) as a struct generic over
/// `In`, `Out` or both, with fields `name: u32`, `name: u64`, `name: f32`, `name: In` (a matrix the kernel
/// reads, `*const f32` on the device) or `name: Out` (the one it writes, `*mut f32`), in the
/// entry point's order. `$entry` names the device-side macro
/// that declares an entry point with this list: `$entry!(#[attrs] entry_name => body)`, where
/// `body` is an `unsafe fn` of the struct with raw pointers, whose safety contract becomes the
/// entry's; the struct must be in scope where `$entry!` is used.
macro_rules! kernel_params {
    (
        $d:tt $entry:ident,
        $(#[$doc:meta])* $name:ident<$($g:ident),+> { $($field:ident: $kind:ident),* $(,)? }
    ) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug)]
        pub struct $name<$($g),+> {
            $(#[allow(missing_docs)] pub $field: $kind,)*
        }

        impl<'p, $($g,)+ S: $crate::infra::params::ParamSink<'p, $($g = $g),+>>
            $crate::infra::params::PushParams<'p, S> for $name<$($g),+>
        {
            fn push(&'p mut self, sink: &mut S) {
                let Self { $($field),* } = self;
                $($crate::infra::params::kernel_params!(@push sink $field $kind);)*
            }
        }

        // (Unused in the module that does not hold this kernel's entry point.)
        #[cfg(target_arch = "nvptx64")]
        #[allow(unused_macros)]
        macro_rules! $entry {
            ($d(#[$d attr:meta])* $d entry_name:ident => $d body:expr) => {
                $d(#[$d attr])*
                #[unsafe(no_mangle)]
                #[allow(clippy::too_many_arguments)]
                pub unsafe extern "ptx-kernel" fn $d entry_name(
                    $($field: $crate::infra::params::kernel_params!(@device $kind)),*
                ) {
                    let params: $name<$($crate::infra::params::kernel_params!(@device $g)),+> =
                        $name { $($field),* };
                    // SAFETY: the entry's contract is the body's.
                    unsafe { $d body(params) }
                }
            };
        }
        #[cfg(target_arch = "nvptx64")]
        #[allow(unused_imports)]
        pub(crate) use $entry;
    };
    (@device u32) => { u32 };
    (@device u64) => { u64 };
    (@device f32) => { f32 };
    (@device In) => { *const f32 };
    (@device Out) => { *mut f32 };
    (@push $sink:ident $field:ident u32) => { $sink.u32($field) };
    (@push $sink:ident $field:ident u64) => { $sink.u64($field) };
    (@push $sink:ident $field:ident f32) => { $sink.f32($field) };
    (@push $sink:ident $field:ident In) => { $sink.input($field) };
    (@push $sink:ident $field:ident Out) => { $sink.output($field) };
}
pub(crate) use kernel_params;

kernel_params! { $ gemm_params_entry,
    /// Every GEMM kernel's parameters: `C = alpha * A * B + beta * C` for each member of a
    /// batch (see [Batches](self#batches)) with a row-major `A` (`m x k`, `lda`), `B`
    /// (`k x n`, `ldb`) and `C` (`m x n`, `ldc`). Split-K launches pass a slice's depth as `k`
    /// (see [`split_k`](crate::production::split_k)).
    GemmParams<In, Out> {
        m: u32, n: u32, k: u32, alpha: f32, a: In, lda: u32, b: In, ldb: u32, beta: f32, c: Out, ldc: u32,
        a_step: u64, b_step: u64, c_step: u64, members: u32,
    }
}
