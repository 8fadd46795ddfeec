//! Batches on the GPU ([`crate::batch`]): every launch covers the whole batch, one member per
//! `blockIdx.z`, or several in turn for a kernel that takes them (the kernels' batch
//! convention, `sgemm_kernels::infra::params`).
//!
//! A strided batch goes to the kernels as it is: each operand's members are its pointer plus
//! `z * stride`. A list of views has no stride, and the GEMM kernels take none of the tables
//! of addresses a list would need. So a list on the device is
//! gathered into one strided buffer per operand by the `pad` kernel reading a table of
//! addresses, multiplied as a strided batch, and `C` scattered back the same way: three or
//! four launches for the whole batch, and one more read and write of each operand. From the
//! host, a list is packed into strided buffers on the host instead, on its way to the device.

use cudarc::driver::{CudaSlice, DevicePtr, DevicePtrMut, DeviceSlice};
use sgemm_kernels::helpers::pad::PadParams;

use super::kept::{Kept, Scratch};
use super::{DeviceMatMut, DeviceMatRef, Gpu, GpuKernel, alloc_error, launch_config, pinned, to_u32};
use crate::batch::{Members, Strided, check_counts, check_list, check_strided, common_shape};
use crate::matrix::{Layout, MatMut, MatRef, check_shapes, span};
use crate::semantics::{Work, work};
use crate::{Error, Result};

impl Gpu {
    /// `C_i = alpha * op(A_i) * op(B_i) + beta * C_i` for `i < batch` on host views, strided
    /// (see [`crate::batch`]): copies each operand's members to the device in one piece, runs
    /// [`chosen_for`](Self::chosen_for) over the whole batch in one launch, and copies each
    /// member of `C` back (nothing between them is written).
    pub fn gemm_strided(
        &self,
        batch: usize,
        alpha: f32,
        a: &Strided<MatRef>,
        b: &Strided<MatRef>,
        beta: f32,
        c: &mut Strided<MatMut>,
    ) -> Result<()> {
        let (a_m, b_m) = (Members::of(&a.matrix, a.stride), Members::of(&b.matrix, b.stride));
        let c_m = Members::of(&c.matrix.as_ref(), c.stride);
        check_strided(batch, a_m, b_m, c_m)?;
        let (rows, cols, k) = (c.matrix.rows, c.matrix.cols, a.matrix.cols);
        let work = work(rows, cols, k, alpha, beta);
        if batch == 0 || work == Work::Nothing {
            return Ok(());
        }
        // Each operand's members, from the first one's first element to the last one's last.
        let extent = |x: Members| x.batch_span(batch).expect("checked: the buffer holds it");
        let (a_len, b_len, c_len) = (extent(a_m), extent(b_m), extent(c_m));
        // Large operands are page-locked for the call, so that their copies are direct DMA;
        // the guards unregister them after the result is back.
        let ctx = self.loaded.stream.context();
        let mut guards = vec![pinned::Pinned::new(ctx, &c.matrix.data[..c_len])];
        if work == Work::Product {
            guards.push(pinned::Pinned::new(ctx, &a.matrix.data[..a_len]));
            guards.push(pinned::Pinned::new(ctx, &b.matrix.data[..b_len]));
        }
        // The device copies go to buffers kept between calls. With beta == 0 C is not read: no
        // upload (zeros, so that the copy back reads no uninitialized memory).
        let mut c_dev = self.upload_kept(&self.loaded.host_c, &c.matrix.data[..c_len], beta != 0.0)?;
        let cm = &c.matrix;
        let c_view =
            DeviceMatMut::new(c_dev.buf_mut().slice_mut(..c_len), cm.layout, cm.rows, cm.cols, cm.ld)?;
        if work == Work::ScaleC {
            // A and B are not read, so not copied either.
            self.enqueue_scale_c(beta, batch, c_view, c.stride)?;
        } else {
            let a_dev = self.upload_kept(&self.loaded.host_a, &a.matrix.data[..a_len], true)?;
            let b_dev = self.upload_kept(&self.loaded.host_b, &b.matrix.data[..b_len], true)?;
            let (am, bm) = (&a.matrix, &b.matrix);
            let a_s = Strided::new(
                DeviceMatRef::new(a_dev.buf().slice(..a_len), am.layout, am.rows, am.cols, am.ld)?,
                a.stride,
            );
            let b_s = Strided::new(
                DeviceMatRef::new(b_dev.buf().slice(..b_len), bm.layout, bm.rows, bm.cols, bm.ld)?,
                b.stride,
            );
            let kernel = self.chosen_oriented(batch, &a_s, &b_s, &c_view);
            self.enqueue_members(kernel, batch, alpha, a_s, b_s, beta, Strided::new(c_view, c.stride))?;
        }
        self.download_members(c_dev.buf(), batch, c)?;
        drop(guards);
        Ok(())
    }

