//! GPU timing for the benchmarks: CUDA events around queued work, and an L2 flush between
//! replays so that each one starts cold, as a GEMM inside an application would.

use cudarc::driver::CudaSlice;
use cudarc::driver::sys::CUevent_flags;
use sgemm::{Error, Gpu, Result};

/// Runs `work` (which queues GPU work on `gpu`'s stream) between two CUDA events and returns
/// the GPU time between them, in milliseconds.
pub fn time_ms(gpu: &Gpu, work: impl FnOnce() -> Result<()>) -> Result<f32> {
    let failed = |during| move |source| Error::Cuda { during, source };
    let flags = Some(CUevent_flags::CU_EVENT_DEFAULT);
    let start = gpu.stream().record_event(flags).map_err(failed("recording an event"))?;
    work()?;
    let end = gpu.stream().record_event(flags).map_err(failed("recording an event"))?;
    end.synchronize().map_err(failed("waiting for an event"))?;
    start.elapsed_ms(&end).map_err(failed("reading an event time"))
}

/// A device buffer twice the size of the L2 cache: writing it evicts every line a previous
/// GEMM left in L2.
pub struct L2Flush(CudaSlice<u8>);

impl L2Flush {
    /// Allocates the buffer on `gpu`.
    pub fn new(gpu: &Gpu) -> Result<Self> {
        let bytes = 2 * gpu.info().l2_bytes.max(1 << 20);
        let buffer = gpu.stream().alloc_zeros::<u8>(bytes).map_err(|_| Error::OutOfDeviceMemory { bytes })?;
        Ok(Self(buffer))
    }

    /// Queues a write of the whole buffer (`cuMemsetD8Async`) on `gpu`'s stream.
    pub fn flush(&mut self, gpu: &Gpu) -> Result<()> {
        gpu.stream()
            .memset_zeros(&mut self.0)
            .map_err(|source| Error::Cuda { during: "flushing the L2 cache", source })
    }
}
