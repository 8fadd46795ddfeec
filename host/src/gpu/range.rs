//! The range check before a kernel that splits its operands into TF32 parts
//! (`sgemm_kernels::production::range_check`): one pass over the operands the kernel reads,
//! whose verdict lets the kernel skip scaling on data that does not need it.

use cudarc::driver::{CudaSlice, CudaView, DevicePtr};
use sgemm_kernels::production::range_check::RangeParams;

use super::{Gpu, alloc_error, launch_config, to_u32};
use crate::{Error, Result};

/// A strided batch of row-major matrices as a kernel reads them: the buffer from the first
/// member on, `rows x cols` with leading dimension `ld`, members `step` elements apart.
pub(super) struct Operand<'a> {
    pub buf: CudaView<'a, f32>,
    pub rows: usize,
    pub cols: usize,
    pub ld: usize,
    pub step: usize,
}

impl Gpu {
    /// Queues the range check of `batch` members of each operand (one member where its step is
    /// 0) and returns the verdict: a device `u32`, zero unless an element lies outside the
    /// window (`range_check::in_window`), set before any later work on the stream runs.
    pub(super) fn check_range(&self, batch: usize, operands: [Operand; 2]) -> Result<CudaSlice<u32>> {
        let stream = &self.loaded.stream;
        let verdict = stream.alloc_zeros::<u32>(1).map_err(alloc_error(4))?;
        let (address, record) = verdict.device_ptr(stream);
        let check = &self.loaded.range_check;
        for x in operands {
            let [rows, cols, ld] = to_u32([x.rows, x.cols, x.ld], (x.rows, x.cols, 0), "range_check")?;
            let members = if x.step == 0 { 1 } else { batch };
            self.launch_members(&check.spec, members, rows, |z0, members, r0, rows| {
                let mut params = RangeParams {
                    rows,
                    cols,
                    x: x.buf.slice(z0 * x.step + r0 as usize * x.ld..),
                    ld,
                    step: x.step as u64,
                    verdict: address,
                };
                // SAFETY: from member z0 and row r0 on, each member holds `rows x cols` with `ld`
                // (the operand's span was checked, or it is a scratch copy of that shape); the
                // verdict is a live device u32 of this stream; the kernel's own geometry.
                let config = launch_config(&check.spec, rows, cols, members);
                unsafe { self.launch(&check.function, config, &mut params) }
                    .map_err(Error::cuda("launching range_check"))
            })?;
        }
        drop(record);
        Ok(verdict)
    }
}