    /// `C_i = alpha * op(A_i) * op(B_i) + beta * C_i` for each `i` of host lists of equal length
    /// whose members have one shape and layout per operand: each operand is packed into one
    /// buffer on the host, then as [`gemm_strided`](Self::gemm_strided). Each member is checked
    /// as a single product; nothing outside each `C_i`'s block is written.
    pub fn gemm_batch(
        &self,
        alpha: f32,
        a: &[MatRef],
        b: &[MatRef],
        beta: f32,
        c: &mut [MatMut],
    ) -> Result<()> {
        check_list(a, b, c)?;
        let (Some(a0), Some(b0), Some(c0)) = (a.first(), b.first(), c.first()) else { return Ok(()) };
        let work = work(c0.rows, c0.cols, a0.cols, alpha, beta);
        if work == Work::Nothing {
            return Ok(());
        }
        // Without a product, A and B are not read: the first members stand for all.
        let (a_packed, a_s) = if work == Work::Product { pack(a) } else { (Vec::new(), 0) };
        let (b_packed, b_s) = if work == Work::Product { pack(b) } else { (Vec::new(), 0) };
        let (a_view, b_view) = match work {
            Work::Product => {
                (Strided::new(packed_view(&a_packed, a0), a_s), Strided::new(packed_view(&b_packed, b0), b_s))
            }
            _ => (Strided::new(*a0, 0), Strided::new(*b0, 0)),
        };
        let c_refs: Vec<MatRef> = c.iter().map(|m| m.as_ref()).collect();
        // With beta == 0 C is not read: zeros stand for it.
        let (mut c_packed, c_s) = if beta == 0.0 {
            let size = c0.rows * c0.cols;
            (vec![0.0; c.len() * size], size)
        } else {
            pack(&c_refs)
        };
        let (c_layout, c_rows, c_cols) = (c0.layout, c0.rows, c0.cols);
        let ld = c_layout.extents(c_rows, c_cols).0.max(1);
        let c_view = MatMut { data: &mut c_packed, rows: c_rows, cols: c_cols, ld, layout: c_layout };
        self.gemm_strided(c.len(), alpha, &a_view, &b_view, beta, &mut Strided::new(c_view, c_s))?;
        for (member, packed) in c.iter_mut().zip(c_packed.chunks(c_s.max(1))) {
            let (inner, outer) = member.layout.extents(member.rows, member.cols);
            for line in 0..outer {
                member.data[line * member.ld..][..inner].copy_from_slice(&packed[line * inner..][..inner]);
            }
        }
        Ok(())
    }

    /// [`gemm_strided`](Self::gemm_strided) on matrices already on the device: views of any
    /// cudarc buffers of this handle's context, each operand's members `stride` elements
    /// apart, in any layout. Returns when the result is complete.
    pub fn gemm_strided_device(
        &self,
        batch: usize,
        alpha: f32,
        a: Strided<DeviceMatRef>,
        b: Strided<DeviceMatRef>,
        beta: f32,
        c: Strided<DeviceMatMut>,
    ) -> Result<()> {
        let kernel = self.chosen_oriented(batch, &a, &b, &c);
        self.enqueue_strided(kernel, batch, alpha, a, b, beta, c)?;
        self.synchronize()
    }

