//! The GPU backend: a handle that owns (or shares) the CUDA context and stream, and the
//! loaded kernel modules, created once and reused for every call.
//!
//! The kernels crate is built (`cargo xtask build-ptx`) into two modules per architecture and
//! embedded in the library (`host/ptx/`): the production module (the kernels the precision
//! policies choose and the helpers), as SASS for sm_80 and sm_90a and as PTX, and the ladder
//! (the optimization steps, PTX only). [`Gpu::new`] loads the production module's SASS, so
//! the driver compiles nothing; on an architecture without SASS here it loads the PTX, which
//! the driver compiles once and caches. The ladder loads the first time one of its kernels is
//! named. The driver itself is loaded at run time (cudarc's dynamic loading), so the library
//! builds and runs where there is no CUDA at all, and [`Gpu::new`] then says so as an error.

mod batched;
mod cost;
mod dependent_launch;
mod device_matrix;
mod kept;
mod pinned;

pub use device_matrix::{DeviceMatMut, DeviceMatRef, DeviceMatrix};

use std::marker::PhantomData;
use std::sync::{Arc, OnceLock};

use cudarc::driver::sys::{CUdevice_attribute, CUfunction_attribute, CUresult};
use cudarc::driver::{
    CudaContext, CudaFunction, CudaModule, CudaStream, CudaView, CudaViewMut, DeviceSlice, DriverError,
    LaunchArgs, LaunchConfig, PushKernelArg,
};
use cudarc::nvrtc::Ptx;
use sgemm_kernels::helpers::pad::{self, PadParams};
use sgemm_kernels::helpers::scale::{self, ScaleParams};
use sgemm_kernels::helpers::transpose::{self, TransposeParams};
use sgemm_kernels::infra::params::{GemmParams, ParamSink, PushParams};
use sgemm_kernels::production::split_k::{self, ReduceParams};
use sgemm_kernels::production::{few_rows, rank_k, small_tile, specialized, tiny_tile, vector, warpgroup};
use sgemm_kernels::{GEMM_KERNELS, KernelSpec, Module, Padding, Shapes};

use self::kept::{Kept, Scratch};
use crate::batch::Strided;
use crate::matrix::{Layout, MatMut, MatRef, check_shapes};
use crate::semantics::{
    View, Work, relaid, row_major_layouts, row_major_shape, vector_c_layout, with_row_major_c, work,
};
use crate::{Error, Precision, Result};

/// The embedded kernel modules of one architecture.
struct Images {
    arch: &'static str,
    /// The production module as SASS, where the device runs this architecture's SASS.
    production_sass: Option<&'static [u8]>,
    production_ptx: &'static str,
    ladder_ptx: &'static str,
}

/// The modules for a device of compute capability `(major, minor)`. sm_90a's run on 9.0 only
/// (H100, H200; `wgmma` is not forward-compatible); every other device from 8.0 on gets
/// sm_80's: as SASS on 8.x (binary compatible within the major version), as PTX that the
/// driver compiles on newer majors.
fn images_for(major: i32, minor: i32) -> Option<Images> {
    let sm_80 = |sass: bool| Images {
        arch: "sm_80",
        production_sass: sass.then_some(include_bytes!("../../ptx/production-sm_80.cubin").as_slice()),
        production_ptx: include_str!("../../ptx/production-sm_80.ptx"),
        ladder_ptx: include_str!("../../ptx/ladder-sm_80.ptx"),
    };
    match (major, minor) {
        (9, 0) => Some(Images {
            arch: "sm_90a",
            production_sass: Some(include_bytes!("../../ptx/production-sm_90a.cubin")),
            production_ptx: include_str!("../../ptx/production-sm_90a.ptx"),
            ladder_ptx: include_str!("../../ptx/ladder-sm_90a.ptx"),
        }),
        (8, _) => Some(sm_80(true)),
        (9.., _) => Some(sm_80(false)),
        _ => None,
    }
}

/// Static facts about the device a [`Gpu`] runs on.
#[derive(Clone, Debug)]
pub struct DeviceInfo {
    /// The marketing name, e.g. `NVIDIA H200`.
    pub name: String,
    /// Compute capability `(major, minor)`.
    pub compute_capability: (i32, i32),
    /// Number of streaming multiprocessors.
    pub sm_count: u32,
    /// L2 cache size in bytes.
    pub l2_bytes: usize,
    /// The architecture of the kernel modules that were loaded (`sm_80`, `sm_90a`).
    pub module_arch: &'static str,
    /// Whether the production module was loaded as SASS (no compilation by the driver), rather
    /// than as PTX.
    pub sass: bool,
}

/// A GEMM kernel loaded from the module, with the launch configuration it was compiled with.
#[derive(Clone, Debug)]
pub struct GpuKernel {
    /// Name, entry point, geometry.
    pub spec: KernelSpec,
    function: CudaFunction,
    /// The 16-byte-load variant, when the kernel has one.
    vec4: Option<CudaFunction>,
    /// Blocks of it one SM holds at once, as the driver reports for its registers, shared
    /// memory and block size (the fewer of its two entries).
    blocks_per_sm: u32,
    /// Its coefficients in the tile kernels' cost model, if it is one of them.
    cost: Option<&'static cost::Cost>,
}

impl GpuKernel {
    /// Blocks of this kernel one SM holds at once (the driver's occupancy calculation, at
    /// least 1): with the SM count, the resident blocks a grid must reach to fill the GPU.
    pub fn blocks_per_sm(&self) -> u32 {
        self.blocks_per_sm
    }

    /// The lengths of the lines the kernel reads `A` and `B` in, for an `m x n x k` product
    /// (`n`: the columns of `B` as given, which a padded copy rounds up to 4): rows of a
    /// row-major operand (`k` for `A`, `n` for `B`), columns of a column-major one (`m` for
    /// `A`, `k` for `B`).
    fn lines(&self, (m, n, k): (usize, usize, usize)) -> (usize, usize) {
        let spec = &self.spec;
        (if spec.reads_a_transposed { m } else { k }, if spec.reads_b_transposed { k } else { n })
    }

    /// The entry to launch on an `m x n x k` product: the 16-byte-load variant when `A` and,
    /// if that entry loads it wide ([`KernelSpec::vec4_b`]), `B` allow it (they start 16-byte
    /// aligned, and their leading dimensions and the lengths of the lines the kernel reads
    /// them in, [`lines`](Self::lines), are multiples of 4, so every line starts 16-byte
    /// aligned and no vector straddles a line's end), the scalar-load entry otherwise (for a
    /// kernel of one entry, that one).
    fn function_for(
        &self,
        aligned: bool,
        lda: usize,
        ldb: usize,
        shape: (usize, usize, usize),
    ) -> &CudaFunction {
        // A kernel of one 16-byte entry is given only operands it reads (`Gpu::reading`).
        debug_assert!(self.spec.padding != Padding::AsTheyLie || self.wide(aligned, lda, ldb, shape));
        match &self.vec4 {
            Some(vec4) if self.wide(aligned, lda, ldb, shape) => vec4,
            _ => &self.function,
        }
    }

    /// Whether an `m x n x k` launch loads 16 bytes at a time: a kernel with only 16-byte
    /// loads on copies it pads ([`Padding::Always`]), or one whose 16-byte entry the conditions
    /// of [`function_for`](Self::function_for) allow (for a kernel whose one entry loads 16
    /// bytes where they hold, [`Padding::AsTheyLie`], whether it can run at all).
    fn wide(&self, aligned: bool, lda: usize, ldb: usize, shape: (usize, usize, usize)) -> bool {
        let (a_line, b_line) = self.lines(shape);
        let wide_b = !self.spec.vec4_b || [ldb, b_line].iter().all(|x| x.is_multiple_of(4));
        let sixteen_bytes = self.vec4.is_some() || self.spec.padding == Padding::AsTheyLie;
        self.spec.padding == Padding::Always
            || (sixteen_bytes && aligned && [lda, a_line].iter().all(|x| x.is_multiple_of(4)) && wide_b)
    }
}

/// A CUDA device ready to run GEMMs, with the options its calls use (the [`Precision`], or a
/// kernel chosen by name). Cloning is cheap and shares the context, the stream and the loaded
/// kernels; [`with_precision`](Self::with_precision) and [`with_kernel`](Self::with_kernel)
/// set the options of one handle.
///
/// Products whose tiles alone cannot fill the GPU split `K` into a device workspace of
/// partials; operands a kernel cannot read as they are (transposed, or rows that are not a
/// multiple of 4 floats where padding pays) are copied first; calls on host memory copy their
/// operands to the device. The handles of one device keep these buffers from one call to the
/// next, as cuBLAS keeps its workspace, and free them with the last handle: up to 64 MiB of
/// partials, 128 MiB for each operand's copy, 64 MiB for each host operand's.
#[derive(Clone)]
pub struct Gpu {
    loaded: Arc<Loaded>,
    precision: Precision,
    /// A kernel chosen by name.
    kernel: Option<Chosen>,
    /// K slices chosen by the caller ([`with_k_slices`](Gpu::with_k_slices)).
    slices: Option<usize>,
}

/// What decides whether a kernel reads a call's operands as they lie: `batch` members of an
/// `m x n x k` shape (the row-major problem's), the leading dimensions of `A` and `B`, and
/// whether every line of each starts 16-byte aligned.
#[derive(Clone, Copy, Debug)]
struct Operands {
    batch: usize,
    shape: (usize, usize, usize),
    lds: (usize, usize),
    aligned: (bool, bool),
}

/// A tile kernel's variants that read a column-major `A` (`tn`), `B` (`nt`) or both (`tt`)
/// as they lie.
struct Columns {
    tn: GpuKernel,
    nt: GpuKernel,
    tt: GpuKernel,
}

impl Columns {
    /// The variant for `A` and `B` in these layouts, `None` for two row-major ones.
    fn reading(&self, (a, b): (Layout, Layout)) -> Option<&GpuKernel> {
        match (a, b) {
            (Layout::RowMajor, Layout::RowMajor) => None,
            (Layout::ColMajor, Layout::RowMajor) => Some(&self.tn),
            (Layout::RowMajor, Layout::ColMajor) => Some(&self.nt),
            (Layout::ColMajor, Layout::ColMajor) => Some(&self.tt),
        }
    }

    /// Whether `kernel` is one of these variants.
    fn has(&self, kernel: &GpuKernel) -> bool {
        [&self.tn, &self.nt, &self.tt].iter().any(|v| std::ptr::eq(kernel, *v))
    }
}

/// A kernel of one of the loaded modules: an index into its list.
#[derive(Clone, Copy, Debug)]
enum Chosen {
    Production(usize),
    Ladder(usize),
}

/// What [`Gpu::new`] sets up once per device.
struct Loaded {
    stream: Arc<CudaStream>,
    images: Images,
    /// The production module's GEMM kernels, in ladder order.
    production: Vec<GpuKernel>,
    /// The ladder's, once one of them was asked for.
    ladder: OnceLock<Vec<GpuKernel>>,
    /// Indices into `production` of each precision policy's kernel on this device.
    accurate: usize,
    strict: usize,
    /// Indices into `production` of [`SMALL_TILE_KERNEL`], [`TINY_TILE_KERNEL`] and
    /// [`RANK_K_KERNEL`].
    small_tile: usize,
    tiny_tile: usize,
    rank_k: usize,
    /// The matrix-vector kernel, for `m == 1` or `n == 1` under either policy, and its variants
    /// for a column of few rows and of many short ones.
    vector: GpuKernel,
    vector_column: GpuKernel,
    vector_narrow: GpuKernel,
    vector_staged: GpuKernel,
    /// The kernel for a few rows of `C` (`m <= few_rows::FEW`), under either policy.
    few_rows: GpuKernel,
    /// Its tall variant, for single products of at most [`TALL_ROWS`] rows.
    few_rows_tall: GpuKernel,
    /// Its variants over a column-major `B`, read as it lies.
    few_rows_nt: GpuKernel,
    few_rows_nt_tall: GpuKernel,
    /// The variants of `small_tile`, `tiny_tile` and `split_k` that read `A`, `B` or both
    /// column-major.
    small_tile_columns: Columns,
    tiny_tile_columns: Columns,
    split_k_columns: Columns,
    scale_c: GpuKernel,
    transpose: GpuKernel,
    pad: GpuKernel,
    split_k_reduce: GpuKernel,
    /// The split-K partials' buffer, kept from one call to the next (up to
    /// [`KEPT_WORKSPACE_BYTES`]).
    workspace: Kept,
    /// The copies of `A` and of `B` that a kernel reads instead of the operands (padded or
    /// transposed), kept from one call to the next (up to [`KEPT_COPY_BYTES`] each).
    a_copies: Kept,
    b_copies: Kept,
    /// The device copies of host operands (`A`, `B`, `C`) in calls on host memory, kept from
    /// one call to the next (up to [`KEPT_HOST_COPY_BYTES`] each).
    host_a: Kept,
    host_b: Kept,
    host_c: Kept,
    info: DeviceInfo,
}

