//! The scratch buffers that packed operands live in: one per thread and purpose, kept between
//! calls, each returned slice starting on a cache line, and large ones on huge pages.
//!
//! - **Kept between calls**, so that a call neither allocates nor faults pages in.
//! - **A cache line.** A row of a packed `B` panel is then whole cache lines (`NR = 32`: two,
//!   `NR = 16`: one), so no vector load of the microkernel straddles two lines.
//! - **Huge pages.** A packed block of `B` is read by every panel of `A`, 128 bytes a
//!   microkernel step, so with 4 KB pages the microkernel crosses into a new page every 32
//!   steps, and a 1 MB block spans 256 pages, more than the first-level data TLB holds. A
//!   buffer of at least [`HUGE_FROM`] bytes therefore starts on a 2 MB boundary and is marked
//!   for transparent huge pages (`madvise(MADV_HUGEPAGE)`, Linux) before it is first touched,
//!   so that the kernel backs it with 2 MB pages where it can. That is a hint: where the
//!   kernel has huge pages off, or none free, the buffer stays on small pages and everything
//!   works the same. Measurements: `docs/performance-notes.md`.

use std::cell::RefCell;
use std::thread::LocalKey;

use super::simd::LINE_BYTES;

/// A thread's scratch buffer: see [`with_scratch`].
pub(super) type Scratch = RefCell<Vec<f32>>;

/// A huge page of x86-64 and of most 64-bit Arm kernels, in bytes.
const HUGE_PAGE: usize = 2 << 20;

/// The smallest buffer put on huge pages, in bytes: half a huge page, so that at most half of
/// one is spent on a buffer that needs one.
const HUGE_FROM: usize = HUGE_PAGE / 2;

/// Runs `f` on `len` values of this thread's `key` buffer, grown as needed, from a cache line on
/// (from a 2 MB boundary on, on huge pages where the OS gives them, when the slice is at least
/// [`HUGE_FROM`] bytes). The contents are unspecified: callers write every value they later
/// read. A thread that is already inside `f` gets a fresh buffer instead: a caller that is a
/// worker of another rayon pool runs that pool's tasks, which may call here again, while it
/// waits for this call's team.
pub(super) fn with_scratch<R>(
    key: &'static LocalKey<Scratch>,
    len: usize,
    f: impl FnOnce(&mut [f32]) -> R,
) -> R {
    key.with(|cell| match cell.try_borrow_mut() {
        Ok(mut buffer) => f(aligned(&mut buffer, len)),
        Err(_) => f(aligned(&mut Vec::new(), len)),
    })
}

/// `len` values of `buffer` from the boundary [`with_scratch`] promises, `buffer` grown first
/// if it is too short.
fn aligned(buffer: &mut Vec<f32>, len: usize) -> &mut [f32] {
    let bytes = len * size_of::<f32>();
    let boundary = if bytes >= HUGE_FROM { HUGE_PAGE } else { LINE_BYTES };
    let slack = boundary / size_of::<f32>() - 1;
    if buffer.len() < len + slack {
        if boundary == HUGE_PAGE {
            // Whole huge pages past the boundary, so the advice covers only this allocation.
            let whole = bytes.next_multiple_of(HUGE_PAGE) / size_of::<f32>();
            // A fresh zeroed allocation this large is mapped, not written: the advice comes
            // before any page is touched. The old contents need not survive.
            *buffer = vec![0.0; whole + slack];
            let start = buffer.as_ptr().align_offset(HUGE_PAGE);
            advise_huge_pages(&mut buffer[start..start + whole]);
        } else {
            buffer.resize(len + slack, 0.0);
        }
    }
    let start = buffer.as_ptr().align_offset(boundary);
    &mut buffer[start..start + len]
}

/// Asks the OS to back `region` (whole huge pages from a huge-page boundary) with huge pages.
#[cfg(target_os = "linux")]
fn advise_huge_pages(region: &mut [f32]) {
    // SAFETY: `region` is memory this process owns; MADV_HUGEPAGE changes how it is backed, not
    // what it holds. Failure (a kernel without transparent huge pages) leaves it as it was.
    let _ = unsafe { libc::madvise(region.as_mut_ptr().cast(), size_of_val(region), libc::MADV_HUGEPAGE) };
}

#[cfg(not(target_os = "linux"))]
fn advise_huge_pages(_region: &mut [f32]) {}

#[cfg(test)]
mod tests {
    use super::*;

    thread_local! {
        static TEST: Scratch = const { RefCell::new(Vec::new()) };
    }

    #[test]
    fn slices_start_on_their_boundary_and_have_the_length_asked_for() {
        for len in [1, 15, 16, 1000, HUGE_FROM / 4 - 1, HUGE_FROM / 4, 3 * HUGE_PAGE / 4 + 5, 7] {
            with_scratch(&TEST, len, |s| {
                assert_eq!(s.len(), len);
                let boundary = if len * 4 >= HUGE_FROM { HUGE_PAGE } else { LINE_BYTES };
                assert_eq!(s.as_ptr() as usize % boundary, 0, "{len} values");
                s.fill(1.0);
            });
        }
    }

    #[test]
    fn a_nested_call_gets_its_own_buffer() {
        with_scratch(&TEST, 64, |outer| {
            outer.fill(2.0);
            with_scratch(&TEST, 64, |inner| inner.fill(3.0));
            assert!(outer.iter().all(|&x| x == 2.0));
        });
    }
}
