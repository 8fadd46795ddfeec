//! The test kit of the `sgemm` crate: the f64 reference every backend is checked against
//! ([`reference`]), the correctness suite of shapes, transposes, layouts and rogue padding
//! ([`suite`]), and the suite over magnitudes across the whole `f32` range ([`magnitudes`]).
//! The workspace's integration tests and the `gemm selftest` command run them; the library
//! itself does not depend on this crate.

pub mod batch;
pub mod magnitudes;
pub mod reference;
pub mod suite;

use std::io::Write;

use sgemm::{Error, Gpu};

/// The device for a GPU test, or `None` after saying on stderr that `test` is skipped because
/// there is no usable CUDA device (CI has none). Panics when a device is there but cannot be
/// used: that is a failure, not a skip.
pub fn gpu_or_skip(test: &str) -> Option<Gpu> {
    match Gpu::new(0) {
        Ok(gpu) => Some(gpu),
        Err(e @ (Error::NoGpu(_) | Error::UnsupportedGpu { .. })) => {
            // Straight to stderr: libtest captures `eprintln!` of passing tests, and a skip
            // must be visible in CI's log.
            let _ = writeln!(std::io::stderr(), "SKIPPED {test}: {e}");
            None
        }
        Err(e) => panic!("the GPU is there but unusable: {e}"),
    }
}