impl std::fmt::Debug for Gpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gpu")
            .field("info", &self.loaded.info)
            .field("precision", &self.precision)
            .field("kernel", &self.kernel.map(|k| self.get(k).spec.name))
            .finish_non_exhaustive()
    }
}

/// The kernel of [`Precision::Accurate`] on devices that have it (sm_90a: H100, H200):
/// 3xTF32 on `wgmma`, warp-specialized, with exact power-of-two scaling of each tile's rows
/// and columns where the data needs it.
pub const ACCURATE_KERNEL: &str = specialized::SPEC.name;
/// The kernel of [`Precision::Strict`], and of [`Precision::Accurate`] on devices without
/// [`ACCURATE_KERNEL`]: `f32` FMAs only, with `K` split across more blocks when the tiles
/// alone do not fill the GPU.
pub const STRICT_KERNEL: &str = split_k::SPEC.name;
/// A tile kernel either policy runs where it is predicted faster than the 128 x 128 tiles
/// (see [`Gpu::chosen_for`]): `f32` FMAs on 64 x 64 tiles.
pub const SMALL_TILE_KERNEL: &str = small_tile::SPEC.name;
/// A tile kernel either policy runs where it is predicted faster than the larger tiles (see
/// [`Gpu::chosen_for`]): `f32` FMAs on 32 x 32 tiles.
pub const TINY_TILE_KERNEL: &str = tiny_tile::SPEC.name;
/// The kernel either policy runs on a single product of inner dimension at most [`RANK_K`]
/// (see [`Gpu::chosen_for`]): `C` streamed once, `f32` FMAs from global memory.
pub const RANK_K_KERNEL: &str = rank_k::SPEC.name;
/// The deepest inner dimension for which [`Gpu::chosen_for`] runs [`RANK_K_KERNEL`], where the
/// write of `C` is most of the work (the crossing with the tile kernels is measured in
/// `docs/performance-notes.md`).
pub const RANK_K: usize = 2;

/// The deepest inner dimension for which [`Precision::Accurate`] runs [`STRICT_KERNEL`]: less
/// than one `K` tile of the tensor-core kernel, whose products would then be partly padding
/// (the crossing is measured in `docs/performance-notes.md`).
pub const SMALL_K: usize = warpgroup::BK as usize - 1;

/// The most rows of a single product the tall variant of `few_rows` computes: two rows of its
/// tiles, which read `B` once between them when they run together (measured against the small
/// tiles in `docs/performance-notes.md`).
pub const TALL_ROWS: usize = 2 * few_rows::FEW;

/// The most rows of a product over a column-major `B` (the row-major problem's) that
/// `few_rows_nt_tall` computes where the tile kernel chosen would read a copy of `B`: each row
/// of tiles reads `B` once more, four passes at most, against the two of a transposed copy
/// before a tile kernel's own. A tile kernel that reads `B` as it lies outruns it from
/// [`TALL_ROWS`] rows on (measured: `docs/performance-notes.md`).
pub const NT_TALL_ROWS: usize = 4 * few_rows::FEW;

/// The least depth at which a batch of more than one product of at most [`TALL_ROWS`] rows over
/// a column-major `B` that the tile kernels would copy takes `few_rows_nt_tall` (taller members
/// only from [`NT_TALL_BATCH_DEEP`]). A single product of so few rows leaves a tile kernel most
/// of the GPU idle, a batch fills it; and each of the tall variant's passes over `B` ends in the
/// warp-wide additions of its sums, a fixed cost that only a deep enough `K`, and few passes,
/// repay against the copy of `B` and the tile kernels (measured: `docs/performance-notes.md`).
pub const NT_TALL_BATCH_DEPTH: usize = 80;

/// The depth from which a batch of up to [`NT_TALL_ROWS`] rows a member over a column-major `B`
/// that the tile kernels would copy takes `few_rows_nt_tall`: the warp-wide additions are then
/// a small share of each pass, and its passes over `B` cost less than the copy's. Where the tile
/// kernel chosen reads `B` as it lies, only members of at most [`TALL_ROWS`] rows (two passes
/// over `B`) from this depth on take it (measured: `docs/performance-notes.md`).
pub const NT_TALL_BATCH_DEEP: usize = 1024;

/// The fewest K slices of `vector`'s minimum depth that send a single row deeper than `2 n` to
/// `vector` rather than `few_rows`: with that many slices its blocks of 32 threads an output
/// outread `few_rows`'s 8 (`docs/performance-notes.md`); on a shallower `K` `few_rows`, whose
/// slices are shallower, splits finer.
const DEEP_ROW_SLICES: usize = 16;

/// The largest `gridDim.z`: the most members of a batch one launch covers.
const MAX_GRID_Z: u32 = 65_535;

/// The most K slices split-K uses (chosen against 16 and 64 in `docs/performance-notes.md`).
const MAX_SLICES: usize = 32;

/// The largest split-K workspace a [`Gpu`] keeps between calls (larger ones are allocated and
/// freed by each call): products of up to 1024 x 1024 x 16 slices, or 2048 x 2048 x 4.
const KEPT_WORKSPACE_BYTES: usize = 64 << 20;

/// The largest copy of an operand (padded or transposed) a [`Gpu`] keeps between calls, for
/// each of `A` and `B` (larger ones are allocated and freed by each call): 4096 x 8192 values.
const KEPT_COPY_BYTES: usize = 128 << 20;

/// The largest device copy of a host operand a [`Gpu`] keeps between calls, for each of `A`,
/// `B` and `C`: 4096 x 4096 values. Beyond that the copies over the bus take far longer than
/// mapping fresh memory.
const KEPT_HOST_COPY_BYTES: usize = 64 << 20;

impl Gpu {
    /// Opens device `ordinal`: retains its primary context (the one the CUDA runtime and other
    /// cudarc code use too), takes its default stream and loads the production kernels.
    ///
    /// Fails with [`Error::NoGpu`] when the CUDA driver library is missing or there is no such
    /// device, and with [`Error::UnsupportedGpu`] below compute capability 8.0.
    pub fn new(ordinal: usize) -> Result<Self> {
        // cudarc panics on the first driver call if libcuda cannot be loaded: probe first.
        // SAFETY: only tries to open the library by its usual names.
        if !unsafe { cudarc::driver::sys::is_culib_present() } {
            return Err(Error::NoGpu("the CUDA driver library (libcuda) was not found".into()));
        }
        let ctx = CudaContext::new(ordinal)
            .map_err(|e| Error::NoGpu(format!("cannot open CUDA device {ordinal}: {e}")))?;
        Self::from_stream(ctx.default_stream())
    }