    /// [`enqueue`](Self::enqueue) for a strided batch: the checks of
    /// [`gemm_strided`](Self::gemm_strided), then every launch queued for the whole batch.
    #[allow(clippy::too_many_arguments)]
    pub fn enqueue_strided(
        &self,
        kernel: &GpuKernel,
        batch: usize,
        alpha: f32,
        a: Strided<DeviceMatRef>,
        b: Strided<DeviceMatRef>,
        beta: f32,
        c: Strided<DeviceMatMut>,
    ) -> Result<()> {
        let members = |m: &DeviceMatRef, stride: usize| Members {
            layout: m.layout(),
            rows: m.rows(),
            cols: m.cols(),
            ld: m.ld(),
            len: m.buf.len(),
            stride,
        };
        let (a_m, b_m) = (members(&a.matrix, a.stride), members(&b.matrix, b.stride));
        let c_m = members(&c.matrix.as_ref(), c.stride);
        check_strided(batch, a_m, b_m, c_m)?;
        if batch == 0 {
            return Ok(());
        }
        self.enqueue_members(kernel, batch, alpha, a, b, beta, c)
    }

    /// `C_i = alpha * op(A_i) * op(B_i) + beta * C_i` for each `i` of lists of device views of
    /// equal length, whose members have one shape, layout and leading dimension per operand
    /// (cuBLAS's pointer-array batch): gathered into strided scratch buffers, multiplied in one
    /// launch, `C` scattered back ([module docs](self)). Returns when the result is complete.
    pub fn gemm_batch_device(
        &self,
        alpha: f32,
        a: &[DeviceMatRef],
        b: &[DeviceMatRef],
        beta: f32,
        c: &mut [DeviceMatMut],
    ) -> Result<()> {
        check_counts(a.len(), b.len(), c.len())?;
        let shape = |m: &DeviceMatRef| (m.layout(), m.rows(), m.cols(), m.ld());
        common_shape("A", a, shape, true)?;
        common_shape("B", b, shape, true)?;
        common_shape("C", c, |m| (m.layout(), m.rows(), m.cols(), m.ld()), true)?;
        let (Some(a0), Some(b0), Some(c0)) = (a.first(), b.first(), c.first()) else { return Ok(()) };
        check_shapes((a0.rows(), a0.cols()), (b0.rows(), b0.cols()), (c0.rows(), c0.cols()))?;
        let ours = self.loaded.stream.context();
        let streams = a.iter().map(|m| m.buf.stream()).chain(b.iter().map(|m| m.buf.stream()));
        if streams.chain(c.iter().map(|m| m.buf.stream())).any(|s| s.context() != ours) {
            return Err(Error::WrongContext);
        }
        let batch = c.len();
        let work = work(c0.rows(), c0.cols(), a0.cols(), alpha, beta);
        if work == Work::Nothing {
            return Ok(());
        }
        let stream = self.loaded.stream.clone();
        let gathered = |list: &[DeviceMatRef]| -> Result<(CudaSlice<f32>, DeviceShape)> {
            let shape = DeviceShape::of(list[0].layout(), list[0].rows(), list[0].cols(), list[0].ld());
            let mut scratch = self.zeros(batch * shape.size())?;
            {
                let sources: Vec<_> = list.iter().map(|m| m.buf.device_ptr(&stream)).collect();
                let (base, _record) = scratch.device_ptr_mut(&stream);
                let pairs: Vec<(u64, u64)> = (sources.iter().enumerate())
                    .map(|(z, (src, _))| (*src, base + (z * shape.size() * 4) as u64))
                    .collect();
                self.copy_listed(&pairs, shape.outer, shape.inner, shape.ld, shape.inner)?;
            }
            Ok((scratch, shape))
        };
        let c_shape = DeviceShape::of(c0.layout(), c0.rows(), c0.cols(), c0.ld());
        let mut c_scratch = if beta == 0.0 {
            self.zeros(batch * c_shape.size())?
        } else {
            let refs: Vec<DeviceMatRef> = c.iter().map(DeviceMatMut::as_ref).collect();
            gathered(&refs)?.0
        };
        {
            let c_view = c_shape.view_mut(&mut c_scratch)?;
            if work == Work::Product {
                let ((a_buf, a_shape), (b_buf, b_shape)) = (gathered(a)?, gathered(b)?);
                let a_s = Strided::new(a_shape.view(&a_buf)?, a_shape.size());
                let b_s = Strided::new(b_shape.view(&b_buf)?, b_shape.size());
                let c_s = Strided::new(c_view, c_shape.size());
                let kernel = self.chosen_oriented(batch, &a_s, &b_s, &c_s);
                self.enqueue_members(kernel, batch, alpha, a_s, b_s, beta, c_s)?;
            } else {
                self.enqueue_scale_c(beta, batch, c_view, c_shape.size())?;
            }
        }
        {
            let (base, _record) = c_scratch.device_ptr(&stream);
            let targets: Vec<_> = c.iter_mut().map(|m| m.buf.device_ptr_mut(&stream)).collect();
            let pairs: Vec<(u64, u64)> = (targets.iter().enumerate())
                .map(|(z, (dst, _))| (base + (z * c_shape.size() * 4) as u64, *dst))
                .collect();
            self.copy_listed(&pairs, c_shape.outer, c_shape.inner, c_shape.inner, c_shape.ld)?;
        }
        self.synchronize()
    }

