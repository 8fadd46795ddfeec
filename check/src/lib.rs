//! The test kit of the `sgemm` crate: the f64 reference every backend is checked against
//! ([`reference`]), the correctness suite of shapes, transposes, layouts and rogue padding
//! ([`suite`]), and the suite over magnitudes across the whole `f32` range ([`magnitudes`]).
//! The workspace's integration tests and the `gemm selftest` command run them; the library
//! itself does not depend on this crate.

pub mod batch;
pub mod magnitudes;
pub mod reference;
pub mod suite;