    /// A handle whose calls run on `stream`, a stream of your own (cudarc's): for code that
    /// already lives on cudarc, so that its work and the GEMMs are ordered on one stream of
    /// one context, with no copies and no second context. Loads the production kernels into
    /// the stream's context. Errors as [`new`](Self::new).
    pub fn from_stream(stream: Arc<CudaStream>) -> Result<Self> {
        let ctx = stream.context().clone();
        let name = ctx.name().map_err(Error::cuda("reading the device name"))?;
        let (major, minor) =
            ctx.compute_capability().map_err(Error::cuda("reading the compute capability"))?;
        let attr = |a| ctx.attribute(a).map_err(Error::cuda("reading a device attribute"));
        let sm_count = attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)? as u32;
        let l2_bytes = attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)? as usize;
        let images = images_for(major, minor).ok_or_else(|| Error::UnsupportedGpu {
            name: name.clone(),
            major,
            minor,
        })?;
        // The SASS, else (no SASS for this device, or a driver that refuses it) the PTX.
        let sass =
            images.production_sass.and_then(|sass| ctx.load_module(Ptx::from_binary(sass.to_vec())).ok());
        let is_sass = sass.is_some();
        let module = match sass {
            Some(module) => module,
            None => ctx
                .load_module(Ptx::from_src(images.production_ptx))
                .map_err(Error::cuda("loading the kernel module"))?,
        };
        let load = |spec: KernelSpec| load_kernel(&module, spec);
        let production =
            module_specs(Module::Production, images.arch).map(|s| load(*s)).collect::<Result<Vec<_>>>()?;
        let vector = load(vector::SPEC)?;
        let vector_column = load(vector::COLUMN_SPEC)?;
        let vector_narrow = load(vector::NARROW_SPEC)?;
        let vector_staged = load(vector::STAGED_SPEC)?;
        let few_rows = load(few_rows::SPEC)?;
        let few_rows_tall = load(few_rows::TALL_SPEC)?;
        let few_rows_nt = load(few_rows::NT_SPEC)?;
        let few_rows_nt_tall = load(few_rows::NT_TALL_SPEC)?;
        // The variants split K as the kernel they vary does, by its coefficients.
        let columns = |base: KernelSpec, [tn, nt, tt]: [KernelSpec; 3]| -> Result<Columns> {
            let load = |spec| load(spec).map(|kernel| GpuKernel { cost: cost::cost_of(base.name), ..kernel });
            Ok(Columns { tn: load(tn)?, nt: load(nt)?, tt: load(tt)? })
        };
        let small_tile_columns =
            columns(small_tile::SPEC, [small_tile::TN_SPEC, small_tile::NT_SPEC, small_tile::TT_SPEC])?;
        let tiny_tile_columns =
            columns(tiny_tile::SPEC, [tiny_tile::TN_SPEC, tiny_tile::NT_SPEC, tiny_tile::TT_SPEC])?;
        let split_k_columns = columns(split_k::SPEC, [split_k::TN_SPEC, split_k::NT_SPEC, split_k::TT_SPEC])?;
        let scale_c = load(scale::SPEC)?;
        let transpose = load(transpose::SPEC)?;
        let pad = load(pad::SPEC)?;
        let split_k_reduce = load(split_k::REDUCE)?;
        let info = DeviceInfo {
            name,
            compute_capability: (major, minor),
            sm_count,
            l2_bytes,
            module_arch: images.arch,
            sass: is_sass,
        };
        let position = |name: &str| production.iter().position(|k| k.spec.name == name);
        // `split_k`, `small_tile`, `tiny_tile` and `rank_k` name no architecture, so every
        // production module has them.
        let required = |name: &str| {
            position(name).ok_or_else(|| Error::UnknownKernel {
                name: name.into(),
                backend: "gpu",
                available: production.iter().map(|k| k.spec.name).collect::<Vec<_>>().join(", "),
            })
        };
        let (strict, small_tile, tiny_tile, rank_k) = (
            required(STRICT_KERNEL)?,
            required(SMALL_TILE_KERNEL)?,
            required(TINY_TILE_KERNEL)?,
            required(RANK_K_KERNEL)?,
        );
        let accurate = position(ACCURATE_KERNEL).unwrap_or(strict);
        let loaded = Loaded {
            stream,
            images,
            production,
            ladder: OnceLock::new(),
            accurate,
            strict,
            small_tile,
            tiny_tile,
            rank_k,
            vector,
            vector_column,
            vector_narrow,
            vector_staged,
            few_rows,
            few_rows_tall,
            few_rows_nt,
            few_rows_nt_tall,
            small_tile_columns,
            tiny_tile_columns,
            split_k_columns,
            scale_c,
            transpose,
            pad,
            split_k_reduce,
            workspace: Kept::new(KEPT_WORKSPACE_BYTES),
            a_copies: Kept::new(KEPT_COPY_BYTES),
            b_copies: Kept::new(KEPT_COPY_BYTES),
            host_a: Kept::new(KEPT_HOST_COPY_BYTES),
            host_b: Kept::new(KEPT_HOST_COPY_BYTES),
            host_c: Kept::new(KEPT_HOST_COPY_BYTES),
            info,
        };
        Ok(Self { loaded: Arc::new(loaded), precision: Precision::default(), kernel: None, slices: None })
    }

    /// The same device with calls under `precision` (the default is [`Precision::Accurate`]);
    /// a kernel chosen by [`with_kernel`](Self::with_kernel) takes precedence.
    pub fn with_precision(mut self, precision: Precision) -> Self {
        self.precision = precision;
        self
    }

    /// The same device with every call on the kernel called `name` (one of
    /// [`kernel_names`](Self::kernel_names): the steps of the optimization ladder, for study and
    /// comparison), instead of the automatic choice; the first ladder kernel named loads the
    /// ladder's module. [`Error::UnknownKernel`] if this device has no such kernel.
    pub fn with_kernel(mut self, name: &str) -> Result<Self> {
        self.kernel = Some(self.find(name)?);
        Ok(self)
    }

    /// The same device with every single product that a kernel able to split `K` runs cut into
    /// `slices` K slices (split-K), for study and for fitting the cost model, instead of the
    /// count [`k_slices`](Self::k_slices) chooses; fewer where a slice would be shallower than
    /// the kernel allows ([`KernelSpec::k_slices`]) or past the most split-K takes (32). The
    /// choice of kernel is unchanged. `None` restores the automatic count.
    /// [`Error::InvalidArgument`] (position 0, `slices`) for `Some(0)`.
    pub fn with_k_slices(mut self, slices: Option<usize>) -> Result<Self> {
        if slices == Some(0) {
            return Err(Error::InvalidArgument {
                position: 0,
                name: "slices",
                reason: "at least 1 K slice".into(),
            });
        }
        self.slices = slices;
        Ok(self)
    }

    /// The precision policy of this handle's calls.
    pub fn precision(&self) -> Precision {
        self.precision
    }

    /// The names of this device's GEMM kernels, in ladder order.
    pub fn kernel_names(&self) -> Vec<&'static str> {
        GEMM_KERNELS.iter().filter(|s| s.in_module(self.loaded.images.arch)).map(|s| s.name).collect()
    }

    /// What this device is.
    pub fn info(&self) -> &DeviceInfo {
        &self.loaded.info
    }

    /// The stream every call of this handle runs on (cudarc's): queue work of your own on it
    /// to order it with the GEMMs.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.loaded.stream
    }

    /// The kernel called `name` (loading the ladder's module if it is one of its kernels).
    pub fn kernel(&self, name: &str) -> Result<&GpuKernel> {
        Ok(self.get(self.find(name)?))
    }

    /// Where the kernel called `name` is loaded, loading the ladder's module if it is there.
    fn find(&self, name: &str) -> Result<Chosen> {
        let unknown = || Error::UnknownKernel {
            name: name.into(),
            backend: "gpu",
            available: self.kernel_names().join(", "),
        };
        let spec = GEMM_KERNELS
            .iter()
            .find(|s| s.name == name && s.in_module(self.loaded.images.arch))
            .ok_or_else(unknown)?;
        let position = |kernels: &[GpuKernel]| kernels.iter().position(|k| k.spec.name == name);
        match spec.module {
            Module::Production => position(&self.loaded.production).map(Chosen::Production),
            Module::Ladder => position(self.ladder()?).map(Chosen::Ladder),
        }
        .ok_or_else(unknown)
    }

    /// The ladder's kernels, loading its module the first time.
    fn ladder(&self) -> Result<&[GpuKernel]> {
        if let Some(kernels) = self.loaded.ladder.get() {
            return Ok(kernels);
        }
        let ctx = self.loaded.stream.context();
        let module = ctx
            .load_module(Ptx::from_src(self.loaded.images.ladder_ptx))
            .map_err(Error::cuda("loading the ladder's kernel module"))?;
        let specs = module_specs(Module::Ladder, self.loaded.images.arch);
        let kernels = specs.map(|s| load_kernel(&module, *s)).collect::<Result<Vec<_>>>()?;
        // Another thread may have loaded it meanwhile: either copy serves.
        Ok(self.loaded.ladder.get_or_init(|| kernels))
    }

    /// A kernel that [`find`](Self::find) located (the ladder is loaded if it is there).
    fn get(&self, kernel: Chosen) -> &GpuKernel {
        match kernel {
            Chosen::Production(i) => &self.loaded.production[i],
            Chosen::Ladder(i) => {
                &self.loaded.ladder.get().expect("a ladder kernel was found after loading")[i]
            }
        }
    }

    /// The kernel this handle's calls run for a batch of `batch` products, each a `C` of
    /// `m x n` in `layout` with an inner dimension `k` (a single product is the batch of one):
    /// the one chosen by name, else the precision policy's, by the shape of the row-major
    /// product the kernels compute (a column-major `C` is the row-major `C^T`, `n x m`):
    /// - one column, or one row with `k <= 2 n` or a `K` deep enough to split in
    ///   [`DEEP_ROW_SLICES`] of its slices (in two, for a row of at most 16 columns, which it
    ///   takes in groups of lanes): the `vector` kernel (`f32` FMAs), which spreads the
    ///   reads a tile kernel would make in one row of each tile over the grid (a row's grid is
    ///   `n / 32` blocks, so a row of moderate depth goes to `few_rows`, whose shallower slices
    ///   split it finer), or for a column of fewer than 64 rows per SM its variant on 8 rows a
    ///   block, and for a column of rows at most [`vector::STAGED_K`] long and at least 256 per
    ///   SM its variant on a group of lanes a row for rows its lanes load in one round
    ///   ([`vector::narrow_in_one_round`]), else its variant that copies them into shared
    ///   memory;
    /// - at most [`few_rows::FEW`] rows: the `few_rows` kernel (`f32` FMAs), likewise, with
    ///   `K` split across more blocks when its `n / 32` do not fill the GPU; a single product of
    ///   at most [`TALL_ROWS`] rows whose `B` fits in L2 and whose rows are a multiple of 4
    ///   floats: its tall variant, over two rows of tiles;
    /// - a single product of inner dimension at most [`RANK_K`]: [`RANK_K_KERNEL`] (`f32`
    ///   FMAs), which streams `C` once;
    /// - else the tile kernel of the policy that its cost model predicts to be fastest on the
    ///   shape, the whole batch and the K slices split-K would add counted (`cost`): under
    ///   [`Precision::Accurate`] one of [`ACCURATE_KERNEL`] where the device has it (not on an
    ///   inner dimension shallower than one of its `K` tiles, `k <=` [`SMALL_K`]),
    ///   [`STRICT_KERNEL`], [`SMALL_TILE_KERNEL`] (`f32` FMAs on 64 x 64 tiles) and
    ///   [`TINY_TILE_KERNEL`] (on 32 x 32 tiles); under [`Precision::Strict`] one of the last
    ///   three.
    ///
    /// Every choice meets its policy's contract (the `f32` FMA kernels meet both). This is the
    /// choice for operands the kernels read as they lie (row-major in the row-major problem);
    /// where they are stored transposed, [`chosen_for_views`](Self::chosen_for_views) gives the
    /// kernel a call runs.
    pub fn chosen_for(&self, layout: Layout, batch: usize, m: usize, n: usize, k: usize) -> &GpuKernel {
        self.chosen_by_shape(layout, batch, m, n, k, |_| 0)
    }

    /// The kernel this handle's calls run for a batch of `batch` products of these operands'
    /// shapes and layouts (`a`, `b`: `op(A)`, `op(B)`; a single product is the batch of one):
    /// [`chosen_for`](Self::chosen_for) of `C` in the layout the call computes it in. That is
    /// `C`'s own, except for a matrix-vector product whose matrix is stored transposed: its
    /// vector `C` reads the same in the other layout, in which the product is the transposed
    /// one and reads the matrix as it lies (no copy of it is made). Where the row-major
    /// problem's `B` is column-major, the few-rows kernels that read such a `B` as it lies:
    /// `few_rows_nt` where the choice is `few_rows`, and `few_rows_nt_tall` for products of more
    /// rows: a single product up to [`TALL_ROWS`], or up to [`NT_TALL_ROWS`] where the tile
    /// kernel chosen would read a copy of `B`; a batch up to [`TALL_ROWS`] rows a member and deep
    /// enough, [`NT_TALL_BATCH_DEPTH`], or up to [`NT_TALL_ROWS`] deeper still,
    /// [`NT_TALL_BATCH_DEEP`]; where the tile kernel chosen reads `B` as it lies, up to
    /// [`TALL_ROWS`] from [`NT_TALL_BATCH_DEEP`]. Where its
    /// `A` or `B` is column-major, the variant of [`SMALL_TILE_KERNEL`], [`TINY_TILE_KERNEL`] or
    /// [`STRICT_KERNEL`] that reads them as they lie, where its 16-byte entry can (leading
    /// dimensions and the lengths of the lines read multiples of 4) and, for a column-major `B`,
    /// a single product's K slices leave no columns of `K` over (the model gives such a variant
    /// only counts that leave none, and it runs where predicted no slower in them than the
    /// kernel for row-major operands on a copy of `B`: [`slices_fit`]); the cost model then also
    /// counts, for each tile kernel that would read a copy instead, the time of the copies.
    pub fn chosen_for_views(
        &self,
        batch: usize,
        a: &DeviceMatRef,
        b: &DeviceMatRef,
        c: &DeviceMatMut,
    ) -> &GpuKernel {
        self.chosen_oriented(batch, a, b, c)
    }

    /// [`chosen_for_views`](Self::chosen_for_views) for host matrices (`c`: `C`'s view, of which
    /// only the shape and layout matter).
    pub fn chosen_for_host(&self, batch: usize, a: &MatRef, b: &MatRef, c: &MatRef) -> &GpuKernel {
        self.chosen_oriented(batch, a, b, c)
    }

    /// [`chosen_for_views`](Self::chosen_for_views) for views of any kind.
    pub(crate) fn chosen_oriented<R: View, W: View>(&self, batch: usize, a: &R, b: &R, c: &W) -> &GpuKernel {
        let ((rows, cols, _), k) = (c.dims(), a.dims().1);
        let layout = vector_c_layout(a, b, c);
        let layouts = row_major_layouts(layout, a.layout(), b.layout());
        let (m, n) = row_major_shape(layout, rows, cols);
        let (lda, ldb) = match layout {
            Layout::RowMajor => (a.dims().2, b.dims().2),
            Layout::ColMajor => (b.dims().2, a.dims().2),
        };
        // The kernel a call runs where the first is chosen (operands taken as 16-byte aligned:
        // a call that finds them otherwise copies them, as it would for the kernel chosen).
        let operands = Operands { batch, shape: (m, n, k), lds: (lda, ldb), aligned: (true, true) };
        // The elements of a member that a call copies (transposed) before `kernel` runs.
        let copied = |kernel: &GpuKernel| {
            let read = self.reading(kernel, layouts, operands).spec;
            let a_copied = layouts.0 == Layout::ColMajor && !read.reads_a_transposed;
            let b_copied = layouts.1 == Layout::ColMajor && !read.reads_b_transposed;
            usize::from(a_copied) * m * k + usize::from(b_copied) * k * n
        };
        let kernel = self.chosen_by_shape(layout, batch, rows, cols, k, copied);
        let read = self.reading(kernel, layouts, operands);
        let tall = match (batch, read.spec.reads_b_transposed) {
            (1, reads_b) => m <= TALL_ROWS || !reads_b,
            (_, true) => m <= TALL_ROWS && k >= NT_TALL_BATCH_DEEP,
            (_, false) => (m <= TALL_ROWS && k >= NT_TALL_BATCH_DEPTH) || k >= NT_TALL_BATCH_DEEP,
        };
        if self.kernel.is_none()
            && layouts.1 == Layout::ColMajor
            && (few_rows::FEW + 1..=NT_TALL_ROWS).contains(&m)
            && tall
        {
            return &self.loaded.few_rows_nt_tall;
        }
        read
    }

    /// The kernel of `kernel`'s family that reads `A` and `B` stored in `layouts` (the
    /// row-major problem's) as they lie, where there is one:
    /// - of a few-rows kernel (`few_rows`, its tall variant, or theirs that read `B`
    ///   column-major) the one for `B`'s layout, whatever `A`'s (a kernel that reads `B`
    ///   column-major takes no other: a row-major `B` goes to the one that reads it row-major);
    /// - of `small_tile`, `tiny_tile` or `split_k` (or one of their variants) the variant for
    ///   both layouts where it runs on these `operands`
    ///   ([`reads_as_they_lie`](Self::reads_as_they_lie)), else, with both column-major, the
    ///   one for a column-major `A` where it runs on `A` and a copy of `B`, else the kernel that
    ///   reads row-major operands (to which the call gives copies);
    /// - any other kernel itself.
    fn reading<'s>(
        &'s self,
        kernel: &'s GpuKernel,
        layouts: (Layout, Layout),
        operands: Operands,
    ) -> &'s GpuKernel {
        let loaded = &self.loaded;
        let pairs =
            [(&loaded.few_rows, &loaded.few_rows_nt), (&loaded.few_rows_tall, &loaded.few_rows_nt_tall)];
        if let Some((rows, columns)) =
            pairs.into_iter().find(|(r, c)| std::ptr::eq(kernel, *r) || std::ptr::eq(kernel, *c))
        {
            return if layouts.1 == Layout::ColMajor { columns } else { rows };
        }
        let families = [
            (&loaded.production[loaded.small_tile], &loaded.small_tile_columns),
            (&loaded.production[loaded.tiny_tile], &loaded.tiny_tile_columns),
            (&loaded.production[loaded.strict], &loaded.split_k_columns),
        ];
        match families.into_iter().find(|(rows, columns)| std::ptr::eq(kernel, *rows) || columns.has(kernel))
        {
            Some((rows, columns)) => {
                let fits = |v: &&GpuKernel, operands| self.reads_as_they_lie(v, rows, operands);
                // Else, with both column-major, the variant that reads A as it lies and a
                // row-major copy of B (rows of `n` floats, 16-byte aligned).
                let (lda, n) = (operands.lds.0, operands.shape.1);
                let b_copied = Operands { lds: (lda, n), aligned: (operands.aligned.0, true), ..operands };
                columns
                    .reading(layouts)
                    .filter(|v| fits(v, operands))
                    .or_else(|| columns.reading((layouts.0, Layout::RowMajor)).filter(|v| fits(v, b_copied)))
                    .unwrap_or(rows)
            }
            None => kernel,
        }
    }

    /// Whether `variant`, a kernel that reads column-major operands with one 16-byte entry
    /// ([`Padding::AsTheyLie`]), runs on `operands` in place of `rows`, the kernel of its family
    /// that reads row-major operands: its entry reads them as they lie ([`GpuKernel::wide`]),
    /// and, where it reads a single product's `B` column-major, its K slices suit it
    /// ([`slices_fit`]): slices given by hand must, and in the model's own counts (which always
    /// do) it must be predicted no slower than `rows` in its counts after a copy of `B`. Always
    /// where the model has no coefficients for them.
    fn reads_as_they_lie(&self, variant: &GpuKernel, rows: &GpuKernel, operands: Operands) -> bool {
        let Operands { batch, shape: (m, n, k), lds: (lda, ldb), aligned: (a_aligned, b_aligned) } = operands;
        if !variant.wide(a_aligned && b_aligned, lda, ldb, (m, n, k)) {
            return false;
        }
        // Only a single product is split.
        if !variant.spec.reads_b_transposed || batch != 1 {
            return true;
        }
        if self.slices.is_some() {
            return slices_fit(&variant.spec, k, self.k_slices(variant, m, n, k));
        }
        let sm_count = self.loaded.info.sm_count as usize;
        let time = |kernel: &GpuKernel| {
            kernel.cost.map(|cost| cost.predict(&kernel.spec, self.slots(kernel), sm_count, 1, (m, n, k)))
        };
        match (time(variant), time(rows)) {
            (Some(read), Some(copied)) => read <= copied + cost::copies(k * n),
            _ => true,
        }
    }

    /// [`chosen_for`](Self::chosen_for).
    ///
    /// `copied(kernel)`: the elements of a member a call copies before a tile kernel runs,
    /// whose time the cost model adds to the kernel's.
    fn chosen_by_shape(
        &self,
        layout: Layout,
        batch: usize,
        m: usize,
        n: usize,
        k: usize,
        copied: impl Fn(&GpuKernel) -> usize,
    ) -> &GpuKernel {
        let (m, n) = row_major_shape(layout, m, n);
        if let Some(chosen) = self.kernel {
            return self.get(chosen);
        }
        let loaded = &self.loaded;
        // The rows of C that give each SM two of `kernel`'s blocks.
        let two_blocks_per_sm =
            |kernel: &GpuKernel| 2 * kernel.spec.tile.0 as usize * loaded.info.sm_count as usize;
        match skinny_kernel(batch, m, n, k, loaded.info.l2_bytes) {
            // A column too short for two of `vector`'s blocks per SM, on 8 rows a block.
            Some(Skinny::Vector) if n == 1 && m < two_blocks_per_sm(&loaded.vector) => {
                return &loaded.vector_column;
            }
            // A column of short rows, tall enough for two of `vector_staged`'s blocks per SM:
            // rows a group of lanes loads in one round on such groups, others through shared
            // memory.
            Some(Skinny::Vector)
                if n == 1 && k <= vector::STAGED_K && m >= two_blocks_per_sm(&loaded.vector_staged) =>
            {
                return if vector::narrow_in_one_round(k) {
                    &loaded.vector_narrow
                } else {
                    &loaded.vector_staged
                };
            }
            Some(Skinny::Vector) => return &loaded.vector,
            Some(Skinny::FewRows) => return &loaded.few_rows,
            Some(Skinny::FewRowsTall) => return &loaded.few_rows_tall,
            None => {}
        }
        // Not for batches: on small members the tiles' kernels are as fast or faster.
        if batch == 1 && k <= RANK_K {
            return &loaded.production[loaded.rank_k];
        }
        // The policy's tile kernels: the `f32` FMA ones, and under `Accurate` the tensor-core
        // kernel where the device has it, unless K is shallower than one of its tiles.
        let tensor = match self.precision {
            Precision::Accurate if k > SMALL_K && loaded.accurate != loaded.strict => Some(loaded.accurate),
            _ => None,
        };
        let sm_count = loaded.info.sm_count as usize;
        let predicted = |&i: &usize| {
            let kernel = &loaded.production[i];
            kernel.cost.map_or(f64::INFINITY, |cost| {
                cost.predict(&kernel.spec, self.slots(kernel), sm_count, batch, (m, n, k))
                    + cost::copies(batch * copied(kernel))
            })
        };
        let fastest = (tensor.into_iter().chain([loaded.strict, loaded.small_tile, loaded.tiny_tile]))
            .min_by(|a, b| predicted(a).total_cmp(&predicted(b)))
            .unwrap_or(loaded.strict);
        &loaded.production[fastest]
    }

    /// Resident blocks of `kernel` the GPU holds at once (`SMs x blocks per SM`).
    fn slots(&self, kernel: &GpuKernel) -> usize {
        self.loaded.info.sm_count as usize * kernel.blocks_per_sm as usize
    }

    /// `C = alpha * op(A) * op(B) + beta * C` on host views (any layout; pass `a.t()` for
    /// `A^T`): copies the operands to the device, runs [`chosen_for`](Self::chosen_for), and copies
    /// the `m x n` block of `C` back (its padding is never written).
    pub fn gemm(&self, alpha: f32, a: &MatRef, b: &MatRef, beta: f32, c: &mut MatMut) -> Result<()> {
        self.gemm_strided(
            1,
            alpha,
            &Strided::new(*a, 0),
            &Strided::new(*b, 0),
            beta,
            &mut Strided::new(c.rb_mut(), 0),
        )
    }

    /// `C = alpha * op(A) * op(B) + beta * C` on matrices already on the device: each a
    /// [`DeviceMatrix`] (`&a`, `&mut c`) or a view of any cudarc buffer of this handle's
    /// context ([`DeviceMatRef`], [`DeviceMatMut`]), in any layout (pass `a.t()` for `A^T`).
    /// Returns when the result is complete, so a fault inside the kernel is this call's error.
    /// [`Error::WrongContext`] if a buffer belongs to another context.
    pub fn gemm_device<'a, 'b, 'c>(
        &self,
        alpha: f32,
        a: impl Into<DeviceMatRef<'a>>,
        b: impl Into<DeviceMatRef<'b>>,
        beta: f32,
        c: impl Into<DeviceMatMut<'c>>,
    ) -> Result<()> {
        let (a, b, c) = (a.into(), b.into(), c.into());
        self.enqueue(self.chosen_oriented(1, &a, &b, &c), alpha, a, b, beta, c)?;
        self.synchronize()
    }

    /// Queues the GEMM on the stream and returns at once (for timing loops); errors inside
    /// the kernel surface at the next [`synchronize`](Self::synchronize).
    ///
    /// The kernels read row-major operands and write a row-major `C`. A column-major `C` is
    /// the row-major `C^T = op(B)^T op(A)^T`, so the operands swap (free); an operand that is
    /// then column-major (a transpose) is first transposed into a scratch buffer by the
    /// `transpose` kernel (`O(mk)` or `O(kn)` traffic before the `O(mnk)` GEMM). Shapes taller
    /// than one grid can cover (`gridDim.y <= 65535` tiles) run as several launches over
    /// blocks of rows.
    ///
    /// Quick returns follow the reference BLAS: nothing when `m == 0` or `n == 0`, or when
    /// `beta == 1` and `alpha == 0` or `k == 0`; else `C = beta * C` without reading `A` and `B`
    /// when `alpha == 0` or `k == 0`.
    pub fn enqueue<'a, 'b, 'c>(
        &self,
        kernel: &GpuKernel,
        alpha: f32,
        a: impl Into<DeviceMatRef<'a>>,
        b: impl Into<DeviceMatRef<'b>>,
        beta: f32,
        c: impl Into<DeviceMatMut<'c>>,
    ) -> Result<()> {
        let (a, b, c) = (a.into(), b.into(), c.into());
        check_shapes((a.rows(), a.cols()), (b.rows(), b.cols()), (c.rows(), c.cols()))?;
        self.enqueue_members(
            kernel,
            1,
            alpha,
            Strided::new(a, 0),
            Strided::new(b, 0),
            beta,
            Strided::new(c, 0),
        )
    }

    /// [`enqueue`](Self::enqueue) for a checked strided batch of `batch >= 1` members: every
    /// launch covers the whole batch (`gridDim.z`, in runs of at most 65535 members), each
    /// scratch copy holds every member (one copy when an operand's stride is 0).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn enqueue_members(
        &self,
        kernel: &GpuKernel,
        batch: usize,
        alpha: f32,
        a: Strided<DeviceMatRef>,
        b: Strided<DeviceMatRef>,
        beta: f32,
        c: Strided<DeviceMatMut>,
    ) -> Result<()> {
        for stream in [a.matrix.buf.stream(), b.matrix.buf.stream(), c.matrix.buf.stream()] {
            if stream.context() != self.loaded.stream.context() {
                return Err(Error::WrongContext);
            }
        }
        // A matrix-vector product's vector C described so that its matrix is read as it lies,
        // where the kernel computes that shape; then C as the row-major matrix the kernels
        // write (C itself, or C^T), and vectors read row-major (the same elements).
        let c = oriented(kernel, &a, &b, c);
        let (a, b, c) = with_row_major_c(a, b, c);
        let (a, b) = (relaid(a, Layout::RowMajor), relaid(b, Layout::RowMajor));
        let (a_step, b_step, c_step) = (a.stride, b.stride, c.stride);
        let (a, b, mut c) = (a.matrix, b.matrix, c.matrix);
        let (m, n, k) = (c.rows(), c.cols(), a.cols());
        // The kernel's variant that reads the operands as they lie, where it has one (a kernel
        // that reads an operand column-major takes no other: a row-major one goes to the one
        // that reads it row-major).
        let aligned = (a.lines_aligned(a_step), b.lines_aligned(b_step));
        let kernel = self.reading(
            kernel,
            (a.layout(), b.layout()),
            Operands { batch, shape: (m, n, k), lds: (a.ld(), b.ld()), aligned },
        );
        match work(m, n, k, alpha, beta) {
            Work::Nothing => return Ok(()),
            Work::ScaleC => return self.enqueue_scale_c(beta, batch, c, c_step),
            Work::Product => {}
        }
        let shape = (m, n, k);
        if !kernel.spec.shapes.fits(m, n) {
            return Err(Error::DimensionMismatch(format!(
                "`{}` does not compute a {m}x{n} C (row-major; see Gpu::chosen_for)",
                kernel.spec.name
            )));
        }
        // Operands the kernel cannot read as they are become row-major copies: transposed ones,
        // and, when the kernel's 16-byte entry is to run on padded copies (`pads`), ones whose
        // rows are not a multiple of 4 floats (K then rounded up, the added columns of A and
        // rows of B zero).
        let pads = pads(kernel.spec.padding, padding_copies((&a, a_step), (&b, b_step), shape), shape);
        let (k_copy, n_copy) = if pads { (k.next_multiple_of(4), n.next_multiple_of(4)) } else { (k, n) };
        let a_len =
            match a_step != 0 && !kernel.spec.reads_a_transposed && copied(&a, a_step, (m, k_copy), pads) {
                true => m * k_copy,
                false => 0,
            };
        let b_len = match b_step != 0
            && !kernel.spec.reads_b_transposed
            && copied(&b, b_step, (k_copy, n_copy), pads)
        {
            true => k_copy * n_copy,
            false => 0,
        };
        // The copies live in buffers kept between calls: a batch whose copies would not fit
        // them runs in runs of members whose copies do, so that no call maps fresh memory for
        // them (which costs more than copying a small member's operands). A run of one member
        // stays a member of a batch (not split along K).
        let run = match a_len.max(b_len) {
            0 => batch,
            len => (KEPT_COPY_BYTES / size_of::<f32>() / len).max(1),
        };
        let mut z0 = 0;
        while z0 < batch {
            let members = run.min(batch - z0);
            let a = Strided::new(a.member(z0 * a_step), a_step);
            let b = Strided::new(b.member(z0 * b_step), b_step);
            let c = Strided::new(c.member_mut(z0 * c_step), c_step);
            self.enqueue_run(kernel, (members, batch == 1), alpha, a, b, beta, c, pads)?;
            z0 += members;
        }
        Ok(())
    }

    /// [`enqueue_members`](Self::enqueue_members) of `batch` members of a row-major `C` whose
    /// operands' layouts the kernel takes (`B` column-major exactly where it reads it so),
    /// copying those it cannot read as they are (`pads`: padded to rows of a multiple of 4
    /// floats) into the buffers kept between calls (or, too large to keep, freed after the
    /// launches, in stream order). `single`: the call's whole batch is this one product, which
    /// split-K may cut along `K`.
    #[allow(clippy::too_many_arguments)]
    fn enqueue_run(
        &self,
        kernel: &GpuKernel,
        (batch, single): (usize, bool),
        alpha: f32,
        Strided { matrix: a, stride: a_step }: Strided<DeviceMatRef>,
        Strided { matrix: b, stride: b_step }: Strided<DeviceMatRef>,
        beta: f32,
        Strided { matrix: mut c, stride: c_step }: Strided<DeviceMatMut>,
        pads: bool,
    ) -> Result<()> {
        let (m, n, k, ldc) = (c.rows(), c.cols(), a.cols(), c.ld());
        let shape = (m, n, k);
        let [m32, n32, ldc32] = to_u32([m, n, ldc], shape, kernel.spec.name)?;
        let to4 = |x: usize| if pads { x.next_multiple_of(4) } else { x };
        let (k, n_b) = (to4(k), to4(n));
        let [k32] = to_u32([k], shape, kernel.spec.name)?;
        let a_copy = if kernel.spec.reads_a_transposed {
            None
        } else {
            self.readable(&self.loaded.a_copies, (&a, a_step), batch, (m, k), pads, false)?
        };
        // The copy of B starts while the copy of A finishes.
        let b_copy = if kernel.spec.reads_b_transposed {
            None
        } else {
            self.readable(&self.loaded.b_copies, (&b, b_step), batch, (k, n_b), pads, a_copy.is_some())?
        };
        // A scratch copy starts at the start of an allocation (256-byte aligned) and its
        // members are a multiple of 4 floats apart; a caller's buffer needs both checked.
        let direct_aligned = |x: &DeviceMatRef, step: usize| x.aligned && step.is_multiple_of(4);
        let aligned = a_copy.as_ref().map_or(direct_aligned(&a, a_step), |c| c.1.is_multiple_of(4))
            && b_copy.as_ref().map_or(direct_aligned(&b, b_step), |c| c.1.is_multiple_of(4));
        let (a_buf, lda, a_step) = a_copy
            .as_ref()
            .map_or((a.buf.slice(..), a.ld(), a_step), |(t, step)| (t.buf().as_view(), k, *step));
        let (b_buf, ldb, b_step) = b_copy
            .as_ref()
            .map_or((b.buf.slice(..), b.ld(), b_step), |(t, step)| (t.buf().as_view(), n_b, *step));
        let [lda32, ldb32] = to_u32([lda, ldb], shape, kernel.spec.name)?;
        // The product starts while the copies finish (its blocks set up, waiting at their
        // entry for the copies' writes), where the device has such launches.
        let dependent = (a_copy.is_some() || b_copy.is_some()) && self.launches_dependents(&kernel.spec);
        // Split-K for a single product whose tiles do not fill the GPU. A batch is not split:
        // its members fill the grid instead, in one launch.
        if single {
            let slices = self.k_slices(kernel, m, n, k);
            if slices > 1 {
                let (a, b, c) = ((a_buf, lda), (b_buf, ldb, n_b), (c.buf, ldc));
                return self.split_k(kernel, slices, (m, n, k), alpha, a, b, beta, c, (aligned, dependent));
            }
            // One slice: the same kernel with gridDim.z = 1 is the plain GEMM on C.
        }
        let function = kernel.function_for(aligned, lda, ldb, (m, n_b, k));
        let steps = [a_step, b_step, c_step].map(|s| s as u64);
        self.launch_members(&kernel.spec, batch, m32, |z0, members, r0, rows| {
            let mut params = GemmParams {
                m: rows,
                n: n32,
                k: k32,
                alpha,
                a: a_buf.slice(z0 * a_step + r0 as usize * lda..),
                lda: lda32,
                b: b_buf.slice(z0 * b_step..),
                ldb: ldb32,
                beta,
                c: c.buf.slice_mut(z0 * c_step + r0 as usize * ldc..),
                ldc: ldc32,
                a_step: steps[0],
                b_step: steps[1],
                c_step: steps[2],
                members,
            };
            let tiles = tiles(&kernel.spec, rows as usize, n);
            // At most `members`, a u32.
            let groups = member_groups(&kernel.spec, members as usize, tiles, self.slots(kernel)) as u32;
            // SAFETY: for each member from z0 on, from row r0 on, A holds `rows x k` (lda) and
            // C `rows x n` (ldc), B holds `k x n` (ldb) (spans of the whole batch checked with
            // the views, scratch copies sized here); no C overlaps another member's C (checked)
            // or an A or B (C is borrowed mutably); the kernel's own geometry, with at most
            // `members_per_block` members a block.
            let config = launch_config(&kernel.spec, rows, n32, groups);
            unsafe { self.launch_after(function, config, &mut params, dependent) }
                .map_err(Error::cuda("launching a GEMM kernel"))
        })
        // The kept copies are released here for the next call, and copies too large to keep
        // freed, ordered on the stream after the launches.
    }

    /// How many K slices split-K cuts a single `m x n x k` product on `kernel` into (`C`
    /// row-major `m x n`; each slice's partial of `C` goes to a workspace, and a reduction adds
    /// them in order).
    ///
    /// Each slice is at least as deep as the kernel allows ([`KernelSpec::k_slices`]: the 128 x
    /// 128 kernels' tile height, so that a slice's block computes at least a cube, 64 for the
    /// small and tiny tiles, whose shallower slices give shorter chains of additions per
    /// output). For a tile kernel, the count its cost model predicts fastest
    /// (`cost::Cost::slices`: more slices fill more SMs, but every wave of blocks costs a
    /// pipeline's start and every slice a partial of `C`) on grids of fewer than two waves
    /// (`SMs x blocks per SM` resident blocks a wave), where the second wave may leave most SMs
    /// idle; beyond two waves the idle share is smaller than what the partials cost, so they
    /// are not split ([`most_slices`]). For the others (the matrix-vector kernels, whose block
    /// of 32 warps with sixteen loads in flight each keeps an SM's share of memory traffic
    /// going on its own: a wave is a block per SM) one when the tiles alone fill a wave, since
    /// splitting a full grid only adds the partials' traffic and the reduction's launch, else
    /// the count whose waves are fullest (`blocks / (waves x slots)`, the fewest slices on a
    /// tie). One for a kernel that does not split. A count set by
    /// [`with_k_slices`](Self::with_k_slices) takes precedence, within the kernel's limits.
    pub fn k_slices(&self, kernel: &GpuKernel, m: usize, n: usize, k: usize) -> usize {
        let spec = &kernel.spec;
        if let Some(slices) = self.slices {
            return slices.min(deepest_split(spec, k));
        }
        let slots = match spec.shapes {
            Shapes::Vector => self.loaded.info.sm_count as usize,
            Shapes::Any | Shapes::FewRows(_) => self.slots(kernel),
        };
        match kernel.cost {
            Some(cost) => cost.slices(spec, slots, self.loaded.info.sm_count as usize, (m, n, k)),
            None => slices_of(spec, slots, m, n, k),
        }
    }

    /// The split-K GEMM: `slices` equal K slices into a workspace, in one launch (`gridDim.z =
    /// slices`), then the reduction, which adds the partials in order, multiplies the few
    /// leftover columns and updates `C`. A slice is a multiple of 4 deep when the slices load 16
    /// bytes at a time (`k - slices * depth < 4 * slices` columns left over), any depth when
    /// they load 4 (fewer than `slices` left over). `dependent`: the slices' launch may start
    /// before the kernels queued before it complete ([`launch_after`](Self::launch_after)).
    #[allow(clippy::too_many_arguments)]
    fn split_k(
        &self,
        kernel: &GpuKernel,
        slices: usize,
        (m, n, k): (usize, usize, usize),
        alpha: f32,
        (a, lda): (CudaView<f32>, usize),
        (b, ldb, b_cols): (CudaView<f32>, usize, usize),
        beta: f32,
        (c, ldc): (CudaViewMut<f32>, usize),
        (aligned, dependent): (bool, bool),
    ) -> Result<()> {
        // A multiple of 4 where the slices load 16 bytes at a time, so that their loads stay
        // aligned; any depth for 4-byte loads, leaving the reduction fewer columns.
        // (Whether the slices load 16 bytes at a time at a depth that is a multiple of 4: 0.)
        let wide = kernel.wide(aligned, lda, ldb, (m, b_cols, 0));
        let depth = if wide { k / slices / 4 * 4 } else { k / slices };
        let done = slices * depth;
        let len = slices * m * n;
        // SAFETY: every partial element is written by the slices' launch before the reduction
        // reads it (each block writes its whole tile's in-range part; the reduction reads only
        // in-range elements); both launches go on the handle's stream.
        let mut workspace =
            unsafe { self.loaded.workspace.get(&self.loaded.stream, len) }.map_err(alloc_error(len * 4))?;
        // Sizes fit u32: m, n, k and the leading dimensions were checked as such, the depth and
        // the tail are at most k, the slices at most MAX_SLICES.
        let [m32, n32, depth32, slices32, tail32, lda32, ldb32, ldc32] =
            [m, n, depth, slices, k - done, lda, ldb, ldc].map(|x| x as u32);
        let function = kernel.function_for(aligned, lda, ldb, (m, b_cols, depth));
        // Where slice z's columns of A and rows of B start: `depth` columns of a row-major A
        // apart, `depth` lines of a column-major one; likewise for B.
        let (a_t, b_t) = (kernel.spec.reads_a_transposed, kernel.spec.reads_b_transposed);
        let (a_depth, b_depth) =
            (if a_t { depth * lda } else { depth }, if b_t { depth } else { depth * ldb });
        let mut slices_params = GemmParams {
            m: m32,
            n: n32,
            k: depth32,
            alpha: 1.0,
            a: a.slice(..),
            lda: lda32,
            b: b.slice(..),
            ldb: ldb32,
            beta: 0.0,
            c: workspace.buf_mut().as_view_mut(),
            ldc: n32,
            // The slices as a batch: slice z's columns of A, rows of B, partial of the workspace.
            a_step: a_depth as u64,
            b_step: b_depth as u64,
            c_step: (m * n) as u64,
            // One slice a block: the grid below has a block along z for each.
            members: slices32,
        };
        // SAFETY: the slice depth is passed as k; slice z reads columns z*depth.. of A and rows
        // z*depth.. of B (all below k) and writes partial z of the workspace (slices x m x n);
        // the kernel's geometry with z = slices.
        let config = launch_config(&kernel.spec, m32, n32, slices32);
        unsafe { self.launch_after(function, config, &mut slices_params, dependent) }
            .map_err(Error::cuda("launching split_k"))?;
        let (a_tail, b_tail) = if done < k {
            (a.slice(slices * a_depth..), b.slice(slices * b_depth..))
        } else {
            (a.slice(..), b.slice(..))
        };
        // Element (i, p) of the tails at i * row step + p * column step.
        let [a_steps, b_steps] =
            [(a_t, lda32), (b_t, ldb32)].map(|(t, ld)| if t { (1, ld) } else { (ld, 1) });
        let reduce = &self.loaded.split_k_reduce;
        let mut params = ReduceParams {
            m: m32,
            n: n32,
            slices: slices32,
            workspace: workspace.buf().as_view(),
            tail: tail32,
            a: a_tail,
            a_row_step: a_steps.0,
            a_col_step: a_steps.1,
            b: b_tail,
            b_row_step: b_steps.0,
            b_col_step: b_steps.1,
            alpha,
            beta,
            c,
            ldc: ldc32,
        };
        let config = launch_config(&reduce.spec, m32, n32, 1);
        // SAFETY: the workspace holds the slices' partials, A's and B's tails hold `m x tail`
        // and `tail x n` with their steps, C `m x n` with ldc, apart from the others. The sm_90a
        // module's reduction waits for the slices (`griddepcontrol.wait`) before it reads a
        // partial, so it may be launched as their dependent.
        let dependent = self.launches_dependents(&reduce.spec);
        unsafe { self.launch_after(&reduce.function, config, &mut params, dependent) }
            .map_err(Error::cuda("launching split_k_reduce"))
        // A workspace too large to keep is freed here, ordered on the stream after the reduction.
    }

    /// Queues `C = beta * C` (zeros without reading `C` when `beta == 0`) on `batch` members
    /// `c_step` apart: the whole GEMM when `alpha == 0` or `k == 0`.
    fn enqueue_scale_c(&self, beta: f32, batch: usize, mut c: DeviceMatMut, c_step: usize) -> Result<()> {
        // The kernel walks rows of a row-major matrix: C's lines, whichever its layout.
        let (n, m) = c.layout().extents(c.rows(), c.cols());
        let ldc = c.ld();
        let [m32, n32, ldc32] = to_u32([m, n, ldc], (m, n, 0), "scale_c")?;
        let scale = &self.loaded.scale_c;
        self.launch_members(&scale.spec, batch, m32, |z0, members, r0, rows| {
            let mut params = ScaleParams {
                m: rows,
                n: n32,
                beta,
                c: c.buf.slice_mut(z0 * c_step + r0 as usize * ldc..),
                ldc: ldc32,
                c_step: c_step as u64,
            };
            // SAFETY: from member z0 and row r0 on, each member's C holds `rows x n` with `ldc`
            // (the batch's span was checked), apart from the others; the kernel's own geometry.
            let config = launch_config(&scale.spec, rows, n32, members);
            unsafe { self.launch(&scale.function, config, &mut params) }
                .map_err(Error::cuda("launching scale_c"))
        })
    }

    /// `None` when the kernel can read the `batch` members of `x` (`step` apart) as they are:
    /// row-major, `shape` rows and columns, and with `aligned` 16-byte aligned with a leading
    /// dimension that is a multiple of 4. Otherwise row-major `shape` copies with leading
    /// dimension `shape.1`, made on the device (queued on the stream) by the `transpose` kernel
    /// (column-major `x`) or `pad` (row-major), and their step: `shape.0 * shape.1`, or 0 (one
    /// copy) when `step` is 0, in the buffer of `kept`. Elements beyond `x`'s own rows and
    /// columns are zero. `after_copy`: the kernel queued last is this call's copy of another
    /// operand, which the copy may start beside ([`launch_after`](Self::launch_after)).
    fn readable<'k>(
        &self,
        kept: &'k Kept,
        (x, step): (&DeviceMatRef, usize),
        batch: usize,
        shape: (usize, usize),
        aligned: bool,
        after_copy: bool,
    ) -> Result<Option<(Scratch<'k>, usize)>> {
        if !copied(x, step, shape, aligned) {
            return Ok(None);
        }
        let padded = shape != (x.rows(), x.cols());
        let kernel = if x.layout() == Layout::RowMajor { "pad" } else { "transpose" };
        let [rows, cols, ld, rows_pad, cols_pad] =
            to_u32([x.rows(), x.cols(), x.ld(), shape.0, shape.1], (x.rows(), x.cols(), 0), kernel)?;
        let (copies, copy_step) = if step == 0 { (1, 0) } else { (batch, shape.0 * shape.1) };
        let len =
            copies.checked_mul(shape.0 * shape.1).ok_or(Error::OutOfDeviceMemory { bytes: usize::MAX })?;
        // SAFETY: the transpose or the padding below writes every element of the first `len`
        // (the copies) before anything reads it, or the zeros do; all on the handle's stream.
        let mut scratch = unsafe { kept.get(&self.loaded.stream, len) }.map_err(alloc_error(len * 4))?;
        let dst = scratch.buf_mut();
        // A copy follows the zeros below in stream order, not as a dependent launch.
        let zeroed = x.layout() == Layout::ColMajor && padded;
        let dependent = after_copy && !zeroed && self.launches_dependents(&self.loaded.transpose.spec);
        if zeroed {
            // The transpose writes x's rows x cols; the rest is zero.
            self.loaded
                .stream
                .memset_zeros(&mut dst.slice_mut(..len))
                .map_err(Error::cuda("zeroing a padded copy"))?;
        }
        let steps = [step as u64, copy_step as u64];
        if x.layout() == Layout::RowMajor {
            let spec = &self.loaded.pad.spec;
            self.launch_members(spec, copies, rows_pad, |z0, members, r0, n_rows| {
                // Rows r0.. of the copies, from rows r0.. of x's members (none past their rows).
                let src = (z0 * step + r0 as usize * x.ld()).min(x.buf.len());
                let mut params = PadParams {
                    rows: rows.saturating_sub(r0).min(n_rows),
                    cols,
                    a: x.buf.slice(src..),
                    lda: ld,
                    rows_pad: n_rows,
                    cols_pad,
                    b: dst.slice_mut(z0 * copy_step + r0 as usize * shape.1..),
                    ldb: cols_pad,
                    a_step: steps[0],
                    b_step: steps[1],
                    list: 0,
                };
                // SAFETY: from member z0 and row r0 on, each `a` holds the source rows left (at
                // most n_rows) x cols with ld (the batch's span was checked) and each `b`
                // `n_rows x cols_pad` contiguous, apart from each other; distinct allocations;
                // the kernel's own geometry.
                let (function, config) =
                    (&self.loaded.pad.function, launch_config(spec, n_rows, cols_pad, members));
                unsafe { self.launch_after(function, config, &mut params, dependent) }
                    .map_err(Error::cuda("launching pad"))
            })?;
        } else {
            // Column-major rows x cols is row-major cols x rows (`src`); the copy is src^T.
            let spec = &self.loaded.transpose.spec;
            self.launch_members(spec, copies, cols, |z0, members, r0, src_rows| {
                // Rows r0.. of src are columns r0.. of the copy.
                let mut params = TransposeParams {
                    rows: src_rows,
                    cols: rows,
                    a: x.buf.slice(z0 * step + r0 as usize * x.ld()..),
                    lda: ld,
                    b: dst.slice_mut(z0 * copy_step + r0 as usize..),
                    ldb: cols_pad,
                    a_step: steps[0],
                    b_step: steps[1],
                };
                // SAFETY: from member z0 and row r0 on, each src holds `src_rows x rows` with its
                // ld, and each copy from column r0 on the `rows x src_rows` transpose with ld
                // `cols_pad`, apart from each other; distinct allocations; the kernel's own
                // geometry.
                let (function, config) =
                    (&self.loaded.transpose.function, launch_config(spec, src_rows, rows, members));
                unsafe { self.launch_after(function, config, &mut params, dependent) }
                    .map_err(Error::cuda("launching transpose"))
            })?;
        }
        Ok(Some((scratch, copy_step)))
    }

    /// Queues `function` over `config` with `params`, which push themselves in the order of
    /// the entry point's parameter list (both come from one declaration, see
    /// `sgemm_kernels::infra::params`).
    ///
    /// # Safety
    /// `function` is the entry point `params` were declared for, `params` satisfy its contract
    /// (every matrix valid for its shape, the output apart from the inputs) and `config` is
    /// the kernel's geometry.
    unsafe fn launch<'p, 'v: 'p, P: PushParams<'p, Sink<'p, 'v>>>(
        &'p self,
        function: &'p CudaFunction,
        config: LaunchConfig,
        params: &'p mut P,
    ) -> Result<(), DriverError> {
        let mut sink = Sink(self.loaded.stream.launch_builder(function), PhantomData);
        params.push(&mut sink);
        // SAFETY: the caller's contract.
        unsafe { sink.0.launch(config) }.map(drop)
    }

    /// Queues `function` as [`launch`](Self::launch) does or, with `dependent`, as a
    /// programmatic dependent launch of the kernel queued before it ([`dependent_launch`]).
    ///
    /// # Safety
    /// [`launch`](Self::launch)'s contract, and with `dependent`:
    /// [`launches_dependents`](Self::launches_dependents) holds for the kernel of `function`.
    unsafe fn launch_after<'p, 'v: 'p, P>(
        &'p self,
        function: &'p CudaFunction,
        config: LaunchConfig,
        params: &'p mut P,
        dependent: bool,
    ) -> Result<(), DriverError>
    where
        P: PushParams<'p, Sink<'p, 'v>> + PushParams<'p, dependent_launch::RawParams<'p, 'v>>,
    {
        if dependent {
            // SAFETY: the caller's contract; the kernel waits at its entry for the kernels
            // before it (`wait_for_earlier_kernels`) before it reads or writes a matrix.
            unsafe { dependent_launch::launch(&self.loaded.stream, function, config, params) }
        } else {
            // SAFETY: the caller's contract.
            unsafe { self.launch(function, config, params) }
        }
    }

    /// Whether the kernel `spec` may be launched as a programmatic dependent of the kernels
    /// before it: a production kernel (each of whose entries, GEMM or copy, waits for them
    /// first: `sgemm_kernels::infra::device::wait_for_earlier_kernels`) from the sm_90a module,
    /// on a device that has such launches.
    fn launches_dependents(&self, spec: &KernelSpec) -> bool {
        spec.module == Module::Production && self.loaded.info.module_arch == "sm_90a"
    }

    /// Calls `launch(z0, members, r0, rows)` for consecutive runs of at most 65535 members
    /// (`gridDim.z`) and, within them, consecutive blocks of at most `spec`'s grid limit of rows
    /// (`65535` tiles): a single call unless the batch or the matrix is larger than one grid
    /// can cover.
    fn launch_members(
        &self,
        spec: &KernelSpec,
        batch: usize,
        m: u32,
        mut launch: impl FnMut(usize, u32, u32, u32) -> Result<(), Error>,
    ) -> Result<()> {
        let max_rows = spec.max_rows_per_launch();
        for z0 in (0..batch).step_by(MAX_GRID_Z as usize) {
            let members = (batch - z0).min(MAX_GRID_Z as usize) as u32;
            let mut r0 = 0;
            while r0 < m {
                let rows = max_rows.min(m - r0);
                launch(z0, members, r0, rows)?;
                r0 += rows;
            }
        }
        Ok(())
    }

    /// Waits for everything queued on this handle's stream.
    pub fn synchronize(&self) -> Result<()> {
        self.loaded.stream.synchronize().map_err(Error::cuda("waiting for the GPU"))
    }
}

