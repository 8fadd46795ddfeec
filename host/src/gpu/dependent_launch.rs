//! Programmatic dependent launch (sm_90): a kernel queued behind another on one stream, whose
//! blocks the GPU sets up and starts while the kernel before it is still running.
//!
//! Two kernels in a row on a stream normally leave a gap between them: the second is launched
//! only once the first has completed. A launch with the attribute "programmatic stream
//! serialization" lifts that order; the second kernel's blocks may run early, and each waits
//! at `griddepcontrol.wait` until the first kernel has completed and its writes are visible.
//! The split-K reduction is such a kernel ([`split_k`](sgemm_kernels::production::split_k)):
//! the GEMM of the slices writes the partials, the reduction waits for them before it reads
//! one. So are the copy of `B` after the copy of `A`, and every production GEMM kernel after
//! the copies of its operands (transposed or padded) that a call makes: their entries wait
//! before anything else (what these save: `docs/performance-notes.md`).
//!
//! cudarc's launch builder has no launch attributes, so the launch goes through the driver's
//! `cuLaunchKernelEx` with the parameters collected here, matrices as device pointers taken
//! through cudarc (which orders them on the stream as its own launches do).

use std::ffi::c_void;
use std::marker::PhantomData;

use cudarc::driver::sys::{
    self, CUdeviceptr, CUlaunchAttribute, CUlaunchAttributeID, CUlaunchAttributeValue, CUlaunchConfig,
};
use cudarc::driver::{
    CudaFunction, CudaStream, CudaView, CudaViewMut, DevicePtr, DevicePtrMut, DriverError, LaunchConfig,
    SyncOnDrop,
};
use sgemm_kernels::infra::params::{ParamSink, PushParams};

/// One kernel parameter: a host value, or the `n`-th device pointer.
enum Param {
    Value(*const c_void),
    Pointer(usize),
}

/// A launch being built: the parameters in the entry point's order, and the device pointers of
/// its matrices (with cudarc's guards, which record the launch's use of each when dropped).
pub(super) struct RawParams<'p, 'v> {
    stream: &'p CudaStream,
    params: Vec<Param>,
    pointers: Vec<CUdeviceptr>,
    guards: Vec<SyncOnDrop<'p>>,
    _views: PhantomData<&'v ()>,
}

impl<'p> RawParams<'p, '_> {
    fn value<T>(&mut self, value: &'p T) {
        self.params.push(Param::Value((value as *const T).cast()));
    }

    fn pointer(&mut self, (pointer, guard): (CUdeviceptr, SyncOnDrop<'p>)) {
        self.params.push(Param::Pointer(self.pointers.len()));
        self.pointers.push(pointer);
        self.guards.push(guard);
    }
}

impl<'p, 'v: 'p> ParamSink<'p> for RawParams<'p, 'v> {
    type In = CudaView<'v, f32>;
    type Out = CudaViewMut<'v, f32>;

    fn u32(&mut self, value: &'p u32) {
        self.value(value);
    }

    fn u64(&mut self, value: &'p u64) {
        self.value(value);
    }

    fn f32(&mut self, value: &'p f32) {
        self.value(value);
    }

    fn input(&mut self, value: &'p CudaView<'v, f32>) {
        let pointer = value.device_ptr(self.stream);
        self.pointer(pointer);
    }

    fn output(&mut self, value: &'p mut CudaViewMut<'v, f32>) {
        let pointer = value.device_ptr_mut(self.stream);
        self.pointer(pointer);
    }
}

/// Queues `function` over `config` on `stream` with `params`, as a programmatic dependent launch
/// of the kernel queued before it.
///
/// # Safety
/// As a launch of `function` with `params` (the entry point they were declared for, every
/// matrix valid for its shape, the output apart from the inputs, `config` the kernel's
/// geometry), and besides: the device is sm_90 or newer, and `function` executes
/// `griddepcontrol.wait` before it reads anything the kernels before it on the stream write
/// and before it writes anything they read.
pub(super) unsafe fn launch<'p, 'v: 'p, P: PushParams<'p, RawParams<'p, 'v>>>(
    stream: &'p CudaStream,
    function: &CudaFunction,
    config: LaunchConfig,
    params: &'p mut P,
) -> Result<(), DriverError> {
    let mut raw = RawParams {
        stream,
        params: Vec::new(),
        pointers: Vec::new(),
        guards: Vec::new(),
        _views: PhantomData,
    };
    params.push(&mut raw);
    // Every pointer is in place: `pointers` no longer moves.
    let mut args: Vec<*mut c_void> = (raw.params.iter())
        .map(|p| match *p {
            Param::Value(value) => value.cast_mut(),
            Param::Pointer(i) => (&raw mut raw.pointers[i]).cast(),
        })
        .collect();
    let mut attribute = CUlaunchAttribute {
        id: CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION,
        pad: [0; 4],
        value: CUlaunchAttributeValue { programmaticStreamSerializationAllowed: 1 },
    };
    let (grid, block) = (config.grid_dim, config.block_dim);
    let launch = CUlaunchConfig {
        gridDimX: grid.0,
        gridDimY: grid.1,
        gridDimZ: grid.2,
        blockDimX: block.0,
        blockDimY: block.1,
        blockDimZ: block.2,
        sharedMemBytes: config.shared_mem_bytes,
        hStream: stream.cu_stream(),
        attrs: &raw mut attribute,
        numAttrs: 1,
    };
    // SAFETY: the caller's contract; `args` points at every parameter, each alive until the
    // call returns (the driver copies them).
    unsafe {
        sys::cuLaunchKernelEx(&launch, function.cu_function(), args.as_mut_ptr(), std::ptr::null_mut())
            .result()
    }
    // The guards record the launch's use of the matrices on the stream as they drop.
}
