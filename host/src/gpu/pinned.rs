//! Page-locking a caller's host memory for the span of one call, so that its copies to and
//! from the device are direct DMA at the bus's rate instead of staged through the driver's
//! pinned buffers.
//!
//! Registration has a cost of its own (the driver pins every page), so only large slices are
//! registered; and it can fail (memory already registered, by another thread's call on the same
//! data or by the caller; a read-only mapping): then the copy simply goes the pageable way.

use std::ffi::c_void;

use cudarc::driver::CudaContext;
use cudarc::driver::sys::{self, CUresult};

/// Slices smaller than this are copied pageable: registering them costs more than it saves.
const MIN_BYTES: usize = 4 << 20;

/// A registered host range, unregistered on drop.
pub(super) struct Pinned {
    ptr: *mut c_void,
}

impl Pinned {
    /// Registers `data` with the driver of `ctx` (which must be the current context's device),
    /// or `None` when it is small or the driver refuses.
    pub(super) fn new(ctx: &CudaContext, data: &[f32]) -> Option<Self> {
        let bytes = std::mem::size_of_val(data);
        if bytes < MIN_BYTES || ctx.bind_to_thread().is_err() {
            return None;
        }
        let ptr = data.as_ptr().cast_mut().cast::<c_void>();
        // SAFETY: `data` is a live allocation of `bytes` bytes for the guard's lifetime (the
        // caller keeps the borrow); registration does not change its contents. The flags 0:
        // plain page-locking, usable by the driver's copies on this context.
        let status = unsafe { sys::cuMemHostRegister_v2(ptr, bytes, 0) };
        (status == CUresult::CUDA_SUCCESS).then_some(Self { ptr })
    }
}

impl Drop for Pinned {
    fn drop(&mut self) {
        // SAFETY: `ptr` was registered by `new`; every copy that used it has completed (the
        // calls synchronize before their guards drop).
        unsafe { sys::cuMemHostUnregister(self.ptr) };
    }
}