/// The GEMM kernels of `module` for `arch`, in ladder order.
fn module_specs(module: Module, arch: &str) -> impl Iterator<Item = &'static KernelSpec> {
    GEMM_KERNELS.iter().filter(move |s| s.module == module && s.in_module(arch))
}

/// Loads `spec`'s entries from `module`, raising the dynamic shared memory limit to what the
/// kernel launches with.
fn load_kernel(module: &Arc<CudaModule>, spec: KernelSpec) -> Result<GpuKernel> {
    let load_entry = |entry: &str| -> Result<CudaFunction> {
        let function = module.load_function(entry).map_err(Error::cuda("loading a kernel"))?;
        if spec.smem_bytes > 48 * 1024 {
            function
                .set_attribute(
                    CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    spec.smem_bytes as i32,
                )
                .map_err(Error::cuda("raising a kernel's shared memory limit"))?;
        }
        Ok(function)
    };
    let function = load_entry(spec.entry)?;
    let vec4 = spec.vec4_entry.map(load_entry).transpose()?;
    let resident = |f: &CudaFunction| {
        f.occupancy_max_active_blocks_per_multiprocessor(spec.threads(), spec.smem_bytes as usize, None)
            .map_err(Error::cuda("reading a kernel's occupancy"))
    };
    let mut blocks_per_sm = resident(&function)?;
    if let Some(vec4) = &vec4 {
        blocks_per_sm = blocks_per_sm.min(resident(vec4)?);
    }
    Ok(GpuKernel {
        spec,
        function,
        vec4,
        blocks_per_sm: blocks_per_sm.max(1),
        cost: cost::cost_of(spec.name),
    })
}