    /// Copies, for each `(source, destination)` pair of device addresses, the `lines x inner`
    /// row-major block at `source` (leading dimension `lda`) to `destination` (`ldb`): the
    /// `pad` kernel over a table of addresses, in launches of at most 65535 pairs (and as many
    /// lines as one grid covers).
    fn copy_listed(
        &self,
        pairs: &[(u64, u64)],
        lines: usize,
        inner: usize,
        lda: usize,
        ldb: usize,
    ) -> Result<()> {
        if lines == 0 || inner == 0 {
            return Ok(());
        }
        let [lines32, inner32, lda32, ldb32] = to_u32([lines, inner, lda, ldb], (lines, inner, 0), "pad")?;
        let pad = &self.loaded.pad;
        let dummy = self.zeros(1)?;
        let mut dummy_out = self.zeros(1)?;
        self.launch_members(&pad.spec, pairs.len(), lines32, |z0, members, r0, rows| {
            let (a_off, b_off) = ((r0 as usize * lda * 4) as u64, (r0 as usize * ldb * 4) as u64);
            let table: Vec<u64> =
                pairs[z0..z0 + members as usize].iter().flat_map(|&(a, b)| [a + a_off, b + b_off]).collect();
            let table =
                self.loaded.stream.clone_htod(&table).map_err(Error::cuda("copying a table of addresses"))?;
            let (list, _record) = table.device_ptr(&self.loaded.stream);
            let mut params = PadParams {
                rows,
                cols: inner32,
                a: dummy.as_view(),
                lda: lda32,
                rows_pad: rows,
                cols_pad: inner32,
                b: dummy_out.as_view_mut(),
                ldb: ldb32,
                a_step: 0,
                b_step: 0,
                list,
            };
            // SAFETY: each pair addresses a `rows x inner` block (from row r0 on) of a matrix
            // with its leading dimension, every destination apart from every other block (a
            // scratch buffer's members, or the C views, which are borrowed mutably); the table
            // has `members` rows; the kernel's own geometry.
            let config = launch_config(&pad.spec, rows, inner32, members);
            unsafe { self.launch(&pad.function, config, &mut params) }.map_err(Error::cuda("launching pad"))
        })
    }

    /// A zero-filled device buffer of `len` elements.
    fn zeros(&self, len: usize) -> Result<CudaSlice<f32>> {
        let len = len.max(1);
        self.loaded.stream.alloc_zeros::<f32>(len).map_err(alloc_error(len.saturating_mul(4)))
    }

