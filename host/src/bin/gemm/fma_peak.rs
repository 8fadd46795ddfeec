//! The machine's FMA peak, measured: a loop of independent fused multiply-adds on registers only,
//! on `threads` threads at once. The CPU targets (a fraction of peak) are stated against this
//! figure from the same run, not against a datasheet clock.

use std::time::Instant;

/// Independent accumulators: more than FMA latency (4 cycles) times the FMA issue rate (2 per
/// cycle), so the loop is bound by FMA throughput alone.
const CHAINS: usize = 12;
/// Loop trips per measurement: about 40 ms at 100 GFLOP/s per thread.
const TRIPS: usize = 10_000_000;

/// TFLOP/s: the best of three runs of the loop on `threads` threads, with the
/// widest vectors the CPU has (AVX-512, else AVX2+FMA); `None` without either.
pub fn measure(threads: usize) -> Option<f64> {
    #[cfg(target_arch = "x86_64")]
    {
        let (kernel, lanes): (fn() -> f32, usize) = if is_x86_feature_detected!("avx512f") {
            (|| unsafe { x86::avx512() }, 16)
        } else if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
            (|| unsafe { x86::avx2() }, 8)
        } else {
            return None;
        };
        let flops = (2 * CHAINS * lanes * TRIPS * threads) as f64;
        let best = (0..3)
            .map(|_| {
                let started = Instant::now();
                std::thread::scope(|s| {
                    for _ in 0..threads {
                        s.spawn(|| std::hint::black_box(kernel()));
                    }
                });
                started.elapsed().as_secs_f64()
            })
            .fold(f64::INFINITY, f64::min);
        Some(flops / best / 1e12)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = threads;
        None
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    use super::{CHAINS, TRIPS};

    /// `CHAINS` independent `acc = acc * x + y` chains of 16 lanes, `TRIPS` times.
    #[target_feature(enable = "avx512f")]
    pub unsafe fn avx512() -> f32 {
        let (x, y) = (_mm512_set1_ps(0.999_999), _mm512_set1_ps(1e-7));
        let mut acc = [_mm512_set1_ps(1.0); CHAINS];
        for _ in 0..TRIPS {
            for a in &mut acc {
                *a = _mm512_fmadd_ps(*a, x, y);
            }
        }
        acc.iter().map(|&a| _mm512_reduce_add_ps(a)).sum()
    }

    /// The same with 8-lane AVX2 vectors.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn avx2() -> f32 {
        let (x, y) = (_mm256_set1_ps(0.999_999), _mm256_set1_ps(1e-7));
        let mut acc = [_mm256_set1_ps(1.0); CHAINS];
        for _ in 0..TRIPS {
            for a in &mut acc {
                *a = _mm256_fmadd_ps(*a, x, y);
            }
        }
        let mut lanes = [0.0f32; 8];
        acc.iter()
            .map(|&a| {
                unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), a) };
                lanes.iter().sum::<f32>()
            })
            .sum()
    }
}