/// A launch being built: what a kernel's parameter struct pushes itself into, with matrices as
/// views of device buffers.
struct Sink<'p, 'v>(LaunchArgs<'p>, PhantomData<&'v ()>);

impl<'p, 'v: 'p> ParamSink<'p> for Sink<'p, 'v> {
    type In = CudaView<'v, f32>;
    type Out = CudaViewMut<'v, f32>;

    fn u32(&mut self, value: &'p u32) {
        self.0.arg(value);
    }

    fn u64(&mut self, value: &'p u64) {
        self.0.arg(value);
    }

    fn f32(&mut self, value: &'p f32) {
        self.0.arg(value);
    }

    fn input(&mut self, value: &'p CudaView<'v, f32>) {
        self.0.arg(value);
    }

    fn output(&mut self, value: &'p mut CudaViewMut<'v, f32>) {
        self.0.arg(value);
    }
}

/// `values` as the `u32` sizes the kernels take, or [`Error::ShapeTooLarge`] naming `kernel` and
/// the call's `(m, n, k)` when one does not fit.
fn to_u32<const N: usize>(
    values: [usize; N],
    (m, n, k): (usize, usize, usize),
    kernel: &'static str,
) -> Result<[u32; N]> {
    let mut out = [0; N];
    for (out, value) in out.iter_mut().zip(values) {
        *out = u32::try_from(value).map_err(|_| Error::ShapeTooLarge {
            m,
            n,
            k,
            kernel,
            why: "a size or leading dimension exceeds u32",
        })?;
    }
    Ok(out)
}

