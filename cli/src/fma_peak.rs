//! The machine's FMA peak on one core, measured: a loop of independent fused multiply-adds on
//! registers only. The single-threaded CPU target (a fraction of peak) is stated against this
//! figure, timed in the same rounds as the GEMMs it is compared with (`bench::time_cpu`), not
//! against a datasheet clock.

use std::time::Instant;

/// Independent accumulators: more than FMA latency (4 cycles) times the FMA issue rate (2 per
/// cycle), so the loop is bound by FMA throughput alone.
const CHAINS: usize = 12;

/// The register-only FMA loop with the widest vectors the CPU has (AVX-512, else AVX2+FMA).
#[derive(Clone, Copy)]
pub struct FmaLoop {
    /// `CHAINS` independent chains of `acc = acc * x + y`, the argument's number of trips.
    kernel: fn(usize) -> f32,
    /// f32 lanes per vector.
    lanes: usize,
}

impl FmaLoop {
    /// The loop for this CPU; `None` without AVX-512 or AVX2+FMA.
    pub fn detect() -> Option<Self> {
        #[cfg(target_arch = "x86_64")]
        {
            // SAFETY (both closures): the instruction set was detected just before.
            if is_x86_feature_detected!("avx512f") {
                return Some(FmaLoop { kernel: |trips| unsafe { x86::avx512(trips) }, lanes: 16 });
            }
            if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
                return Some(FmaLoop { kernel: |trips| unsafe { x86::avx2(trips) }, lanes: 8 });
            }
        }
        None
    }

    /// Floating-point operations of one [`run`](Self::run).
    pub fn flops(&self, trips: usize) -> f64 {
        (2 * CHAINS * self.lanes * trips) as f64
    }

    /// `trips` trips on the calling thread.
    pub fn run(&self, trips: usize) {
        std::hint::black_box((self.kernel)(std::hint::black_box(trips)));
    }

    /// The trip count for a run of about `seconds` (at least 1000 trips), from a calibration
    /// run of a millisecond or so.
    pub fn trips_for(&self, seconds: f64) -> usize {
        const PROBE: usize = 200_000;
        let started = Instant::now();
        self.run(PROBE);
        let per_trip = started.elapsed().as_secs_f64() / PROBE as f64;
        ((seconds / per_trip) as usize).max(1000)
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    use super::CHAINS;

    /// `CHAINS` independent `acc = acc * x + y` chains of 16 lanes, `trips` times.
    #[target_feature(enable = "avx512f")]
    pub unsafe fn avx512(trips: usize) -> f32 {
        let (x, y) = (_mm512_set1_ps(0.999_999), _mm512_set1_ps(1e-7));
        let mut acc = [_mm512_set1_ps(1.0); CHAINS];
        for _ in 0..trips {
            for a in &mut acc {
                *a = _mm512_fmadd_ps(*a, x, y);
            }
        }
        acc.iter().map(|&a| _mm512_reduce_add_ps(a)).sum()
    }

    /// The same with 8-lane AVX2 vectors.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn avx2(trips: usize) -> f32 {
        let (x, y) = (_mm256_set1_ps(0.999_999), _mm256_set1_ps(1e-7));
        let mut acc = [_mm256_set1_ps(1.0); CHAINS];
        for _ in 0..trips {
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
