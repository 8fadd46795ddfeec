//! Device buffers kept from one call to the next: the split-K partials, the copies of operands
//! that a kernel cannot read as they are (padded to rows of a multiple of 4 floats, or
//! transposed), and the device copies of host operands.
//!
//! Why: a buffer allocated for one call and freed after it (`cuMemAllocAsync`, `cuMemFreeAsync`)
//! returns to the device's default memory pool, which hands its unused memory back to the system
//! at the next synchronization (a release threshold of 0, the default). The next call that needs
//! the buffer maps fresh memory for it, which costs time on the order of a small product. A
//! buffer kept here is allocated once and reused by every later call that fits in it, as cuBLAS
//! keeps its workspace. This crate does not change the process's pool, which other code may
//! rely on.
//!
//! Safety of the reuse: every use of a kept buffer is work queued on the one stream of the
//! handles that share it, so the next call's writes are ordered after this call's reads; the
//! lock is held while a call queues its work, so two threads do not hand out one buffer at once.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use cudarc::driver::{CudaSlice, CudaStream, DriverError};

/// A device buffer kept between calls: the largest asked for so far, up to `cap_bytes`.
pub(super) struct Kept {
    buf: Mutex<Option<CudaSlice<f32>>>,
    cap_bytes: usize,
}

/// A buffer of at least the length asked for, for one call: the kept one, locked until this is
/// dropped, or one too large to keep, freed (in stream order, after the work queued with it)
/// when this is dropped.
pub(super) enum Scratch<'a> {
    Kept(MutexGuard<'a, Option<CudaSlice<f32>>>),
    Fresh(CudaSlice<f32>),
}

impl Kept {
    /// An empty place for a buffer of at most `cap_bytes`.
    pub(super) const fn new(cap_bytes: usize) -> Self {
        Self { buf: Mutex::new(None), cap_bytes }
    }

    /// A buffer of at least `len` elements: the kept one when it is long enough, else a new one,
    /// kept in its place when it is at most `cap_bytes` (the old one is freed in stream order,
    /// after the work queued with it).
    ///
    /// # Safety
    /// The elements are uninitialized or hold an earlier call's values: the caller writes each
    /// one before reading it. Work using the buffer is queued on `stream`, the stream of every
    /// call that uses this `Kept`.
    pub(super) unsafe fn get(
        &self,
        stream: &Arc<CudaStream>,
        len: usize,
    ) -> Result<Scratch<'_>, DriverError> {
        let mut kept = self.buf.lock().unwrap_or_else(PoisonError::into_inner);
        if kept.as_ref().is_some_and(|buf| buf.len() >= len) {
            return Ok(Scratch::Kept(kept));
        }
        *kept = None;
        // SAFETY: the caller's contract.
        let buf = unsafe { stream.alloc::<f32>(len) }?;
        if len.saturating_mul(size_of::<f32>()) <= self.cap_bytes {
            *kept = Some(buf);
            Ok(Scratch::Kept(kept))
        } else {
            Ok(Scratch::Fresh(buf))
        }
    }
}

impl Scratch<'_> {
    /// The buffer.
    pub(super) fn buf(&self) -> &CudaSlice<f32> {
        match self {
            // `get` hands out the kept buffer only once it is there.
            Scratch::Kept(kept) => kept.as_ref().expect("a kept buffer is handed out filled"),
            Scratch::Fresh(buf) => buf,
        }
    }

    /// The buffer, to write.
    pub(super) fn buf_mut(&mut self) -> &mut CudaSlice<f32> {
        match self {
            Scratch::Kept(kept) => kept.as_mut().expect("a kept buffer is handed out filled"),
            Scratch::Fresh(buf) => buf,
        }
    }
}