/// The tiles of `spec` covering an `m x n` `C`.
fn tiles(spec: &KernelSpec, m: usize, n: usize) -> usize {
    m.div_ceil(spec.tile.0 as usize) * n.div_ceil(spec.tile.1 as usize)
}

/// The kernels for products too thin for tiles, which [`Gpu::chosen_for`] picks by shape alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Skinny {
    /// `vector`.
    Vector,
    /// `few_rows`.
    FewRows,
    /// `few_rows`'s tall variant.
    FewRowsTall,
}

/// The first rules of [`Gpu::chosen_for`], on the row-major shape: one column, or one row with
/// `k <= 2 n` or (a single product) a `K` deep enough for `vector` to split it
/// [`DEEP_ROW_SLICES`] ways, or to split it at all for a row of at most 16 columns, to
/// `vector`; at most [`few_rows::FEW`] rows to `few_rows`; a single product of at most
/// [`TALL_ROWS`] rows to its tall variant where that runs well (below); anything else to the
/// tile kernels (`None`).
///
/// The tall variant's rows of tiles each read all of `B`: it takes a product whose `B` fits in
/// the L2 cache (`l2_bytes`), so that the second row of tiles reads it from there, and whose
/// rows of `A` and `B` are a multiple of 4 floats (`k`, `n`), for its 16-byte entry; the tile
/// kernels are faster than its 4-byte one (`docs/performance-notes.md`).
fn skinny_kernel(batch: usize, m: usize, n: usize, k: usize, l2_bytes: usize) -> Option<Skinny> {
    // A single row whose K `vector` splits at least DEEP_ROW_SLICES ways, or at all when the row
    // spans at most half its block's columns (which it then takes in groups of lanes).
    let row_for_vector = || {
        batch == 1
            && vector::SPEC.k_slices.is_some_and(|slice| {
                let slice = slice as usize;
                k >= DEEP_ROW_SLICES * slice || (2 * n <= vector::SPEC.tile.1 as usize && k >= 2 * slice)
            })
    };
    if vector::SPEC.shapes.fits(m, n) && (n == 1 || k <= 2 * n || row_for_vector()) {
        Some(Skinny::Vector)
    } else if few_rows::SPEC.shapes.fits(m, n) {
        Some(Skinny::FewRows)
    } else if batch == 1
        && m <= TALL_ROWS
        && k.is_multiple_of(4)
        && n.is_multiple_of(4)
        && k.saturating_mul(n).saturating_mul(4) <= l2_bytes
    {
        Some(Skinny::FewRowsTall)
    } else {
        None
    }
}