    /// A device copy of `data` (with `upload`; zeros of its length without) at the start of the
    /// buffer of `kept`, which stays locked until the result is dropped.
    fn upload_kept<'k>(&self, kept: &'k Kept, data: &[f32], upload: bool) -> Result<Scratch<'k>> {
        let len = data.len().max(1);
        let stream = &self.loaded.stream;
        // SAFETY: the first `len` elements are written below, on the handle's stream, before
        // anything reads them; nothing reads past them.
        let mut buf = unsafe { kept.get(stream, len) }.map_err(alloc_error(len.saturating_mul(4)))?;
        let mut dst = buf.buf_mut().slice_mut(..len);
        if upload && !data.is_empty() {
            stream.memcpy_htod(data, &mut dst).map_err(Error::cuda("copying to the device"))?;
        } else {
            stream.memset_zeros(&mut dst).map_err(Error::cuda("zeroing a device buffer"))?;
        }
        Ok(buf)
    }

    /// Copies each of `c`'s `batch` members from `dev` (laid out as `c`'s own buffer) into
    /// `c`: in one piece when the members tile their extent, else line by line.
    fn download_members(&self, dev: &CudaSlice<f32>, batch: usize, c: &mut Strided<MatMut>) -> Result<()> {
        let m = &mut c.matrix;
        let (inner, outer) = m.layout.extents(m.rows, m.cols);
        let member_span = span(m.layout, m.rows, m.cols, m.ld);
        let extent = (batch - 1) * c.stride + member_span;
        let stream = &self.loaded.stream;
        if m.ld == inner && (batch == 1 || c.stride == member_span) {
            return stream
                .memcpy_dtoh(&dev.slice(..extent), &mut m.data[..extent])
                .map_err(Error::cuda("copying to the host"));
        }
        let staged = stream.clone_dtoh(&dev.slice(..extent)).map_err(Error::cuda("copying to the host"))?;
        for z in 0..batch {
            for line in 0..outer {
                let at = z * c.stride + line * m.ld;
                m.data[at..at + inner].copy_from_slice(&staged[at..at + inner]);
            }
        }
        Ok(())
    }
}

/// The members of a (nonempty) list, packed one after the other without padding (leading
/// dimension the inner extent), and their stride.
fn pack(members: &[MatRef]) -> (Vec<f32>, usize) {
    let m0 = &members[0];
    let (inner, outer) = m0.layout.extents(m0.rows, m0.cols);
    let size = inner * outer;
    let mut out = Vec::with_capacity(members.len() * size);
    for m in members {
        for line in 0..outer {
            out.extend_from_slice(&m.data[line * m.ld..][..inner]);
        }
    }
    (out, size)
}

/// The first member of a packed list shaped `like`, as a view over the packed buffer.
fn packed_view<'a>(data: &'a [f32], like: &MatRef) -> MatRef<'a> {
    let ld = like.layout.extents(like.rows, like.cols).0.max(1);
    MatRef { data, rows: like.rows, cols: like.cols, ld, layout: like.layout }
}

/// The shape of a gathered list's members in their scratch buffer: the members' layout,
/// packed (leading dimension `inner`).
#[derive(Clone, Copy)]
struct DeviceShape {
    layout: Layout,
    rows: usize,
    cols: usize,
    inner: usize,
    outer: usize,
    /// The members' own leading dimension.
    ld: usize,
}

impl DeviceShape {
    fn of(layout: Layout, rows: usize, cols: usize, ld: usize) -> Self {
        let (inner, outer) = layout.extents(rows, cols);
        Self { layout, rows, cols, inner, outer, ld }
    }

    /// Elements per member in the scratch buffer.
    fn size(&self) -> usize {
        self.inner * self.outer
    }

    fn view<'a>(&self, buf: &'a CudaSlice<f32>) -> Result<DeviceMatRef<'a>> {
        DeviceMatRef::new(buf.as_view(), self.layout, self.rows, self.cols, self.inner.max(1))
    }

    fn view_mut<'a>(&self, buf: &'a mut CudaSlice<f32>) -> Result<DeviceMatMut<'a>> {
        DeviceMatMut::new(buf.as_view_mut(), self.layout, self.rows, self.cols, self.inner.max(1))
    }
}