/// `c` described in [`vector_c_layout`]'s layout where `kernel` computes the row-major shape of
/// that problem, else as it is: a matrix-vector product whose matrix would be read transposed
/// (copied by the `transpose` kernel, the whole matrix's traffic twice before the product's
/// once) is computed as its transpose, which reads the matrix as it lies.
fn oriented<R: View, W: View>(kernel: &GpuKernel, a: &R, b: &R, c: W) -> W {
    let layout = vector_c_layout(a, b, &c);
    let (rows, cols, _) = c.dims();
    let (m, n) = row_major_shape(layout, rows, cols);
    if layout != c.layout() && kernel.spec.shapes.fits(m, n) { relaid(c, layout) } else { c }
}

/// Whether a kernel padded as `padding` says runs its 16-byte entry on zero-padded copies of
/// the operands it cannot read 16 bytes at a time as they are, in an `m x n x k` product where
/// the padding alone would copy `copied` elements of them: always for a kernel without a
/// 4-byte entry, never for one whose 4-byte entry is always the better, and for
/// [`Padding::Above`] when there is nothing to copy or the product has enough multiply-adds for
/// the copies' launch and per copied element.
fn pads(padding: Padding, copied: usize, (m, n, k): (usize, usize, usize)) -> bool {
    match padding {
        Padding::Never | Padding::AsTheyLie => false,
        Padding::Always => true,
        Padding::Above { fixed, per_copied } => {
            copied == 0
                || (m as u128) * (n as u128) * (k as u128)
                    >= u128::from(fixed) + u128::from(per_copied) * copied as u128
        }
    }
}

/// Whether [`Gpu::readable`] copies `x` (members `step` apart) to a row-major `shape` for a kernel
/// that reads it row-major, with `aligned` 16-byte aligned rows: when it is column-major, when
/// `shape` pads it, or when `aligned` asks for rows it does not have.
fn copied(x: &DeviceMatRef, step: usize, shape: (usize, usize), aligned: bool) -> bool {
    let padded = shape != (x.rows(), x.cols());
    x.layout() == Layout::ColMajor || padded || (aligned && !x.lines_aligned(step))
}

/// The elements of row-major-`C` operands `a` and `b` (`step` apart in a batch) of an `m x n x
/// k` member that padding them for a 16-byte entry would copy beyond the copies made anyway:
/// transposed operands are copied in any case (and pad for free), others when a row is not a
/// multiple of 4 floats long or not 16-byte aligned, and `B` also when `k` is not a multiple of
/// 4 (its rows are then read up to `k` rounded up).
fn padding_copies(
    (a, a_step): (&DeviceMatRef, usize),
    (b, b_step): (&DeviceMatRef, usize),
    (m, n, k): (usize, usize, usize),
) -> usize {
    let as_is = |x: &DeviceMatRef, step: usize, cols: usize| {
        x.layout() == Layout::ColMajor || (cols.is_multiple_of(4) && x.lines_aligned(step))
    };
    let a_copied = if as_is(a, a_step, k) { 0 } else { m * k };
    let b_copied = if as_is(b, b_step, n) && (k.is_multiple_of(4) || b.layout() == Layout::ColMajor) {
        0
    } else {
        k * n
    };
    a_copied + b_copied
}

/// [`Gpu::k_slices`] of a kernel of launch geometry `spec` that fills the GPU with `slots`
/// blocks, by the fullness of its waves: 1 for a kernel that does not split, else
/// [`slice_count`].
fn slices_of(spec: &KernelSpec, slots: usize, m: usize, n: usize, k: usize) -> usize {
    match spec.k_slices {
        Some(shallowest) => {
            slice_count(tiles(spec, m, n), slots, k, shallowest as usize, |s| slices_fit(spec, k, s))
        }
        None => 1,
    }
}

/// Whether `slices` K slices of a `K` of `k` suit `spec`: any count, except for a kernel that
/// reads `B` column-major, whose slices (each a multiple of 4 deep, for its 16-byte loads) must
/// leave no columns of `K` over. The reduction would multiply those by `B`'s columns one column
/// a thread, a warp's 32 loads 32 columns apart, which costs more than the split or the copy of
/// `B` gains (`docs/performance-notes.md`).
pub(crate) fn slices_fit(spec: &KernelSpec, k: usize, slices: usize) -> bool {
    !spec.reads_b_transposed || k.is_multiple_of(4 * slices)
}

/// The most K slices the cost model may cut an `m x n x k` product into on a tile kernel of
/// launch geometry `spec` that fills the GPU with `slots` blocks: 1 for a kernel that does not
/// split or whose tiles fill two waves of slots, else as many as keep each slice at least
/// [`KernelSpec::k_slices`] deep, at most [`MAX_SLICES`]. (Why two waves: the performance
/// notes, "Split grids of up to two waves".)
fn most_slices(spec: &KernelSpec, slots: usize, m: usize, n: usize, k: usize) -> usize {
    if tiles(spec, m, n) < 2 * slots { deepest_split(spec, k) } else { 1 }
}

/// The most K slices `spec` may cut a `K` of `k` into, full grid or not: 1 for a kernel that
/// does not split, else as many as keep each slice at least [`KernelSpec::k_slices`] deep, at
/// most [`MAX_SLICES`].
fn deepest_split(spec: &KernelSpec, k: usize) -> usize {
    match spec.k_slices {
        Some(shallowest) => MAX_SLICES.min(k / shallowest as usize).max(1),
        None => 1,
    }
}

/// [`Gpu::k_slices`] for a grid of `tiles` blocks on `slots` resident ones, an inner dimension
/// `k` and slices at least `shallowest` deep: 1 when the tiles fill the slots, else the count
/// from 1 to [`MAX_SLICES`] that `fits` whose waves are fullest (the fewest on a tie).
fn slice_count(
    tiles: usize,
    slots: usize,
    k: usize,
    shallowest: usize,
    fits: impl Fn(usize) -> bool,
) -> usize {
    if tiles >= slots {
        return 1;
    }
    let fullness = |s: usize| (tiles * s) as f64 / ((tiles * s).div_ceil(slots) * slots) as f64;
    let mut best = 1;
    for s in (2..=MAX_SLICES.min(k / shallowest)).filter(|&s| fits(s)) {
        if fullness(s) > fullness(best) {
            best = s;
        }
    }
    best
}

/// The blocks along `gridDim.z` for `members` members of a batch whose `C` is `tiles` tiles of
/// `spec`, on a GPU holding `slots` of its blocks at once: one a member, unless the kernel
/// computes several in turn ([`KernelSpec::members_per_block`]). Then the members a block
/// takes (up to that limit) are those that need the fewest rounds of tiles on an SM
/// (`ceil(blocks / slots)` waves of blocks, each as long as its members), and on a tie the most,
/// since the kernel's pipeline runs on from one member into the next.
pub(crate) fn member_groups(spec: &KernelSpec, members: usize, tiles: usize, slots: usize) -> usize {
    let most = (spec.members_per_block as usize).clamp(1, members.max(1));
    let rounds = |per: usize| (members.div_ceil(per) * tiles).div_ceil(slots.max(1)) * per;
    let per = (1..=most).rev().min_by_key(|&per| rounds(per)).unwrap_or(1);
    members.div_ceil(per)
}

/// `spec`'s launch over an `m x n` C, with `z` blocks per tile along `gridDim.z`.
fn launch_config(spec: &KernelSpec, m: u32, n: u32, z: u32) -> LaunchConfig {
    let (x, y, _) = spec.grid(m, n);
    LaunchConfig {
        grid_dim: (x, y, z),
        block_dim: (spec.block.0, spec.block.1, 1),
        shared_mem_bytes: spec.smem_bytes,
    }
}

/// Maps an allocation failure to [`Error::OutOfDeviceMemory`], anything else to [`Error::Cuda`].
fn alloc_error(bytes: usize) -> impl FnOnce(DriverError) -> Error {
    move |e| match e.0 {
        CUresult::CUDA_ERROR_OUT_OF_MEMORY => Error::OutOfDeviceMemory { bytes },
        _ => Error::Cuda { during: "allocating device memory", source: e },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use sgemm_kernels::GEMM_VARIANTS;

    #[test]
    fn thin_products_go_to_the_kernels_made_for_them() {
        use Skinny::*;
        for (batch, m, n, k, expected) in [
            (1, 1, 4096, 8192, Some(Vector)),
            (1, 4096, 1, 8192, Some(Vector)),
            (1, 8, 1, 4096, Some(Vector)),
            (1, 1, 256, 4096, Some(FewRows)),
            (1, 1, 131, 3001, Some(FewRows)),
            (1, 1, 256, 65536, Some(Vector)),
            (1, 1, 3, 100_001, Some(Vector)),
            (1, 1, 16, 4096, Some(Vector)),
            (1, 1, 3, 4095, Some(FewRows)),
            (1, 1, 17, 10_000, Some(FewRows)),
            (2, 1, 256, 65536, Some(FewRows)),
            (1, 2, 256, 65536, Some(FewRows)),
            (1, 8, 1024, 1024, Some(FewRows)),
            (1, 8, 256, 8192, Some(FewRows)),
            (32, 5, 64, 64, Some(FewRows)),
            (1, 9, 2048, 4096, Some(FewRowsTall)),
            (1, 16, 512, 512, Some(FewRowsTall)),
            (2, 16, 512, 512, None),
            // B past the L2 cache (50 MiB here), or rows not a multiple of 4 floats.
            (1, 10, 9592, 3240, None),
            (1, 10, 9592, 3241, None),
            (1, 14, 1000, 3001, None),
            (1, 17, 4096, 4096, None),
            (1, 64, 64, 64, None),
        ] {
            assert_eq!(skinny_kernel(batch, m, n, k, 50 << 20), expected, "{batch} x {m}x{n}x{k}");
        }
    }

    #[test]
    fn blocks_take_several_members_where_that_needs_fewer_rounds_of_tiles() {
        let (one, several) = (&small_tile::SPEC, &specialized::SPEC);
        let most = several.members_per_block as usize;
        // (members, tiles a member, blocks at once) -> blocks along z.
        for (members, tiles, slots, groups) in [
            // One wave of blocks already: one member each.
            (32, 1, 132, 32),
            (132, 1, 132, 132),
            // 1024 one-tile members on 132 SMs: 8 each in 128 blocks (7.76 would be ideal).
            (1024, 1, 132, 128),
            // 256 members of 16 tiles: 32 each, 8 blocks per tile, 128 blocks in one wave.
            (256, 16, 132, 8),
            // 301 members of 2 tiles: 5 each, in one wave of 122 blocks.
            (301, 2, 132, 61),
        ] {
            assert_eq!(member_groups(several, members, tiles, slots), groups, "{members} x {tiles}");
            assert_eq!(member_groups(one, members, tiles, slots), members);
        }
        // However large the batch, no block gets more than the kernel takes.
        for members in [65_535, 4097, 65] {
            let groups = member_groups(several, members, 1, 132);
            assert!(members.div_ceil(groups) <= most, "{members}: {groups}");
        }
    }

    #[test]
    fn operands_are_padded_where_the_copies_cost_less_than_the_4_byte_loop() {
        let above = specialized::SPEC.padding;
        let both = |(m, n, k): (usize, usize, usize)| m * k + k * n;
        // Large products pad: the copies are a small part of the work.
        for shape in
            [(2047, 2047, 2047), (4095, 4095, 4095), (8191, 8191, 1000), (2224, 10093, 97), (1711, 982, 324)]
        {
            assert!(pads(above, both(shape), shape), "{shape:?}");
        }
        // A side short enough that the copies would be a large part of the product does not.
        for shape in [(11162, 175, 3225), (10861, 20, 45), (131, 133, 9767), (30, 6606, 2265)] {
            assert!(!pads(above, both(shape), shape), "{shape:?}");
        }
        // The strict tile pads large products only: on small ones the copies' launch costs more
        // than its 4-byte loads lose.
        let strict = split_k::SPEC.padding;
        for shape in [(2047, 2047, 2047), (4095, 4095, 4095), (4097, 4097, 4097)] {
            assert!(pads(strict, both(shape), shape), "{shape:?}");
        }
        for shape in [(5697, 1974, 8), (3189, 990, 71), (2164, 1224, 73), (850, 8777, 17), (1023, 1023, 1023)]
        {
            assert!(!pads(strict, both(shape), shape), "{shape:?}");
        }
        // Nothing to copy: the 16-byte entry as it is.
        assert!(pads(above, 0, (5, 5, 5)));
        assert!(pads(strict, 0, (5, 5, 5)));
        assert!(pads(Padding::Always, both((5, 5, 5)), (5, 5, 5)));
        assert!(!pads(Padding::Never, 0, (4096, 4096, 4096)));
        // A kernel that takes only operands it reads as they lie never pads them.
        assert!(!pads(Padding::AsTheyLie, both((4095, 4095, 4095)), (4095, 4095, 4095)));
    }

    #[test]
    fn split_k_fills_waves_within_its_bounds() {
        let any = |_: usize| true;
        // The H100's counts (132 SMs): the wgmma kernels 1 block per SM, split_k and few_rows 2,
        // small_tile 4; tile kernels' slices at least their tile height, few_rows's 128 rows.
        assert_eq!(slice_count(264, 264, 4096, 128, any), 1, "a full wave is not split");
        assert_eq!(
            slice_count(64, 132, 1024, 128, any),
            2,
            "1024^3 on the wgmma kernels: two slices fill 128 of 132"
        );
        assert_eq!(slice_count(32, 264, 1024, 128, any), 8, "8 x 1024 x 1024 on few_rows");
        assert_eq!(slice_count(4, 264, 100, 128, any), 1, "a k shallower than two slices is not split");
        // Only counts that divide 1024 / 4 (a column-major B read as it lies): 8 x 1024 x 1024
        // on few_rows still takes 8; where 3 slices of 1000 would fill one wave, 5 (two waves,
        // 83% full) are the fullest of those that divide it.
        let quads = |k: usize| move |s: usize| k.is_multiple_of(4 * s);
        assert_eq!(slice_count(32, 264, 1024, 128, quads(1024)), 8);
        assert_eq!(slice_count(88, 264, 1000, 128, any), 3);
        assert_eq!(slice_count(88, 264, 1000, 128, quads(1000)), 5);
        for tiles in 1..300 {
            for (slots, k, shallowest) in
                [(132, 8192, 128), (264, 1000, 128), (528, 300, 64), (528, 4096, 64)]
            {
                let s = slice_count(tiles, slots, k, shallowest, any);
                assert!((1..=MAX_SLICES).contains(&s), "{tiles} {slots} {k}: {s}");
                assert!(s == 1 || k / s >= shallowest, "{tiles} {slots} {k}: {s} slices too shallow");
                assert!(s == 1 || tiles < slots, "{tiles} {slots}: a full grid split");
                let fitting = slice_count(tiles, slots, k, shallowest, quads(k));
                assert!(k.is_multiple_of(4 * fitting) || fitting == 1, "{tiles} {slots} {k}: {fitting}");
            }
        }
    }

    /// Records the PTX type of each parameter a struct pushes.
    struct PtxTypes(Vec<&'static str>);

    impl<'p> ParamSink<'p> for PtxTypes {
        type In = ();
        type Out = ();

        fn u32(&mut self, _: &'p u32) {
            self.0.push(".u32");
        }

        fn u64(&mut self, _: &'p u64) {
            self.0.push(".u64");
        }

        fn f32(&mut self, _: &'p f32) {
            self.0.push(".f32");
        }

        fn input(&mut self, _: &'p ()) {
            self.0.push(".u64");
        }

        fn output(&mut self, _: &'p mut ()) {
            self.0.push(".u64");
        }
    }

    fn pushed<'p, P: PushParams<'p, PtxTypes>>(params: &'p mut P) -> Vec<&'static str> {
        let mut types = PtxTypes(Vec::new());
        params.push(&mut types);
        types.0
    }

    /// `(entry, parameter types)` of every entry point of a PTX module.
    fn entries(ptx: &str) -> Vec<(String, Vec<String>)> {
        ptx.split(".entry ")
            .skip(1)
            .map(|entry| {
                let (name, rest) = entry.split_once('(').unwrap();
                let list = rest.split_once(')').unwrap().0;
                let types = list.split(',').filter_map(|p| p.split_whitespace().nth(1)).map(String::from);
                (name.trim().to_string(), types.collect())
            })
            .collect()
    }

    /// Every entry point of every embedded module takes exactly the parameters its host-side
    /// struct pushes, in that order: the declaration the two share cannot drift from the PTX.
    #[test]
    fn every_entry_point_takes_what_the_host_pushes() {
        let gemm = pushed(&mut GemmParams {
            m: 0,
            n: 0,
            k: 0,
            alpha: 0.0,
            a: (),
            lda: 0,
            b: (),
            ldb: 0,
            beta: 0.0,
            c: (),
            ldc: 0,
            a_step: 0,
            b_step: 0,
            c_step: 0,
            members: 0,
        });
        let scale = pushed(&mut ScaleParams::<()> { m: 0, n: 0, beta: 0.0, c: (), ldc: 0, c_step: 0 });
        let pad = pushed(&mut PadParams {
            rows: 0,
            cols: 0,
            a: (),
            lda: 0,
            rows_pad: 0,
            cols_pad: 0,
            b: (),
            ldb: 0,
            a_step: 0,
            b_step: 0,
            list: 0,
        });
        let transpose = pushed(&mut TransposeParams {
            rows: 0,
            cols: 0,
            a: (),
            lda: 0,
            b: (),
            ldb: 0,
            a_step: 0,
            b_step: 0,
        });
        let reduce = pushed(&mut ReduceParams {
            m: 0,
            n: 0,
            slices: 0,
            workspace: (),
            tail: 0,
            a: (),
            a_row_step: 0,
            a_col_step: 0,
            b: (),
            b_row_step: 0,
            b_col_step: 0,
            alpha: 0.0,
            beta: 0.0,
            c: (),
            ldc: 0,
        });
        let gemm_entries: Vec<&str> = GEMM_KERNELS
            .iter()
            .chain(GEMM_VARIANTS)
            .flat_map(|s| std::iter::once(s.entry).chain(s.vec4_entry))
            .collect();
        let mut checked = 0;
        for (major, minor) in [(8, 0), (9, 0)] {
            let images = images_for(major, minor).unwrap();
            for ptx in [images.production_ptx, images.ladder_ptx] {
                for (name, types) in entries(ptx) {
                    let expected = match name.as_str() {
                        n if n == scale::SPEC.entry => &scale,
                        n if n == pad::SPEC.entry => &pad,
                        n if n == transpose::SPEC.entry => &transpose,
                        n if n == split_k::REDUCE.entry => &reduce,
                        n if gemm_entries.contains(&n) => &gemm,
                        _ => panic!("entry point {name} has no parameter declaration on the host"),
                    };
                    assert_eq!(&types, expected, "{} {name}", images.arch);
                    checked += 1;
                }
            }
        }
        assert!(checked >= 40, "only {checked} entry points found");
    }
}
